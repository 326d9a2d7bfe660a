"""From a :class:`~didmem.panel.Panel` to the arrays the kernels work on.

:func:`prepare_panel` applies R did's pre-processing (cohorts after the last period are
never treated; units treated by the first period plus anticipation are dropped; without
never-treated units the not-yet-treated design drops the late periods) and sorts the units
into blocks, one per treated cohort, the never-treated last. :func:`did_cells` and
:func:`level_cells` lay out the (cohort, time) cells of the two estimators. Its steps
:func:`r_preprocessing` (R's rules on the units' cohorts) and :func:`cohort_blocks` (the
blocks and their size checks) are shared with the moments' preparation
(:func:`~didmem.inference.moments.cells.prepare_moments`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DataDroppedWarning, EstimationError, SmallCohortWarning
from .._messages import listing as _listing
from .influence import cell_counts
from ..panel import Panel

MIN_COHORT_SIZE = 5  # R did warns below (number of covariates + 5) units
_STACKLEVEL = 5  # the warnings of the pre-processing point at the estimator's fit


def _fmt(value) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _cohort_labels(values) -> list[str]:
    return [_fmt(g) for g in np.unique(values)]


@dataclass(frozen=True)
class HoleRows:
    """Observed rows of a design with holes, sorted by unit (in block order) and time.

    Attributes
    ----------
    unit, time : ndarray of int64
        Row's unit (design row) and time index.
    y : ndarray
        Outcome, sign-oriented and centred on each time's observed mean (which leaves
        every estimate and influence function unchanged).
    unit_start : ndarray (n_units + 1,)
        Rows of unit ``i`` are ``unit_start[i]:unit_start[i+1]``.
    x : ndarray (rows x covariates) or None
        Each row's covariates, where the fit uses them.
    """

    unit: np.ndarray
    time: np.ndarray
    y: np.ndarray
    unit_start: np.ndarray
    x: np.ndarray | None = None

    @property
    def size(self) -> int:
        return int(self.unit.size)



@dataclass(frozen=True)
class PreparedPanel:
    """Units sorted into cohort blocks, with the outcome as a dense matrix.

    Attributes
    ----------
    y : ndarray (n_units, n_times)
        Outcome, sign-oriented, rows sorted by block. Each column is centred on its mean,
        which leaves every estimate and influence function unchanged.
    w : ndarray (n_units,)
        Sampling weights (ones without weights).
    starts : ndarray (n_blocks + 1,)
        Block ``k`` is rows ``starts[k]:starts[k+1]``; the last block is never-treated.
    cohorts : ndarray (n_cohorts,)
        Treated cohort values, ascending.
    times : ndarray (n_times,)
    clusters : ndarray or None
        Cluster code of each row (0 .. n_clusters-1).
    n_clusters : int
        Number of clusters, 0 without clustering.
    unit_labels : ndarray
        Unit identifier of each row.
    x : ndarray (n_units, n_times, n_covariates) or None
        Covariates, rows sorted as ``y`` (not centred); None without covariates.
    holes : HoleRows or None
        A panel with holes or cross-sections: the observed rows in long form (``y`` is then
        None); None for a balanced panel.
    """

    y: np.ndarray
    w: np.ndarray
    starts: np.ndarray
    cohorts: np.ndarray
    times: np.ndarray
    clusters: np.ndarray | None
    n_clusters: int
    unit_labels: np.ndarray
    x: np.ndarray | None = None
    holes: Any = None

    @property
    def n_units(self) -> int:
        return self.w.shape[0]

    @property
    def n_cohorts(self) -> int:
        return self.cohorts.size

    @property
    def block_weights(self) -> np.ndarray:
        """Sum of weights per block (treated cohorts, then never-treated)."""
        return np.add.reduceat(self.w, self.starts[:-1]) if self.n_units else np.zeros(0)

    @property
    def cohort_shares(self) -> np.ndarray:
        """R did's ``pg``: each treated cohort's share of the (weighted) units, the weights of
        every average over cohorts (aggregations, their estimated-weights term, the report's
        truth)."""
        return self.block_weights[: self.n_cohorts] / self.n_units

    def block_of_rows(self) -> np.ndarray:
        return np.repeat(np.arange(self.starts.size - 1), np.diff(self.starts))


@dataclass(frozen=True)
class Cells:
    """The (cohort, time) cells of an estimator: integer layout plus labels."""

    k: np.ndarray
    t: np.ndarray
    b: np.ndarray
    cs: np.ndarray
    ref: np.ndarray

    @property
    def size(self) -> int:
        return self.k.size

    def kernel_args(self):
        return self.k, self.t, self.b, self.cs, self.ref


def prepare_panel(
    panel: Panel,
    outcome: str | None,
    *,
    need_never_treated: bool,
    anticipation: float,
    lower_is_better: bool,
    owner: str,
    use_covariates: bool = False,
) -> PreparedPanel:
    """Apply R did's pre-processing and sort the units into cohort blocks.

    The one place of R ``did``'s pre-processing, for balanced panels, panels with holes and
    repeated cross-sections alike (:func:`r_preprocessing`); only the outcome's layout
    differs: a dense units x times matrix (:func:`_dense_outcomes`) or the observed rows in
    long form (:func:`_observed_rows`, ``design.holes``). A cohort's size is its units, or
    for data with holes its rows per period, as R counts it there.
    """
    name = panel.resolve_outcome(outcome)
    holes = panel.has_holes
    times = np.asarray(panel.times, dtype=np.float64)
    cohorts = np.array(panel.cohorts, dtype=np.float64)
    noun = "rows" if holes and panel.layout == "cross_sections" else "units"
    zero_hint = ""
    if panel.never_treated_code is None and np.any(cohorts == 0) and 0 <= times[0]:
        zero_hint = (" If 0 marks never-treated units (R did's convention), pass "
                     "never_treated=0 to Panel (CLI: --never-treated 0).")
    cut, keep = r_preprocessing(cohorts, times, need_never_treated=need_never_treated,
                                anticipation=anticipation, owner=owner, noun=noun,
                                zero_hint=zero_hint)
    layout = _observed_rows if holes else _dense_outcomes
    return layout(panel, name, cohorts, times, cut, keep, lower_is_better=lower_is_better,
                  need_never_treated=need_never_treated, owner=owner,
                  use_covariates=use_covariates)


def r_preprocessing(cohorts, times, *, need_never_treated: bool, anticipation: float,
                    owner: str, noun: str, zero_hint: str):
    """R ``did``'s pre-processing of the cohorts, each step with its warning or error.

    Cohorts after the last period become never-treated (``cohorts`` is changed in place);
    without never-treated units the latest cohort is only a comparison group and the
    periods from it on are dropped; units treated by the first (kept) period plus
    anticipation are dropped. Returns ``cut`` (the periods kept) and ``keep`` (the units
    kept).
    """
    if np.all(np.isfinite(cohorts) & (cohorts <= times[0] + anticipation)):
        raise EstimationError(
            f"{owner}: every one of the {cohorts.size} {noun} is treated by the first period "
            f"{_fmt(times[0])}" + (f" plus anticipation {_fmt(anticipation)}" if anticipation
                                   else "")
            + " (cohorts " + _listing(_cohort_labels(cohorts), plain=True) + f"), so no "
            f"{noun[:-1]} has an untreated period to compare with and nothing can be "
            "estimated. The cohort column must hold the first period of treatment, NaN or inf "
            "for never-treated units." + zero_hint
        )
    late = np.isfinite(cohorts) & (cohorts > times[-1])
    if late.any():
        warnings.warn(
            f"{owner}: {int(late.sum())} {noun} have a cohort after the last time "
            f"{_fmt(times[-1])} (cohorts {_listing(_cohort_labels(cohorts[late]), plain=True)}); "
            "they are never treated within the panel and count as never-treated, as in R did.",
            DataDroppedWarning, stacklevel=_STACKLEVEL)
        cohorts[late] = np.inf
    cut = np.ones(times.size, dtype=bool)
    if not np.isinf(cohorts).any():
        if need_never_treated:
            raise EstimationError(
                f"{owner}: control_group='never_treated' needs never-treated units, but every "
                f"one of the {cohorts.size} {noun} has a finite cohort."
                + (zero_hint or " Use control_group='not_yet_treated' or add never-treated "
                   "(validation) units.")
            )
        last = cohorts.max()
        cut = times < last - anticipation
        if cut.sum() < 2:
            raise EstimationError(
                f"{owner}: without never-treated units the latest cohort ({_fmt(last)}) serves "
                "only as a comparison and periods from it on are dropped; fewer than 2 periods "
                "would remain."
            )
        warnings.warn(
            f"{owner}: there are no never-treated units, so the latest cohort ({_fmt(last)}, "
            f"{int((cohorts == last).sum())} {noun}) serves only as a comparison group and the "
            f"{int((~cut).sum())} periods from {_fmt(last - anticipation)} on are dropped, "
            "as in R did.", DataDroppedWarning, stacklevel=_STACKLEVEL)
        cohorts[cohorts == last] = np.inf
    first = times[cut][0]
    early = np.isfinite(cohorts) & (cohorts <= first + anticipation)
    if anticipation and early.any() and not (np.isfinite(cohorts) & ~early).any():
        raise EstimationError(
            f"{owner}: with anticipation={_fmt(anticipation)} every treated cohort (cohorts "
            f"{_listing(_cohort_labels(cohorts[early]), plain=True)}) is treated by the first "
            f"period {_fmt(first)} plus the anticipation, so none has a pre-treatment period; "
            "give an anticipation shorter than the time to the latest cohort.")
    if early.any():
        warnings.warn(
            f"{owner}: dropped {int(early.sum())} {noun} of cohorts "
            f"{_listing(_cohort_labels(cohorts[early]), plain=True)}, treated by the first period "
            f"{_fmt(first)} plus anticipation {_fmt(anticipation)}: they have no "
            "pre-treatment period." + (zero_hint if np.any(cohorts[early] == 0) else ""),
            DataDroppedWarning, stacklevel=_STACKLEVEL)
    if cut.sum() < 2:
        raise EstimationError(f"{owner}: the panel needs at least 2 periods; it has {cut.sum()}.")
    return cut, ~early


def cohort_blocks(cohorts, keep, sizes_of, *, need_never_treated: bool, owner: str,
                  word: str):
    """Sort the kept units into blocks, one per treated cohort, the never-treated last, and
    check the blocks' sizes (``sizes_of(block, counts)``, from each unit's block and the
    kept units per block, gives each block's size in ``word``). Returns the treated cohorts, the kept units in block order, the blocks'
    starts and each unit's block."""
    treated_cohorts = np.unique(cohorts[keep & np.isfinite(cohorts)])
    if treated_cohorts.size == 0:
        raise EstimationError(
            f"{owner}: no treated cohort with a pre-treatment period remains; the cohort column "
            "must hold the first period of treatment (NaN or inf for never-treated).")
    block = np.searchsorted(treated_cohorts, cohorts)  # never-treated -> n_cohorts
    kept = np.flatnonzero(keep)
    order = kept[np.argsort(block[kept], kind="stable")]
    counts = np.bincount(block[kept], minlength=treated_cohorts.size + 1)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    sizes = sizes_of(block, counts)
    small = treated_cohorts[sizes[:-1] < MIN_COHORT_SIZE]
    if small.size:
        warnings.warn(
            f"{owner}: {small.size} cohorts have fewer than {MIN_COHORT_SIZE} {word} "
            f"({_listing([_fmt(g) for g in small], plain=True)}); their estimates and bands are "
            "fragile.", SmallCohortWarning, stacklevel=_STACKLEVEL)
    if need_never_treated and sizes[-1] < MIN_COHORT_SIZE:
        raise EstimationError(
            f"{owner}: the never-treated group has {sizes[-1]:g} {word}, fewer than "
            f"{MIN_COHORT_SIZE}; use control_group='not_yet_treated' (as R did requires).")
    return treated_cohorts, order, starts


def _cluster_codes(panel, order):
    """Each kept unit's cluster code (0 .. n_clusters-1) and the number of clusters."""
    if panel.clusters is None:
        return None, 0
    _, clusters = np.unique(np.asarray(panel.clusters)[order], return_inverse=True)
    clusters = clusters.astype(np.int64).ravel()
    return clusters, int(clusters.max()) + 1


def _dense_outcomes(panel, name, cohorts, times, cut, keep, *, lower_is_better,
                    need_never_treated, owner, use_covariates) -> PreparedPanel:
    """A balanced panel's design: the outcome as a dense units x times matrix, each column
    centred on its mean."""
    y = np.array(panel.outcome_matrix(name), dtype=np.float64)
    if lower_is_better:
        y = -y
    x = panel.covariate_array() if use_covariates and panel.covariates else None
    treated_cohorts, order, starts = cohort_blocks(
        cohorts, keep, lambda block, counts: counts, need_never_treated=need_never_treated,
        owner=owner, word="units")
    y = y[np.ix_(order, cut)] if not cut.all() else y[order]
    y -= y.mean(axis=0)
    clusters, n_clusters = _cluster_codes(panel, order)
    return PreparedPanel(
        y=np.ascontiguousarray(y),
        w=np.ascontiguousarray(np.asarray(panel.weights, dtype=np.float64)[order]),
        starts=starts,
        cohorts=treated_cohorts,
        times=times[cut],
        clusters=clusters,
        n_clusters=n_clusters,
        unit_labels=np.asarray(panel.units)[order],
        x=None if x is None else np.ascontiguousarray(x[order][:, cut]),
    )


def _observed_rows(panel, name, cohorts, times, cut, keep, *, lower_is_better,
                   need_never_treated, owner, use_covariates) -> PreparedPanel:
    """A design of a panel with holes or repeated cross-sections: the observed rows in long
    form (``design.holes``), sorted by unit in block order and time, each time's values
    centred on their mean; units left without a row by the cut periods are dropped."""
    unit, time, y = panel.observed_rows(name)
    x = panel.observed_covariates() if use_covariates else np.zeros((unit.size, 0))
    y = -np.asarray(y, dtype=np.float64) if lower_is_better else np.array(y, dtype=np.float64)
    unit = np.asarray(unit, dtype=np.int64)
    time = np.asarray(time, dtype=np.int64)
    if not cut.all():  # the periods kept are the first ones: time indices stay
        rows = cut[time]
        unit, time, y, x = unit[rows], time[rows], y[rows], x[rows]
        keep = keep & (np.bincount(unit, minlength=cohorts.size) > 0)
    n_t = int(cut.sum())
    treated_cohorts, order, starts = cohort_blocks(
        cohorts, keep, lambda block, counts: np.bincount(
            block[unit][keep[unit]], minlength=counts.size) / n_t,
        need_never_treated=need_never_treated, owner=owner, word="rows per period")
    new_of_old = np.full(cohorts.size, -1, dtype=np.int64)
    new_of_old[order] = np.arange(order.size)
    rows = new_of_old[unit] >= 0
    unit, time, y, x = new_of_old[unit[rows]], time[rows], y[rows], x[rows]
    if unit.size == order.size and np.all(np.bincount(unit, minlength=order.size) == 1):
        row_order = np.empty(unit.size, dtype=np.int64)  # cross-sections: one row per unit,
        row_order[unit] = np.arange(unit.size)  # the sort by unit is a permutation
    else:
        row_order = np.lexsort((time, unit))
    unit, time, y, x = unit[row_order], time[row_order], y[row_order], x[row_order]
    per_time = np.bincount(time, minlength=n_t)
    means = np.bincount(time, weights=y, minlength=n_t) / np.maximum(per_time, 1)
    y = y - means[time]
    clusters, n_clusters = _cluster_codes(panel, order)
    return PreparedPanel(
        y=None, w=np.ascontiguousarray(np.asarray(panel.weights, dtype=np.float64)[order]),
        starts=starts, cohorts=treated_cohorts, times=times[cut], clusters=clusters,
        n_clusters=n_clusters, unit_labels=np.asarray(panel.units)[order],
        holes=HoleRows(unit=unit, time=time, y=np.ascontiguousarray(y),
                       unit_start=np.searchsorted(unit, np.arange(order.size + 1)).astype(
                           np.int64),
                       x=np.ascontiguousarray(x) if use_covariates else None),
    )


def _control_start(prepared: PreparedPanel, threshold: np.ndarray, not_yet: bool) -> np.ndarray:
    """First treated block that is still untreated after ``threshold``."""
    if not not_yet:
        return np.full(threshold.shape, prepared.n_cohorts, dtype=np.int64)
    return np.searchsorted(prepared.cohorts, threshold, side="right").astype(np.int64)


def did_cells(prepared: PreparedPanel, *, base_period: str, not_yet: bool, anticipation: float) -> Cells:
    """Cells of Callaway & Sant'Anna's ATT(g, t), laid out as R ``did`` does.

    Varying base: for t = 2..T, a pre-period cell compares t with t-1 and a post-period cell
    (g <= t) compares t with the last period before g - anticipation. Universal base: every
    cell compares with that period, which itself is a reference cell fixed at 0.
    Not-yet-treated controls at a cell are the never-treated units and the cohorts first
    treated after max(t, base) + anticipation (R uses the later of the two indices), less
    the cell's own cohort.
    """
    times = prepared.times
    n_t = times.size
    ks, ts, bs, thr, refs = [], [], [], [], []
    for k, g in enumerate(prepared.cohorts):
        last_pre = int(np.flatnonzero(times + anticipation < g)[-1])
        if base_period == "varying":
            t_idx = np.arange(1, n_t)
            b_idx = np.where(g <= times[t_idx], last_pre, t_idx - 1)
            threshold = times[t_idx] + anticipation
            ref = np.zeros(t_idx.size, dtype=np.int64)
        else:
            t_idx = np.arange(n_t)
            b_idx = np.full(n_t, last_pre)
            threshold = times[np.maximum(t_idx, last_pre)] + anticipation
            ref = (t_idx == last_pre).astype(np.int64)
        ks.append(np.full(t_idx.size, k))
        ts.append(t_idx)
        bs.append(b_idx)
        thr.append(threshold)
        refs.append(ref)
    return _make_cells(prepared, ks, ts, bs, np.concatenate(thr), refs, not_yet)


def level_cells(prepared: PreparedPanel, *, not_yet: bool, anticipation: float) -> Cells:
    """Cells of the difference estimator: every cohort at every time, outcome in levels."""
    n_t = prepared.times.size
    ks = [np.full(n_t, k) for k in range(prepared.n_cohorts)]
    ts = [np.arange(n_t)] * prepared.n_cohorts
    bs = [np.full(n_t, -1)] * prepared.n_cohorts
    threshold = np.tile(prepared.times + anticipation, prepared.n_cohorts)
    refs = [np.zeros(n_t, dtype=np.int64)] * prepared.n_cohorts
    return _make_cells(prepared, ks, ts, bs, threshold, refs, not_yet)


def _make_cells(prepared, ks, ts, bs, threshold, refs, not_yet) -> Cells:
    cells = Cells(
        k=np.concatenate(ks).astype(np.int64),
        t=np.concatenate(ts).astype(np.int64),
        b=np.concatenate(bs).astype(np.int64),
        cs=_control_start(prepared, threshold, not_yet),
        ref=np.concatenate(refs).astype(np.int64),
    )
    _, n_control = cell_counts(prepared, cells)
    empty = (n_control == 0) & (cells.ref == 0)
    if empty.any():
        c = int(np.flatnonzero(empty)[0])
        raise EstimationError(
            f"{int(empty.sum())} cells have no control units, e.g. cohort "
            f"{_fmt(prepared.cohorts[cells.k[c]])} at time {_fmt(prepared.times[cells.t[c]])}."
        )
    return cells
