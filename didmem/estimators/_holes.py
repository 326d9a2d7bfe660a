"""From a panel with holes, or repeated cross-sections, to a design and its cells.

R ``did``'s pre-processing is applied to the observed rows (cohorts after the last period
are never treated; units treated by the first period plus anticipation are dropped; without
never-treated units the latest cohort is only a comparison and the periods from it on are
dropped), then units are sorted into cohort blocks as on a balanced panel. A cohort's size
is its rows per period, as R counts it for these data.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._messages import listing as _listing
from ..errors import DataDroppedWarning, EstimationError, SmallCohortWarning
from ..inference.holes import HoleRows
from ..panel import Panel
from ..inference._prepared import MIN_COHORT_SIZE, _cohort_labels, _fmt
from ..inference._prepared import PreparedDesign as Design

__all__ = ["prepare_holes_design", "check_hole_cells"]


def prepare_holes_design(panel: Panel, outcome: str | None, *, need_never_treated: bool,
                         anticipation: float, lower_is_better: bool, owner: str,
                         use_covariates: bool = False) -> Design:
    """R ``did``'s pre-processing of a panel with holes (or cross-sections), as a design.

    With ``use_covariates`` the rows keep their covariates (``design.holes.x``).
    """
    name = panel.resolve_outcome(outcome)
    unit, time, y = panel.observed_rows(name)
    x = panel.observed_covariates() if use_covariates else np.zeros((unit.size, 0))
    y = -np.asarray(y, dtype=np.float64) if lower_is_better else np.array(y, dtype=np.float64)
    unit = np.asarray(unit, dtype=np.int64)
    time = np.asarray(time, dtype=np.int64)
    times = np.asarray(panel.times, dtype=np.float64)
    cohorts = np.array(panel.cohorts, dtype=np.float64)
    w = np.array(panel.weights, dtype=np.float64)
    noun = "rows" if panel.kind == "cross_sections" else "units"

    if np.all(np.isfinite(cohorts) & (cohorts <= times[0] + anticipation)):
        raise EstimationError(
            f"{owner}: every one of the {cohorts.size} {noun} is treated by the first period "
            f"{_fmt(times[0])}, so no {noun[:-1]} has an untreated period to compare with. "
            "The cohort column must hold the first period of treatment, NaN or inf for "
            "never-treated units.")
    late = np.isfinite(cohorts) & (cohorts > times[-1])
    if late.any():
        warnings.warn(
            f"{owner}: {int(late.sum())} {noun} have a cohort after the last time "
            f"{_fmt(times[-1])} (cohorts {_listing(_cohort_labels(cohorts[late]), plain=True)}); "
            "they are never treated within the panel and count as never-treated, as in R did.",
            DataDroppedWarning, stacklevel=4)
        cohorts[late] = np.inf

    keep_unit = np.ones(cohorts.size, dtype=bool)
    if not np.isinf(cohorts).any():
        if need_never_treated:
            raise EstimationError(
                f"{owner}: control_group='never_treated' needs never-treated units, but every "
                f"one of the {cohorts.size} {noun} has a finite cohort. Use "
                "control_group='not_yet_treated' or add never-treated (validation) units.")
        last = cohorts.max()
        cut = times < last - anticipation
        if cut.sum() < 2:
            raise EstimationError(
                f"{owner}: without never-treated units the latest cohort ({_fmt(last)}) serves "
                "only as a comparison and periods from it on are dropped; fewer than 2 periods "
                "would remain.")
        warnings.warn(
            f"{owner}: there are no never-treated units, so the latest cohort ({_fmt(last)}) "
            f"serves only as a comparison group and the {int((~cut).sum())} periods from "
            f"{_fmt(last - anticipation)} on are dropped, as in R did.",
            DataDroppedWarning, stacklevel=4)
        rows = cut[time]
        unit, time, y, x = unit[rows], time[rows], y[rows], x[rows]
        times = times[cut]
        cohorts[cohorts == last] = np.inf
        keep_unit &= np.bincount(unit, minlength=cohorts.size) > 0

    early = np.isfinite(cohorts) & (cohorts <= times[0] + anticipation)
    if early.any():
        warnings.warn(
            f"{owner}: dropped {int(early.sum())} {noun} of cohorts "
            f"{_listing(_cohort_labels(cohorts[early]), plain=True)}, treated by the first period "
            f"{_fmt(times[0])} plus anticipation {_fmt(anticipation)}: they have no "
            "pre-treatment period.", DataDroppedWarning, stacklevel=4)
        keep_unit &= ~early
    if times.size < 2:
        raise EstimationError(f"{owner}: the panel needs at least 2 periods; it has {times.size}.")

    treated_cohorts = np.unique(cohorts[keep_unit & np.isfinite(cohorts)])
    if treated_cohorts.size == 0:
        raise EstimationError(
            f"{owner}: no treated cohort with a pre-treatment period remains; the cohort column "
            "must hold the first period of treatment (NaN or inf for never-treated).")
    block_all = np.searchsorted(treated_cohorts, cohorts)  # never-treated -> n_cohorts
    kept = np.flatnonzero(keep_unit)
    order = kept[np.argsort(block_all[kept], kind="stable")]
    counts = np.bincount(block_all[kept], minlength=treated_cohorts.size + 1)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
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
    w = w[order]

    # a cohort's size as R counts it for these data: its rows per period
    rows_per_block = np.bincount(np.repeat(np.arange(starts.size - 1), counts)[unit],
                                 minlength=starts.size - 1) / times.size
    small = treated_cohorts[rows_per_block[:-1] < MIN_COHORT_SIZE]
    if small.size:
        warnings.warn(
            f"{owner}: {small.size} cohorts have fewer than {MIN_COHORT_SIZE} rows per period "
            f"({_listing([_fmt(g) for g in small], plain=True)}); their estimates and bands are "
            "fragile.", SmallCohortWarning, stacklevel=4)
    if need_never_treated and rows_per_block[-1] < MIN_COHORT_SIZE:
        raise EstimationError(
            f"{owner}: the never-treated group has {rows_per_block[-1]:g} rows per period, "
            f"fewer than {MIN_COHORT_SIZE}; use control_group='not_yet_treated' (as R did "
            "requires).")

    # centre each time's observed values (leaves estimates and influence functions alone)
    n_t = times.size
    per_time = np.bincount(time, minlength=n_t)
    means = np.bincount(time, weights=y, minlength=n_t) / np.maximum(per_time, 1)
    y = y - means[time]
    unit_start = np.searchsorted(unit, np.arange(order.size + 1)).astype(np.int64)

    clusters = None if panel.clusters is None else np.asarray(panel.clusters)[order]
    n_clusters = 0
    if clusters is not None:
        _, clusters = np.unique(clusters, return_inverse=True)
        clusters = clusters.astype(np.int64)
        n_clusters = int(clusters.max()) + 1
    return Design(
        y=None, w=np.ascontiguousarray(w), starts=starts, cohorts=treated_cohorts, times=times,
        clusters=clusters, n_clusters=n_clusters,
        unit_labels=np.asarray(panel.units)[order],
        holes=HoleRows(unit=unit, time=time, y=np.ascontiguousarray(y), unit_start=unit_start,
                       x=np.ascontiguousarray(x) if use_covariates else None),
    )


def check_hole_cells(design: Design, cells, stats, owner: str) -> None:
    """Refuse cells that miss one of their four groups of rows (R returns NA for them)."""
    live = cells.ref == 0
    has_base = cells.b >= 0
    groups = [("the cohort", "t", stats["w1t"]), ("the cohort", "b", stats["w1b"]),
              ("the controls", "t", stats["w0t"]), ("the controls", "b", stats["w0b"])]
    problems = []
    for who, when, weight in groups:
        bad = live & ~(weight > 0)
        if when == "b":
            bad &= has_base
        for c in np.flatnonzero(bad)[:3]:
            at = cells.t[c] if when == "t" else cells.b[c]
            problems.append(f"{who} at time {_fmt(design.times[at])} in cell (cohort "
                            f"{_fmt(design.cohorts[cells.k[c]])}, time "
                            f"{_fmt(design.times[cells.t[c]])})")
        if bad.any() and len(problems) >= 3:
            break
    if problems:
        raise EstimationError(
            f"{owner}: some cells have no observed rows in one of their four groups, e.g. "
            + "; ".join(problems[:3]) + ". Each cell compares the cohort's and the controls' "
            "rows at its time and its base period, so each needs at least one of each. "
            "Panel.describe_holes() shows the rows per (cohort, time).")
