"""The result of a dose-response fit: the cumulative effect of ``d`` exposures against none.

:class:`DoseResponseResult` holds ``theta(d, c)``, one row per (dose, checkpoint), with its
standard errors and a simultaneous band over all rows (see
:func:`didmem.dose_response`). It is saved as one parquet table with its settings
(``save``; read back with :func:`didmem.load_result`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from .common import level_label
from ._table_file import TableFile

__all__ = ["DoseResponseResult"]


@dataclass(frozen=True)
class DoseResponseResult(TableFile):
    """Cumulative effects of ``d`` exposures against none, by dose and checkpoint.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (dose, time): ``dose, time, estimate, std_error, ci_lower, ci_upper,
        n_units, n_control`` (the band's bounds in ``ci_lower``/``ci_upper``).
    outcome : str
    base : float or None
        The checkpoint whose outcome is subtracted from every unit's (a difference in
        differences), or None for outcomes in levels.
    alpha : float
        One minus the band's coverage.
    critical_value : float
        The multiplier of the standard errors in the band.
    band : {"simultaneous", "pointwise"}
    n_bootstrap : int
        Multiplier-bootstrap draws behind a simultaneous band (0: pointwise).
    """

    table: pd.DataFrame = field(repr=False)
    outcome: str
    base: float | None
    alpha: float
    critical_value: float
    band: str
    n_bootstrap: int

    def to_frame(self) -> pd.DataFrame:
        """The rows, a copy: ``dose, time, estimate, std_error, ci_lower, ci_upper,
        n_units, n_control``."""
        return self.table.copy()

    def at(self, time=None) -> pd.DataFrame:
        """The dose-response at one checkpoint (the last by default), indexed by dose."""
        times = self.table["time"]
        time = times.max() if time is None else time
        rows = self.table[times == time]
        if rows.empty:
            from ..errors import ParameterError

            raise ParameterError(f"DoseResponseResult.at: no rows at time {time!r}; the "
                                 f"times are {sorted(times.unique().tolist())}.")
        return rows.set_index("dose").drop(columns="time")

    def summary(self) -> str:
        """The rows at the last checkpoint as text, with the design and the band."""
        last = self.at()
        doses = self.table["dose"].unique()
        how = ("levels (random assignment)" if self.base is None
               else f"changes since checkpoint {self.base:g} (difference in differences)")
        table = last.to_string(float_format=lambda v: f"{v:.6g}")
        return (f"Dose-response of {self.outcome!r}: d exposures against none, "
                f"{doses.size} doses x {self.table['time'].nunique()} checkpoints; outcome in "
                f"{how}\n{level_label(self.alpha)} {self.band} band over all rows, critical "
                f"value {self.critical_value:.3f} ({self.n_bootstrap} bootstrap draws)\n"
                f"at checkpoint {self.table['time'].max():g}:\n{table}")

    FILE_KIND, FILE_WHAT = "dose_response", "dose-response"

    def _file_contents(self):
        return self.table, {"outcome": self.outcome, "base": self.base,
                            "alpha": float(self.alpha),
                            "critical_value": float(self.critical_value), "band": self.band,
                            "n_bootstrap": int(self.n_bootstrap)}

    @classmethod
    def _from_file(cls, frame, settings: dict) -> "DoseResponseResult":
        return cls(table=frame, outcome=settings["outcome"], base=settings["base"],
                   alpha=float(settings["alpha"]),
                   critical_value=float(settings["critical_value"]), band=settings["band"],
                   n_bootstrap=int(settings["n_bootstrap"]))
