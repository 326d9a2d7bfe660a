"""The result of :func:`didmem.sensitivity` (light to import: pandas loads when it is used)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..results._table_file import TableFile

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SensitivityResult"]

VARIANT_TEXT = {  # SensitivityResult.variant in words
    "bias positive": "post-treatment violations of one sign, non-negative (positive bias)",
    "bias negative": "post-treatment violations of one sign, non-positive (negative bias)",
    "monotonicity increasing": "a violation that increases from the reference period on",
    "monotonicity decreasing": "a violation that decreases from the reference period on",
}


@dataclass(frozen=True)
class SensitivityResult(TableFile):
    """Confidence sets for a target under restricted violations of parallel trends.

    Attributes
    ----------
    restriction : str
        The restriction on the violations (``"smoothness"``: ``Delta^SD(M)``;
        ``"relative_magnitudes"``: ``Delta^RM(Mbar)``).
    target : pandas.Series
        Weights on the post-treatment event times that define the target.
    original : tuple of float
        The confidence interval under exact parallel trends.
    intervals : pandas.DataFrame
        One row per ``m``: ``m, lower, upper, method``.
    breakdown : float
        The smallest ``m`` at which the interval contains zero (0.0 when the original one
        already does; ``inf`` when none up to the search bound does).
    alpha : float
        One minus the coverage.
    variant : str or None
        The sign or monotonicity restriction intersected with ``restriction``
        (``"bias positive"``, ``"monotonicity decreasing"``, ...), or None.
    """

    restriction: str
    target: pd.Series = field(repr=False)
    original: tuple
    intervals: pd.DataFrame = field(repr=False)
    breakdown: float
    alpha: float = 0.05
    variant: str | None = None

    def to_frame(self) -> pd.DataFrame:
        """``m, lower, upper, method``: the original interval first (``m`` NaN), then one row
        per ``m``."""
        import pandas as pd

        first = pd.DataFrame({"m": [np.nan], "lower": [self.original[0]],
                              "upper": [self.original[1]], "method": ["original"]})
        return pd.concat([first, self.intervals], ignore_index=True)

    def summary(self) -> str:
        """The intervals as text, with the target, the restriction and the breakdown value."""
        from ..results.common import level_label

        bound = "M" if self.restriction == "smoothness" else "Mbar"
        shape = f" with {VARIANT_TEXT[self.variant]}" if self.variant else ""
        used = self.target[self.target != 0]
        what = (f"the effect at event time {used.index[0]:g}" if used.size == 1 else
                "the weighted event times " + ", ".join(
                    f"{e:g} ({w:.3g})" for e, w in used.items()))
        table = self.to_frame().to_string(index=False, float_format=lambda v: f"{v:.6g}")
        return (f"Sensitivity of {what} to violations of parallel trends\n"
                f"restriction: {self.restriction.replace('_', ' ')}{shape}; "
                f"{level_label(self.alpha)} confidence intervals ({bound} = m)\n{table}\n"
                f"breakdown {bound}: {self.breakdown:.6g} (the smallest {bound} whose interval "
                "contains zero)")

    FILE_KIND, FILE_WHAT = "sensitivity", "sensitivity"

    def _file_contents(self):
        return self.intervals, {
            "restriction": self.restriction,
            "target": [[float(e), float(w)] for e, w in self.target.items()],
            "original": [float(v) for v in self.original], "breakdown": float(self.breakdown),
            "alpha": float(self.alpha), "variant": self.variant}

    @classmethod
    def _from_file(cls, frame, settings: dict) -> "SensitivityResult":
        import pandas as pd

        target = pd.Series({e: w for e, w in settings["target"]}, dtype=float)
        return cls(restriction=settings["restriction"], target=target,
                   original=tuple(settings["original"]), intervals=frame,
                   breakdown=float(settings["breakdown"]), alpha=float(settings["alpha"]),
                   variant=settings["variant"])
