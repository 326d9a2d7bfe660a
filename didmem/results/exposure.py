"""The result of the k-th exposure: group-time effects keyed by the k-th exposure's cohort.

:class:`ExposureResult` is a :class:`~didmem.results.cells.GroupTimeResult` whose cells are
``tau_k(g, c)``, the effect at checkpoint ``c`` of the ``k``-th exposure received at cohort
``g``, pooled over the earlier-exposure histories of cohort ``g``'s units, each compared with
controls of its own history. Everything a first-exposure result offers (aggregations, the
band, pre-tests, sensitivity, saving, plots) works the same way; it adds the exposure number,
the history-matched control counts and the table of histories used and dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .cells import GroupTimeResult

__all__ = ["ExposureResult", "HISTORY_STATUS"]

#: what happened to a history (the units sharing earlier exposure cohorts)
HISTORY_STATUS = {
    "used": "used: its units are treated or controls",
    "dropped": "dropped: no unit of this history is without a k-th exposure in the panel, "
               "so its cohorts have no history-matched control at the last checkpoint",
    "unused": "not used: no unit of this history has its k-th exposure inside the panel",
}


@dataclass(frozen=True, eq=False)
class ExposureResult(GroupTimeResult):
    """Group-time effects of the ``k``-th exposure (see the module notes).

    Attributes
    ----------
    exposure : int
        ``k``: which exposure the cells are the effect of.
    history : {"matched", "ignored"}
        ``"matched"``: each treated unit is compared with controls of its own history
        (earlier exposure cohorts); ``"ignored"``: with any unit that has had ``k - 1``
        exposures (the naive comparison, biased while earlier effects still change).
    histories : pandas.DataFrame
        One row per history: its earlier cohorts (``cohort``, ``cohort_2``, ...), its
        units, those with a ``k``-th exposure inside the panel, those without one, and its
        ``status`` (see :data:`HISTORY_STATUS`).
    matched_controls : ndarray
        Number of history-matched control units of each cell.
    """

    exposure: int = 1
    history: str = "matched"
    histories: pd.DataFrame = field(default=None, repr=False)
    matched_controls: np.ndarray = field(default=None, repr=False)

    def to_frame(self) -> pd.DataFrame:
        """Tidy table, one row per (cohort, time) cell, as for the first exposure.

        ``cohort`` is the cohort of the ``k``-th exposure; ``n_control`` counts the
        history-matched controls; ``exposure`` is ``k`` and ``n_histories`` the number of
        histories pooled in the cell (which ones: :attr:`histories`).
        """
        frame = super().to_frame()
        frame["n_control"] = np.asarray(self.matched_controls)
        frame.insert(0, "exposure", self.exposure)
        frame["n_histories"] = self._histories_per_cohort()[self.cells.k]
        return frame

    def _histories_per_cohort(self) -> np.ndarray:
        used = self.histories[self.histories["status"] == "used"]
        counts = np.zeros(self.prepared.n_cohorts, dtype=np.int64)
        for k, g in enumerate(self.prepared.cohorts):
            counts[k] = int(used["treated_cohorts"].map(lambda cs, g=g: g in cs).sum())
        return counts

    def summary(self) -> str:
        """The first exposure's summary with the exposure, its comparison and the histories."""
        status = self.histories["status"].value_counts()
        line = (f"  exposure {self.exposure}: controls "
                + ("of the same history (earlier exposure cohorts)" if self.history == "matched"
                   else "of any history (naive: biased while earlier effects change)")
                + f"; histories: {int(status.get('used', 0))} used, "
                f"{int(status.get('dropped', 0))} dropped (no control), "
                f"{int(status.get('unused', 0))} without a k-th exposure in the panel")
        lines = super().summary().split("\n")
        return "\n".join(lines[:1] + [line] + lines[1:])

    def __repr__(self) -> str:
        return (f"<ExposureResult exposure={self.exposure} {self.estimator} "
                f"outcome={self.outcome!r}: {self.cells.size} cells, {self.n_units} units, "
                f"{self.band} band>")
