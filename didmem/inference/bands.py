"""Standard errors and simultaneous critical values from bootstrap draws, as R's ``mboot``.

The bootstrap standard error of a column is its interquartile range divided by that of the
standard normal, with quantiles of type 1. The simultaneous (sup-t) critical value is the
type-1 ``1 - alpha`` quantile, over draws, of the largest ``|draw| / se`` across the
non-degenerate columns.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import norm

from ..errors import InferenceWarning
from . import kernels

__all__ = ["DEGENERATE", "IQR_NORMAL", "bootstrap_se", "sup_t_critical_value", "analytic_se",
           "simultaneous_band"]

DEGENERATE = 10.0 * np.sqrt(np.finfo(float).eps)  # R: sqrt(.Machine$double.eps) * 10
IQR_NORMAL = norm.ppf(0.75) - norm.ppf(0.25)


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
    q = kernels.type1_quantiles(draws, np.array([0.25, 0.75]))
    se = (q[1] - q[0]) / IQR_NORMAL
    degenerate = ~((draws**2).sum(axis=0) * bres_scale**2 > DEGENERATE)
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
    stats = kernels.sup_t_statistics(draws, np.where(keep, se, 1.0), keep)
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return float("nan")
    q = kernels.type1_quantiles(stats[:, None], np.array([1.0 - alpha]))
    return float(q[0, 0])


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
    z = norm.ppf(1 - alpha / 2)
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
