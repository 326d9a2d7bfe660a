"""The leaf of the results: scalar estimates, the pre-test, intervals and the profile matrix.

Everything here is shared by fitted results (:mod:`.cells`), aggregations
(:mod:`.aggregations`) and saved results (:mod:`.saving`); it imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._arrays import PicklableProxies
from ..errors import ParameterError

__all__ = ["Estimate", "Pretest", "CellTable", "profile_matrix", "SIGN_NOTE", "level_label",
           "PicklableProxies"]

SIGN_NOTE = (
    "Sign convention: an estimate is positive when training on the instances raised the "
    "outcome (memorisation under a higher-is-better metric)."
)


@dataclass(frozen=True)
class Estimate:
    """A scalar estimate with its standard error and (pointwise) confidence interval."""

    estimate: float
    std_error: float
    ci_lower: float
    ci_upper: float

    @property
    def significant(self) -> bool:
        """True when the interval excludes zero."""
        return bool(self.ci_lower > 0 or self.ci_upper < 0)


@dataclass(frozen=True)
class Pretest:
    """Wald pre-test of parallel trends: all pre-treatment cells are zero.

    ``statistic = tau_pre' V^-1 tau_pre`` with the analytic covariance ``V`` of the
    pre-treatment cells (those with cohort > time, less cells whose variance is zero),
    chi-squared with ``df`` = their number, as R did's ``att_gt`` reports.
    ``note`` says why the test is missing when ``statistic`` is NaN.
    """

    statistic: float
    df: int
    pvalue: float
    note: str = ""


def profile_matrix(frame: pd.DataFrame, value: str, significant_only: bool) -> pd.DataFrame:
    """Cohort x time matrix of one column of a tidy cell table (NaN where no cell)."""
    if not isinstance(value, str) or value not in frame.columns:
        raise ParameterError(f"Unknown column {value!r}; choose from {list(frame.columns)}.")
    if significant_only:
        frame = frame.copy()
        frame.loc[~frame["significant"], value] = np.nan
    return frame.pivot(index="cohort", columns="time", values=value)


def _interval(est, se, crit):
    with np.errstate(invalid="ignore"):
        return est - crit * se, est + crit * se


def _significant(lo, hi):
    with np.errstate(invalid="ignore"):
        return (lo > 0) | (hi < 0)


def level_label(alpha: float) -> str:
    """The coverage of an interval with level ``alpha`` as a label, e.g. ``"90%"``."""
    return f"{100 * (1 - alpha):g}%"


class CellTable:
    """What a result held as its table of cells (``self.cells``, one row per cell) gives:
    the estimates, the significance flags and the table itself, each a copy."""

    @property
    def estimates(self) -> np.ndarray:
        return self.cells["estimate"].to_numpy(copy=True)

    @property
    def significant(self) -> np.ndarray:
        return self.cells["significant"].to_numpy(copy=True)

    def to_frame(self) -> pd.DataFrame:
        """The cells, one row per cell (a copy)."""
        return self.cells.copy()
