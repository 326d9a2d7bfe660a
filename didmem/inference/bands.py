"""Standard errors and simultaneous critical values from bootstrap draws, as R's ``mboot``.

The bootstrap standard error of a column is its interquartile range divided by that of the
standard normal, with quantiles of type 1. The simultaneous (sup-t) critical value is the
type-1 ``1 - alpha`` quantile, over draws, of the largest ``|draw| / se`` across the
non-degenerate columns.
"""

from __future__ import annotations

import warnings
from statistics import NormalDist

import numpy as np

from ..errors import InferenceWarning

__all__ = ["DEGENERATE", "IQR_NORMAL", "bootstrap_se", "sup_t_critical_value", "analytic_se",
           "simultaneous_band", "normal_quantile", "sup_t_statistics", "type1_quantile",
           "type1_quantiles"]

DEGENERATE = 10.0 * np.sqrt(np.finfo(float).eps)  # R: sqrt(.Machine$double.eps) * 10
IQR_NORMAL = NormalDist().inv_cdf(0.75) - NormalDist().inv_cdf(0.25)


def normal_quantile(p: float) -> float:
    """Quantile of the standard normal distribution."""
    return NormalDist().inv_cdf(p)


def analytic_se(variance: np.ndarray) -> np.ndarray:
    """Square root of the influence-function variance; at or below the threshold, NaN."""
    se = np.sqrt(np.maximum(variance, 0.0))
    se[~(se > DEGENERATE)] = np.nan
    return se


def bootstrap_se(draws: np.ndarray, bres_scale: float) -> np.ndarray:
    """IQR-based standard error of every column of ``draws`` (NaN where degenerate).

    ``bres_scale`` converts draws to R's ``bres`` scale (``n / sqrt(n_clusters)``), on which
    R decides that a column is degenerate (its sum of squares at or below the threshold).
    """
    q = type1_quantiles(draws, np.array([0.25, 0.75]))
    se = (q[1] - q[0]) / IQR_NORMAL
    degenerate = ~(np.einsum("ij,ij->j", draws, draws) * bres_scale**2 > DEGENERATE)
    se[degenerate] = np.nan
    se[~(se > DEGENERATE)] = np.nan
    return se


def sup_t_critical_value(draws: np.ndarray, se: np.ndarray, alpha: float, bres_scale: float) -> float:
    """Simultaneous critical value over the columns whose bootstrap scale is non-degenerate.

    Returns NaN when no column qualifies.
    """
    keep = np.isfinite(se) & (se * bres_scale > DEGENERATE)
    if not keep.any():
        return float("nan")
    stats = sup_t_statistics(draws, np.where(keep, se, 1.0), keep)
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return float("nan")
    return type1_quantile(stats, 1.0 - alpha)


#: draws per block of :func:`sup_t_statistics` (bounds its temporary: this x columns)
_SUP_T_ROWS = 128


def sup_t_statistics(draws: np.ndarray, sigma: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``max_c |draws[r, c]| / sigma[c]`` over the kept columns, for every draw ``r``
    (``-inf`` when none is kept), a block of draws at a time.

    Equal, number for number, to its plain twin
    :func:`didmem.inference.reference.sup_t_statistics` (a maximum of the same quotients).
    """
    keep = np.asarray(keep, dtype=bool)
    out = np.full(draws.shape[0], -np.inf)
    if not keep.any():
        return out
    all_kept = bool(keep.all())
    sigma = np.asarray(sigma, dtype=np.float64)[keep]
    for r0 in range(0, draws.shape[0], _SUP_T_ROWS):
        block = draws[r0:r0 + _SUP_T_ROWS]
        ratio = np.abs(block if all_kept else block[:, keep])
        ratio /= sigma
        np.fmax.reduce(ratio, axis=1, out=out[r0:r0 + _SUP_T_ROWS])  # NaN: skipped
    return out


def type1_quantiles(draws: np.ndarray, probs) -> np.ndarray:
    """Column-wise quantiles of type 1 (R's ``quantile(type = 1)``, the inverse of the
    empirical distribution function): ``probs x columns``, by one partial sort of the
    columns at the needed order statistics (the numbers of
    :func:`~didmem.inference.kernels.type1_quantiles`, exactly)."""
    draws = np.asarray(draws, dtype=np.float64)
    index = [_type1_index(draws.shape[0], float(p)) for p in np.atleast_1d(probs)]
    return np.partition(draws, sorted(set(index)), axis=0)[index]


def type1_quantile(values: np.ndarray, p: float) -> float:
    """:func:`type1_quantiles` of a vector at one probability."""
    values = np.asarray(values, dtype=np.float64).ravel()
    return float(type1_quantiles(values[:, None], [p])[0, 0])


def _type1_index(n: int, p: float) -> int:
    """0-based order statistic of R's ``quantile(type = 1)`` at probability ``p``."""
    nppm = n * p
    j = np.floor(nppm + 4.0 * np.finfo(float).eps)
    k = min(max(j + 1.0 if nppm > j else j, 1.0), float(n))
    return int(k) - 1


def simultaneous_band(draws, se, alpha: float, bres_scale: float, *, at_least_normal: bool):
    """Critical value and band type, falling back to pointwise intervals with a warning.

    Falls back when no column is non-degenerate (both R functions) and, when
    ``at_least_normal`` (R's ``aggte``), when the sup-t value is below the normal quantile.
    Warns when it is 7 or more, as R does.

    Returns
    -------
    critical_value : float
    band : {"simultaneous", "pointwise"}
    """
    z = normal_quantile(1 - alpha / 2)
    crit = sup_t_critical_value(draws, se, alpha, bres_scale)
    if not np.isfinite(crit):
        warnings.warn("No estimate has a non-degenerate bootstrap distribution (standard errors "
                      "are missing); reporting pointwise intervals.", InferenceWarning,
                      stacklevel=3)
        return z, "pointwise"
    if at_least_normal and crit < z:
        warnings.warn("The simultaneous critical value is below the pointwise one; reporting "
                      "pointwise intervals, as R did does.", InferenceWarning, stacklevel=3)
        return z, "pointwise"
    if crit >= 7:
        warnings.warn(f"Simultaneous critical value {crit:.2f} is very large: the cohorts may be "
                      "too small or the outcome too flat for a reliable band.",
                      InferenceWarning, stacklevel=3)
    return crit, "simultaneous"
