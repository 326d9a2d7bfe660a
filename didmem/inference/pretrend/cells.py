"""The pre-tests of parallel trends on a fit's cells, for :class:`~.cell_inference.CellInference`.

The statistics live in :mod:`.statistics`; these functions feed them a fit's
pre-treatment cells, their event-time averages (the rows of R's ``dynamic`` aggregation at
``e < 0``, handed over by the result), covariances and bootstrap draws. They take the
inference object by its attributes and never import :mod:`.cell_inference`.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from ..bands import DEGENERATE
from ..choices import DEFAULT_PRETREND, PRETREND_METHODS
from .statistics import PretrendTest, linear_drift, max_t_test, wald_power, wald_test

__all__ = ["PRETREND_METHODS", "DEFAULT_PRETREND", "event_time_test", "max_t_cells_test"]

PRETEST_DRAWS = 999  # draws made for the max-|t| test when the fit has none
DRIFT_IN_SE = 0.25  # the stated pre-trend: a quarter of a pre-cell's SE per period


def _n_obs(inf) -> int:
    return int(inf.prepared.n_clusters or inf.prepared.n_units)


def _drift(inf, std_errors, which) -> tuple[float, np.ndarray]:
    """The stated pre-trend per period and the cells' means under it."""
    se = np.asarray(std_errors)[which]
    per_period = DRIFT_IN_SE * float(np.nanmedian(se)) if which.size else np.nan
    mean = np.zeros(inf.cells.size)
    mean[which] = linear_drift(inf.cells.t[which], inf.cells.b[which], per_period)
    return per_period, mean


def event_time_test(inf, estimates, std_errors, which, weights, omega) -> PretrendTest:
    """Wald test that the event-time averages of the pre-treatment cells are zero.

    ``which`` are the pre-treatment cells with a standard error; ``weights`` and ``omega``
    the rows of the dynamic aggregation at negative event times. With the small-sample
    correction the covariance is scaled by ``n / (n - 1)`` and the p-value is Hotelling's F.
    """
    if which.size == 0:
        return PretrendTest("event", np.nan, np.nan, note="no pre-treatment cells to test")
    est = np.where(np.isfinite(estimates), np.asarray(estimates), 0.0)
    with threadpool_limits(limits=1, user_api="blas"):  # many small products: one thread
        cov = inf.influence.combination_moments(weights, omega, blocks=False)[0]
    corrected = inf.correction is not None
    if corrected:  # per-unit plug-in covariance -> unbiased scale
        n = _n_obs(inf)
        cov = cov * n / max(n - 1, 1)
    live = np.diag(cov) > DEGENERATE**2  # e.g. the universal base period's reference
    weights, cov = weights[np.flatnonzero(live)], cov[np.ix_(live, live)]
    n_obs = _n_obs(inf) if corrected else None
    stat, pvalue, df2, note = wald_test(weights @ est, cov, n_obs=n_obs)
    per_period, mean = _drift(inf, std_errors, which)
    power = None
    if np.all(np.isfinite(mean[which])):
        power = wald_power(weights @ mean, cov, alpha=float(inf.alpha), n_obs=n_obs)
    n_keys = int(live.sum())
    return PretrendTest("event", stat, pvalue, df=float(n_keys), df_denominator=df2,
                        n_restrictions=n_keys, power=power,
                        drift=per_period if power is not None else None, note=note,
                        power_alpha=float(inf.alpha))


def _draws(inf, seed):
    """The fit's bootstrap draws, or fresh ones (seeded by ``seed``)."""
    if inf.bootstrap is not None:
        return inf.bootstrap.cells
    rng = np.random.default_rng(seed)
    return inf.influence.bootstrap(PRETEST_DRAWS, inf.multiplier_choice, rng,
                                   inf.prepared.clusters, inf.prepared.n_clusters).cells


def max_t_cells_test(inf, estimates, analytic_std_errors, which, seed) -> PretrendTest:
    """The largest studentised pre-treatment cell against the bootstrap's maximum."""
    if which.size == 0:
        return PretrendTest("max_t", np.nan, np.nan, note="no pre-treatment cells to test")
    raw = np.asarray(analytic_std_errors)[which]
    if inf.correction is not None:
        se = np.sqrt(inf.correction.variance[which])
        df = inf.correction.df[which]
    else:
        se, df = raw, None
    draws = _draws(inf, seed)[:, which]
    stat, pvalue = max_t_test(np.asarray(estimates)[which], se, draws, raw, df)
    return PretrendTest("max_t", stat, pvalue, n_restrictions=int(which.size))
