"""One random-timing fit: cells, aggregations, simultaneous bands and Fisher tests.

Glue between :mod:`~didmem.inference.random_timing.design` (the estimator's formulas),
:mod:`~didmem.inference.random_timing.weights` (the estimands) and
:mod:`~didmem.inference.random_timing.fisher` (permutations and band draws). Everything is a
table of rows (``kind``, ``key``, estimate, standard errors, ...): the cells
(``kind = "cell"``) and the aggregations (``simple``, ``group``, ``calendar``, ``dynamic``;
``key`` NaN for an overall value).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ...errors import ParameterError
from . import weights
from ..bands import normal_quantile, sup_t_statistics
from .design import (EstimandRows, Projections, TimingDesign, cell_estimates,
                     linear_estimates)
from .fisher import band_multipliers, fisher_test
from .permutation import PermutationStatistics

__all__ = ["AggregationStack", "aggregation_stack", "fit_random_timing", "RandomTimingTables"]

AGGREGATIONS = ("simple", "group", "calendar", "dynamic")


@dataclass(frozen=True, eq=False)
class AggregationStack:
    """The ``A_theta``/``A_0`` of every aggregation row: names, keys (NaN = overall)."""

    names: np.ndarray
    keys: np.ndarray
    a_theta: np.ndarray  # (J, K, T)
    a_0: np.ndarray


def aggregation_stack(design: TimingDesign, last_treated: bool) -> AggregationStack:
    """simple; group (overall = staggered's ``cohort``, then each cohort's mean); calendar
    (overall, then each time's); dynamic (each event time in checkpoints, as
    ``eventstudy``)."""
    codes, n, n_t = design.codes, design.count, design.n_times
    names, keys, th, a0 = [], [], [], []

    def add(name, key, pair):
        names.append(name)
        keys.append(key)
        th.append(pair[0])
        a0.append(pair[1])

    add("simple", np.nan, weights.simple_weights(codes, n, n_t, last_treated))
    add("group", np.nan, weights.cohort_weights(codes, n, n_t, last_treated))
    for gi, a, b in weights.cohort_key_weights(codes, n, n_t, last_treated):
        add("group", design.cohorts[gi], (a, b))
    add("calendar", np.nan, weights.calendar_weights(codes, n, n_t, last_treated))
    for t, a, b in weights.calendar_key_weights(codes, n, n_t, last_treated):
        add("calendar", design.times[t], (a, b))
    for e in range(-(n_t - 1), n_t):
        pair = weights.event_time_weights(codes, n, n_t, e, last_treated)
        if pair is not None:
            add("dynamic", float(e), pair)
    return AggregationStack(names=np.asarray(names), keys=np.asarray(keys, dtype=np.float64),
                            a_theta=np.stack(th), a_0=np.stack(a0))


@dataclass(frozen=True, eq=False)
class RandomTimingTables:
    """Rows of a fit; ``critical_value`` per row is its group's simultaneous one."""

    kind: np.ndarray
    cohort: np.ndarray
    time: np.ndarray
    key: np.ndarray
    estimate: np.ndarray
    std_error: np.ndarray
    std_error_neyman: np.ndarray
    beta: np.ndarray
    critical_value: np.ndarray
    fisher_pvalue: np.ndarray
    fisher_pvalue_r: np.ndarray
    fisher_sup_pvalue: float
    n_fisher: int


def _statistics(design, beta, last_treated, rows: EstimandRows):
    """Neyman-studentised statistics of the cells and the given aggregation rows (no
    refinement), computed directly: the oracle of
    :class:`~.permutation.PermutationStatistics`, which a Fisher test permutes."""
    cells = cell_estimates(design, beta, last_treated, refine=False, with_df=False)
    agg = linear_estimates(design, rows, None, beta, refine=False)
    return np.r_[_ratio(cells.estimate, cells.std_error_neyman),
                 _ratio(agg.estimate, agg.std_error_neyman)]


def _ratio(a, b):
    return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)


def _cell_draws(design, cells, w):
    """Draws of the cells from per-cohort draws ``w`` (K, T, B)."""
    k = design.cohorts.size
    n = design.count
    suffix = np.concatenate([np.cumsum((n[:, None, None] * w)[::-1], axis=0)[::-1],
                             np.zeros((1,) + w.shape[1:])])
    suffix_n = np.r_[np.cumsum(n[::-1])[::-1], 0.0]
    g, t = cells.cohort_index, cells.time_index
    p = (design.codes[g] - 1).astype(np.int64)
    start = cells.control_start
    b = cells.beta[:, None]
    nc = np.where(suffix_n[start] > 0, suffix_n[start], 1.0)[:, None]
    treated = w[g, t] - b * w[g, p]
    control = (suffix[start, t] - b * suffix[start, p]) / nc
    del k
    return (treated - control).T


def _band_draws(design, cells, comb, n_draws, seed):
    """Gaussian draws (n_draws, cells + rows) with the Neyman covariance of the cells and of
    the estimands ``comb`` (rows, K T): the chunks of per-cohort draws of
    :func:`~.fisher.band_multipliers` through the one bootstrap loop."""
    from ..bootstrap import multiplier_bootstrap

    n_cells, n_rows = cells.estimate.size, comb.shape[0]

    def drawer():
        def draw(row0, w, out):
            m = w.shape[-1]
            out.cells[row0:row0 + m, :n_cells] = _cell_draws(design, cells, w)
            np.matmul(comb, w.reshape(comb.shape[1], m), out=out.cells[row0:row0 + m,
                                                                     n_cells:].T)
            out.total[row0:row0 + m] = np.nan  # (no units' multipliers to sum)
        return draw

    multipliers = band_multipliers(design, n_draws, np.random.default_rng(seed))
    return multiplier_bootstrap(drawer, multipliers, n_cells + n_rows, 0).cells


def _t_margins(critical, df):
    """Each row's t quantile at the normal value's level, ``F^{-1}_{t, df}(Phi(c))``: the
    Gaussian copula with t margins of :mod:`didmem.inference.small_sample` (Welch-
    Satterthwaite degrees of freedom of each row's Neyman variance)."""
    from scipy.special import ndtr, stdtrit

    level = ndtr(critical)
    finite = np.isfinite(df) & (df > 0) & np.isfinite(critical)
    out = critical.copy()
    out[finite] = stdtrit(df[finite], level[finite])
    return out


def _critical(draws, se, alpha):
    """Sup-t critical value of draws (B, J) scaled by ``se``."""
    keep = se > 0
    if not keep.any():
        return np.nan
    stats = sup_t_statistics(draws, np.where(keep, se, 1.0), keep)  # (in blocks of draws)
    return float(np.quantile(stats, 1 - alpha))


def fit_random_timing(times, cohorts, y, **options) -> tuple[TimingDesign, RandomTimingTables]:
    """The whole fit on outcome paths ``y`` (units x times), or on a given ``design=``
    (per-cohort moments; then ``times``, ``cohorts``, ``y`` are None and no Fisher test).

    One BLAS thread: these are many small products, for which more threads were measured
    slower on the loaded 2-core machine (as in :mod:`~didmem.inference.moments.cohort`).
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _fit(times, cohorts, y, **options)


def _fit(times, cohorts, y, *, beta, last_treated, randomised, alpha, n_draws, n_fisher,
         seed, design=None):
    rng = np.random.default_rng(seed)
    if design is None:
        design = TimingDesign.from_paths(times, cohorts, y)
    elif n_fisher > 0:
        raise ParameterError("Fisher permutations need the units' paths, not their moments: "
                             "fit a Panel, or set n_fisher=0.")
    projections = Projections(design)
    cells = cell_estimates(design, beta, last_treated, projections=projections)
    stack = aggregation_stack(design, last_treated)
    agg = linear_estimates(design, stack.a_theta, stack.a_0, beta, projections=projections)
    del projections  # up to K^3 T / 6 numbers at the paper's scale
    # simultaneous bands from the Neyman covariance: over the cells, and over each
    # aggregation's keys (a pointwise normal value for an overall row)
    w_seed, f_seed = rng.integers(2**63, size=2)
    cell_crit = normal_quantile(1 - alpha / 2)  # pointwise without draws
    agg_crit = np.full(stack.names.size, normal_quantile(1 - alpha / 2))
    if n_draws > 0:
        comb = (stack.a_theta - agg.beta[:, None, None] * stack.a_0).reshape(
            stack.names.size, -1)
        draws = _band_draws(design, cells, comb, n_draws, w_seed)
        cell_crit = _critical(draws[:, :cells.estimate.size], cells.std_error_neyman, alpha)
        rest = draws[:, cells.estimate.size:]
        for name in AGGREGATIONS:
            rows = np.flatnonzero((stack.names == name) & ~np.isnan(stack.keys))
            if rows.size:
                agg_crit[rows] = _critical(rest[:, rows], agg.std_error_neyman[rows], alpha)
    n_rows = cells.estimate.size + stack.names.size
    p = np.full(n_rows, np.nan)
    p_r = np.full(n_rows, np.nan)
    sup_p = np.nan
    if n_fisher > 0:
        # tested: every cell and every aggregation row (overall values, the keys of group
        # and calendar, the event times); each row's statistic is computed on its own (its
        # sparse map or its dense forms), so a row's p-value does not depend on which other
        # rows are tested, and the permutations depend on the seed only
        n_cells = cells.estimate.size
        statistic = PermutationStatistics(design, beta, last_treated, stack.a_theta,
                                          stack.a_0)
        test = fisher_test(times, cohorts, y, statistic, n_permutations=n_fisher,
                           randomised=randomised, seed=f_seed, control_sums=True)
        p[:], p_r[:] = test.pvalue, test.pvalue_r
        sup_obs = test.observed[:n_cells].max(initial=0.0)
        sup_perm = test.permuted[:, :n_cells].max(axis=1, initial=0.0)
        sup_p = float((1.0 + (sup_perm >= sup_obs).sum()) / (1.0 + n_fisher))
    nan_cells = np.full(cells.estimate.size, np.nan)
    tables = RandomTimingTables(
        kind=np.r_[np.full(cells.estimate.size, "cell"), stack.names],
        cohort=np.r_[design.cohorts[cells.cohort_index], np.full(stack.names.size, np.nan)],
        time=np.r_[design.times[cells.time_index], np.full(stack.names.size, np.nan)],
        key=np.r_[nan_cells, stack.keys],
        estimate=np.r_[cells.estimate, agg.estimate],
        std_error=np.r_[cells.std_error, agg.std_error],
        std_error_neyman=np.r_[cells.std_error_neyman, agg.std_error_neyman],
        beta=np.r_[cells.beta, agg.beta],
        critical_value=np.r_[_t_margins(np.full(cells.estimate.size, cell_crit), cells.df),
                         _t_margins(agg_crit, agg.df)],
        fisher_pvalue=p, fisher_pvalue_r=p_r, fisher_sup_pvalue=sup_p, n_fisher=int(n_fisher))
    return design, tables
