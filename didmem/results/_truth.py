"""Truth scoring, written once: a known truth matched to a result's cells, and the estimates
scored against it.

Where the true tau(g, c) is known (the lab's ``truth.parquet``, the truth of
:func:`didmem.datasets.simulate_panel`), the demo, the report, :func:`didmem.compare` and the
lab's replications all (1) select the truth of the result's outcome and exposure
(:func:`truth_table`), (2) join it to the result's cells (:func:`cells_with_truth`), (3) score
the estimates against it (:func:`score_cells`) and (4) average it as an aggregation averages
the estimates (:func:`true_aggregate`). This module is the one place each of those happens.

A truth is a table with ``cohort``, ``time`` and ``tau``, and optionally ``metric`` (it holds
several outcomes, as the lab's does) and ``exposure`` (it holds the truth of every exposure,
as a lab run with ``exposures > 1`` writes: a result of the ``k``-th exposure is matched with
the rows of exposure ``k``; a result that is not of a later exposure with those of exposure 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ..errors import ParameterError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CELL_SETS", "TruthScore", "check_truth_frame", "truth_table", "result_exposure",
           "truth_column", "result_truth", "cells_with_truth", "select_cells", "score_cells", "score_estimates",
           "true_aggregate"]

CELL_SETS = ("post", "all", "instantaneous", "residual")
"""Which cells are scored: post-treatment (``time >= cohort``), all, ``time == cohort``, or
those at the last time."""


@dataclass(frozen=True)
class TruthScore:
    """How far a result's estimates are from the truth, over the cells both have.

    Attributes
    ----------
    n_cells : int
        Cells with a finite estimate and a finite truth (the others are not scored).
    bias : float
        Mean error, ``mean(estimate - tau)``.
    rmse : float
        ``sqrt(mean((estimate - tau)^2))``.
    corr : float
        Pearson correlation of estimates and truth (NaN for fewer than two cells or no
        spread).
    covered : int
        Cells whose interval covers the truth (a cell without an interval covers nothing).
    coverage : float
        Share of the cells with an interval that cover the truth (NaN when none has one).
    covers_all : float
        1.0 when every cell has an interval and they all cover the truth at once (what a
        simultaneous band promises), 0.0 when one misses, NaN when a cell lacks an interval.
    """

    n_cells: int
    bias: float
    rmse: float
    corr: float
    covered: int
    coverage: float
    covers_all: float

    def describe(self) -> str:
        """The sentence the demo prints in the terminal and the report shows."""
        return (f"against the truth: RMSE {self.rmse:.3g} and mean error {self.bias:+.3g} "
                f"over {self.n_cells} post-treatment cells; the band covers the truth in "
                f"{self.covered} of {self.n_cells}")


def _numeric(frame: pd.DataFrame, column: str, source: str) -> np.ndarray:
    """A column as float64, or a ParameterError naming the column, a value and the source."""
    import pandas as pd

    values = frame[column]
    try:
        return values.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        converted = pd.to_numeric(values, errors="coerce")
        bad = values[converted.isna() & values.notna()]
        example = bad.iloc[0] if len(bad) else values.iloc[0]
        raise ParameterError(
            f"{source} has values in column {column!r} that are not numbers (e.g. "
            f"{example!r}, {len(bad)} of {len(values)} rows): cohorts and times are training "
            "steps (the never-treated cohort NaN or inf) and tau a number. Write them as "
            "numbers, as a lab run's truth.parquet does.") from None


def check_truth_frame(truth, source: str = "the truth") -> None:
    """Refuse a truth that is not a table with numeric ``cohort``, ``time`` and ``tau`` (and
    ``exposure``, where it has one); ``source`` names it in the message."""
    import pandas as pd

    if not isinstance(truth, pd.DataFrame):
        raise ParameterError(f"truth must be a DataFrame with cohort, time, tau; got "
                             f"{type(truth).__name__}.")
    missing = [c for c in ("cohort", "time", "tau") if c not in truth.columns]
    if missing:
        raise ParameterError(f"{source} lacks the columns {missing}; it needs cohort, time, "
                             "tau (and metric, exposure where it holds several).")
    for column in ("cohort", "time", "tau", "exposure"):
        if column in truth.columns:
            _numeric(truth, column, source)


def truth_table(truth, *, metric: str | None = None, exposure: int | None = None,
                column: str = "tau", source: str = "the truth") -> pd.DataFrame:
    """The truth's cells of one metric and exposure: ``cohort``, ``time``, ``tau`` (float64).

    Parameters
    ----------
    truth : pandas.DataFrame
        Columns ``cohort``, ``time``, ``tau`` and optionally ``metric`` and ``exposure``.
    metric : str, optional
        The rows of this metric, when the truth has a ``metric`` column (needed when it
        holds more than one).
    exposure : int, optional
        The rows of this exposure, when the truth has an ``exposure`` column (default: the
        first). A truth without one is of the first exposure.
    column : str
        The truth's column that holds the estimand (``"tau"``; the lab's truth also has
        ``"tau_nyt"``, see :func:`truth_column`), returned as ``tau``.
    source : str
        How messages name the truth (``"the truth file 'truth.csv'"``).

    Raises
    ------
    ParameterError
        When the truth is not a table of those columns, its cohorts, times or tau are not
        numbers, it has no row of the metric or exposure, or more than one row for a cell.
    """
    import pandas as pd

    check_truth_frame(truth, source)
    if "metric" in truth.columns:
        metrics = list(truth["metric"].unique())
        if metric is None and len(metrics) > 1:
            raise ParameterError(f"{source} holds several metrics {metrics}; pick one with "
                                 "metric=...")
        if metric is not None:
            if metric not in metrics:
                raise ParameterError(f"{source} has no metric {metric!r}; it has {metrics}.")
            truth = truth[truth["metric"] == metric]
    k = 1 if exposure is None else int(exposure)
    if "exposure" in truth.columns:
        exposures = _numeric(truth, "exposure", source)
        if not (exposures == k).any():
            raise ParameterError(
                f"{source} has no row of exposure {k}; it has exposures "
                f"{sorted({int(e) for e in exposures if np.isfinite(e)})}.")
        truth = truth[exposures == k]
    elif k != 1:
        raise ParameterError(
            f"{source} has no 'exposure' column, so it is the truth of the first exposure; "
            f"the result is of exposure {k}. Give the truth of every exposure (a lab run with "
            "exposures > 1 writes it to truth.parquet, with an 'exposure' column).")
    if column not in truth.columns:
        raise ParameterError(f"{source} has no column {column!r}.")
    out = pd.DataFrame({name: _numeric(truth, name, source)
                        for name in ("cohort", "time", column)}).rename(columns={column: "tau"})
    twice = out.duplicated(["cohort", "time"], keep=False)
    if twice.any():
        first = out[twice].iloc[0]
        same = ((out["cohort"] == first["cohort"]) & (out["time"] == first["time"])).to_numpy()
        rows = truth[same]  # the first cell's rows: which columns tell them apart?
        extra = [c for c in truth.columns if c not in ("cohort", "time", column)
                 and rows[c].astype(str).nunique() > 1]
        n_cells = int(out[twice].drop_duplicates(["cohort", "time"]).shape[0])
        raise ParameterError(
            f"{source} has more than one row for {n_cells} (cohort, time) cells, e.g. cohort "
            f"{first['cohort']:g} at time {first['time']:g}; it must have one row per cell"
            + (f" (does a column among {extra} tell them apart? keep the rows of one value)"
               if extra else "") + ".")
    return out.reset_index(drop=True)


def result_exposure(result, frame: pd.DataFrame | None = None) -> int:
    """Which exposure a result is of: its cells' ``exposure`` column, its ``exposure``
    parameter, else 1 (a result of the first exposure, or of an estimator without exposures).
    """
    import pandas as pd

    if frame is not None and "exposure" in frame.columns and len(frame):
        values = pd.unique(frame["exposure"])
        if len(values) == 1:
            return int(values[0])
    params = getattr(result, "params", None)
    if isinstance(params, Mapping) and params.get("exposure") is not None:
        return int(params["exposure"])
    return 1


def truth_column(result, truth, exposure: int = 1) -> str:
    """The truth's column of the result's estimand: ``"tau"``, or ``"tau_nyt"`` for a result
    of the first exposure with not-yet-treated controls when the truth has that column.

    The lab's ``tau`` is the direct effect against never-treated controls (the total effect
    less the cohort's spillover on the validation instances); against not-yet-treated
    controls the spillover on the later cohorts counts too, which ``tau_nyt`` takes out.
    A later exposure's ``tau`` is already against its history-matched controls.
    """
    params = getattr(result, "params", None)
    control = params.get("control_group") if isinstance(params, Mapping) else None
    if control == "not_yet_treated" and exposure == 1 and "tau_nyt" in truth.columns:
        return "tau_nyt"
    return "tau"


def result_truth(result, truth, frame: pd.DataFrame | None = None, *,
                 metric: str | None = None, source: str = "the truth") -> pd.DataFrame:
    """The truth's cells of the result's estimand (:func:`truth_table` of its exposure and
    :func:`truth_column`); ``frame`` is the result's cells when already at hand."""
    check_truth_frame(truth, source)
    exposure = result_exposure(result, frame)
    return truth_table(truth, metric=metric, exposure=exposure, source=source,
                       column=truth_column(result, truth, exposure))


def cells_with_truth(result, truth, *, source: str = "the truth") -> pd.DataFrame:
    """``result.to_frame()`` with the true ``tau`` of each cell (NaN where the truth lacks it),
    matched to the result's outcome (the truth's ``metric``), exposure and control group
    (:func:`result_truth`).

    Raises
    ------
    ParameterError
        As :func:`truth_table`, or when the truth shares no cell with the result.
    """
    frame = result.to_frame()
    true = result_truth(result, truth, frame, metric=str(result.outcome), source=source)
    out = frame.merge(true, on=["cohort", "time"], how="left")
    if out["tau"].notna().sum() == 0:
        raise ParameterError(f"{source[:1].upper() + source[1:]} shares no (cohort, time) cell "
                             f"with the result of {result.outcome!r}: its cohorts are "
                             f"{sorted(true['cohort'].unique())[:8]}, the result's "
                             f"{sorted(frame['cohort'].unique())[:8]}.")
    return out


def select_cells(frame: pd.DataFrame, cells: str = "post") -> pd.DataFrame:
    """The rows of ``frame`` (columns cohort, time) that :data:`CELL_SETS` names."""
    if cells == "post":
        return frame[frame["time"] >= frame["cohort"]]
    if cells == "instantaneous":
        return frame[frame["time"] == frame["cohort"]]
    if cells == "residual":
        return frame[frame["time"] == frame["time"].max()]
    return frame


def score_estimates(estimate, tau, ci_lower=None, ci_upper=None) -> TruthScore:
    """Score estimates against the truth, cell by cell (see :class:`TruthScore`).

    Cells whose estimate or truth is not finite are left out; intervals are optional (NaN
    or None: the cell has none).
    """
    est = np.asarray(estimate, dtype=np.float64)
    ref = np.asarray(tau, dtype=np.float64)
    lo = np.full(est.shape, np.nan) if ci_lower is None else np.asarray(ci_lower, np.float64)
    hi = np.full(est.shape, np.nan) if ci_upper is None else np.asarray(ci_upper, np.float64)
    ok = np.isfinite(est) & np.isfinite(ref)
    est, ref, lo, hi = est[ok], ref[ok], lo[ok], hi[ok]
    n = int(ok.sum())
    err = est - ref
    corr = np.nan
    if n > 1 and np.std(est) > 0 and np.std(ref) > 0:
        corr = float(np.corrcoef(est, ref)[0, 1])
    has_ci = np.isfinite(lo) & np.isfinite(hi)
    inside = (lo <= ref) & (ref <= hi)
    return TruthScore(
        n_cells=n,
        bias=float(err.mean()) if n else np.nan,
        rmse=float(np.sqrt(np.mean(err ** 2))) if n else np.nan,
        corr=corr,
        covered=int(inside.sum()),
        coverage=float(inside[has_ci].mean()) if has_ci.any() else np.nan,
        covers_all=float(inside.all()) if n and has_ci.all() else np.nan,
    )


def score_cells(cells: pd.DataFrame, *, reference: str = "tau") -> TruthScore:
    """:func:`score_estimates` of a table's ``estimate`` against its ``reference`` column,
    with its ``ci_lower`` / ``ci_upper`` where it has them."""
    return score_estimates(cells["estimate"], cells[reference],
                           cells["ci_lower"] if "ci_lower" in cells else None,
                           cells["ci_upper"] if "ci_upper" in cells else None)


def true_aggregate(cells: pd.DataFrame, aggregation: str, key: str,
                   weights: Mapping | None = None) -> pd.Series:
    """The truth of an aggregation by its key, with the aggregation's cohort weights.

    ``instantaneous`` (key ``cohort``): tau(g, g); ``residual`` (``cohort``): tau(g, T) at the
    last checkpoint; ``persistent`` (``event_time``): the mean of tau(g, g + e) over the
    cohorts with a cell at e, weighted by ``weights`` (cohort -> weight: R did's ``pg``, the
    result's ``settings.cohort_shares``), as the estimate is; without them by each cell's
    treated count, which equals those weights on a balanced panel without sampling weights.
    """
    if aggregation == "instantaneous":
        rows = cells[cells["event_time"] == 0]
        return rows.set_index("cohort")["tau"]
    if aggregation == "residual":
        rows = cells[cells["time"] == cells["time"].max()]
        return rows.set_index("cohort")["tau"]
    rows = cells[cells["event_time"] > 0].dropna(subset=["tau"])
    if weights is None:
        weight = rows["n_treated"].astype(float)
    else:
        weight = rows["cohort"].map(dict(weights)).astype(float)
    weighted = (rows["tau"] * weight).groupby(rows[key]).sum()
    return weighted / weight.groupby(rows[key]).sum()
