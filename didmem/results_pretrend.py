"""Pre-tests of parallel trends on a fitted group-time result.

The statistics live in :mod:`didmem.inference.pretrend`; this module feeds them a result's
pre-treatment cells, their event-time averages, covariances and bootstrap draws. It takes
the result by its attributes and never imports :mod:`didmem.results`.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from .aggregate import build_aggregation
from .errors import ParameterError
from .inference.bands import DEGENERATE
from .inference.bootstrap import bootstrap_cells, bootstrap_influence
from .inference.linear import combination_covariance
from .inference.pretrend import PretrendTest, linear_drift, max_t_test, wald_power, wald_test

__all__ = ["PRETREND_METHODS", "DEFAULT_PRETREND", "pretrend_test"]

PRETREND_METHODS = ("event", "max_t", "wald")
DEFAULT_PRETREND = "event"
_PRETEST_DRAWS = 999  # draws made for the max-|t| test when the fit has none
DRIFT_IN_SE = 0.25  # the stated pre-trend: a quarter of a pre-cell's SE per period


def _pre_cells(res) -> np.ndarray:
    pre = (res.cohorts > res.times) & np.isfinite(np.asarray(res.analytic_std_errors))
    return np.flatnonzero(pre)


def _n_obs(res) -> int:
    return int(res.n_clusters or res.n_units)


def _drift(res, which) -> tuple[float, np.ndarray]:
    """The stated pre-trend per period and the cells' means under it."""
    se = np.asarray(res.std_errors)[which]
    per_period = DRIFT_IN_SE * float(np.nanmedian(se)) if which.size else np.nan
    mean = np.zeros(res.cells.size)
    mean[which] = linear_drift(res.cells.t[which], res.cells.b[which], per_period)
    return per_period, mean


def _event_test(res) -> PretrendTest:
    which = _pre_cells(res)
    if which.size == 0:
        return PretrendTest("event", np.nan, np.nan, note="no pre-treatment cells to test")
    est = np.where(np.isfinite(res.estimates), np.asarray(res.estimates), 0.0)
    spec = build_aggregation(res.design, res.cells, est, "dynamic")
    keys = np.flatnonzero(spec.keys < 0)
    with threadpool_limits(limits=1, user_api="blas"):  # many small products: one thread
        cov = combination_covariance(res.design, res.cells, res.stats, spec.weights[keys],
                                     spec.omega[keys], res.influence)
    if res.small_sample is not None:  # per-unit plug-in covariance -> unbiased scale
        n = _n_obs(res)
        cov = cov * n / max(n - 1, 1)
    live = np.diag(cov) > DEGENERATE**2  # e.g. the universal base period's reference
    keys, cov = keys[live], cov[np.ix_(live, live)]
    agg = spec.weights[keys] @ est
    n_obs = _n_obs(res) if res.small_sample is not None else None
    stat, pvalue, df2, note = wald_test(agg, cov, n_obs=n_obs)
    per_period, mean = _drift(res, which)
    power = None
    if np.all(np.isfinite(mean[which])):
        power = wald_power(spec.weights[keys] @ mean, cov, alpha=0.05, n_obs=n_obs)
    return PretrendTest("event", stat, pvalue, df=float(keys.size), df_denominator=df2,
                        n_restrictions=int(keys.size), power=power,
                        drift=per_period if power is not None else None, note=note)


def _draws(res):
    """The fit's bootstrap draws, or fresh ones (seeded by ``random_state``)."""
    if res.bootstrap is not None:
        return res.bootstrap.cells
    rng = np.random.default_rng(res.params.get("random_state"))
    multiplier = res.params.get("multiplier") or (
        "normal" if res.small_sample is not None else "rademacher")
    if res.influence is None:
        boot = bootstrap_cells(res.design, res.cells, res.stats, n_draws=_PRETEST_DRAWS,
                               multiplier=multiplier, rng=rng)
    else:
        boot = bootstrap_influence(res.design, res.influence, n_draws=_PRETEST_DRAWS,
                                   multiplier=multiplier, rng=rng)
    return boot.cells


def _max_t_test(res) -> PretrendTest:
    which = _pre_cells(res)
    if which.size == 0:
        return PretrendTest("max_t", np.nan, np.nan, note="no pre-treatment cells to test")
    raw = np.asarray(res.analytic_std_errors)[which]
    if res.small_sample is not None:
        se = np.sqrt(res.small_sample.variance[which])
        df = res.small_sample.df[which]
    else:
        se, df = raw, None
    draws = _draws(res)[:, which]
    stat, pvalue = max_t_test(np.asarray(res.estimates)[which], se, draws, raw, df)
    return PretrendTest("max_t", stat, pvalue, n_restrictions=int(which.size))


def _wald(res) -> PretrendTest:
    pre = res.pretest
    return PretrendTest("wald", pre.statistic, pre.pvalue, df=float(pre.df),
                        n_restrictions=int(pre.df), note=pre.note)


def pretrend_test(res, method: str | None = None) -> PretrendTest:
    """Pre-test of parallel trends on a fitted group-time result (see
    :meth:`didmem.GroupTimeResult.pretrend_test`)."""
    method = DEFAULT_PRETREND if method is None else method
    if method not in PRETREND_METHODS:
        raise ParameterError(f"The 'method' of pretrend_test must be one of "
                             f"{set(PRETREND_METHODS)} or None. Got {method!r}.")
    return {"event": _event_test, "max_t": _max_t_test, "wald": _wald}[method](res)
