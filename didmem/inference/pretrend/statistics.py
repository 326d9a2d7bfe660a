"""Pre-tests of parallel trends: pure functions on estimates, covariances and bootstrap draws.

Three tests of "every pre-treatment cell is zero" (or of its event-time average):

* :func:`wald_test` on a covariance matrix, chi-squared or, with a sample size, Hotelling's
  F. On all pre-treatment cells it is R did's pre-test; it inverts a covariance estimated
  from the units, so with thousands of cells it rejects true parallel trends (at the paper's
  scale W / df is about 4). On the event-time averages of the pre-treatment cells (tens of
  restrictions) it is calibrated and keeps its power against smooth pre-trends.
* :func:`max_t_test`: the largest studentised pre-treatment cell against the multiplier
  bootstrap's distribution of the same maximum (Chernozhukov, Chetverikov & Kato 2013), valid
  when the restrictions outnumber the units; powerful against a few large deviations, weak
  against a small drift spread over every cell.
* :func:`wald_power`: the power of a Wald test against a stated mean (Roth 2022 asks that a
  pre-test's power be reported beside it), from the noncentral chi-squared or F.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import chdtrc, chdtri, fdtrc, fdtri

from .result import PretrendTest
from ..small_sample import t_to_normal

__all__ = ["PretrendTest", "wald_test", "max_t_test", "wald_power", "linear_drift"]


def _solve(cov: np.ndarray, est: np.ndarray) -> tuple[np.ndarray | None, str]:
    """``cov^-1 est``, or None with a reason when ``cov`` is not finite or is singular."""
    from scipy import linalg  # here: a saved result's report reads power without it

    if not np.all(np.isfinite(cov)) or not np.all(np.isfinite(est)):
        return None, "NaN in the estimates or their covariance"
    with warnings.catch_warnings():  # an exactly singular matrix is reported below
        warnings.simplefilter("ignore", linalg.LinAlgWarning)
        lu, piv = linalg.lu_factor(cov, check_finite=False)
    rcond, _ = linalg.lapack.dgecon(lu, np.abs(cov).sum(axis=0).max(), norm="1")
    if rcond <= np.finfo(float).eps:
        return None, "singular covariance"
    return linalg.lu_solve((lu, piv), est, check_finite=False), ""


def wald_test(estimates, covariance, *, n_obs: int | None = None):
    """Wald test that ``estimates`` are all zero.

    Parameters
    ----------
    estimates : ndarray (p,)
    covariance : ndarray (p, p)
    n_obs : int, optional
        Independent units (or clusters) behind the covariance. Given, the p-value is
        Hotelling's: ``W (n - p) / (p (n - 1))`` against ``F(p, n - p)``; else chi-squared(p).

    Returns
    -------
    statistic, pvalue, df_denominator, note
        NaN statistic and p-value with a ``note`` when the covariance is singular or ``n_obs``
        does not exceed ``p``.

    Examples
    --------
    >>> wald_test(np.array([1.0, 2.0]), np.diag([1.0, 4.0]))[:2]
    (2.0, 0.36787944117144245)
    """
    est = np.asarray(estimates, dtype=np.float64)
    p = est.size
    if p == 0:
        return np.nan, np.nan, None, "no pre-treatment restrictions to test"
    solved, note = _solve(np.asarray(covariance, dtype=np.float64), est)
    if solved is None:
        return np.nan, np.nan, None, note
    stat = float(est @ solved)
    if n_obs is None:
        return stat, float(chdtrc(p, stat)), None, ""
    if n_obs <= p:
        return stat, np.nan, None, f"{n_obs} units do not exceed the {p} restrictions"
    scaled = stat * (n_obs - p) / (p * (n_obs - 1))
    return stat, float(fdtrc(p, n_obs - p, scaled)), float(n_obs - p), ""


def max_t_test(estimates, std_errors, draws, draw_std_errors, df=None):
    """Maximum-absolute-t test that all ``estimates`` are zero, calibrated by the multiplier bootstrap.

    Parameters
    ----------
    estimates, std_errors : ndarray (p,)
        The cells and the standard errors that studentise them.
    draws : ndarray (B, p)
        Bootstrap draws of the cells' deviations (``sum_i U_i psi_i``).
    draw_std_errors : ndarray (p,)
        The standard errors that studentise the draws (their own scale).
    df : ndarray (p,), optional
        Degrees of freedom of each studentised cell: ``|t|`` is first mapped to the normal
        value of equal tail area, so that the bootstrap's Gaussian maximum applies.

    Returns
    -------
    statistic, pvalue : float
        ``max_j |t_j|`` (normal scale) and ``(1 + #{M_b >= statistic}) / (B + 1)`` with
        ``M_b = max_j |draw_bj| / draw_std_errors_j``.

    Notes
    -----
    Chernozhukov, Chetverikov & Kato (2013) show that the multiplier bootstrap approximates
    the distribution of such a maximum even when ``p`` exceeds the number of units, which is
    what a Wald test cannot do.
    """
    est = np.asarray(estimates, dtype=np.float64)
    t = np.abs(est / np.asarray(std_errors, dtype=np.float64))
    if df is not None:
        t = t_to_normal(t, df)
    stat = float(np.max(t))
    boot = np.max(np.abs(np.asarray(draws) / np.asarray(draw_std_errors)[None, :]), axis=1)
    pvalue = (1.0 + np.count_nonzero(boot >= stat)) / (boot.size + 1.0)
    return stat, float(pvalue)


def wald_power(mean, covariance, *, alpha: float = 0.05, n_obs: int | None = None) -> float:
    """Power of :func:`wald_test` at level ``alpha`` when the estimates have mean ``mean``.

    Noncentral chi-squared with noncentrality ``mean' V^-1 mean``, or noncentral F for the
    Hotelling version (``n_obs`` given).

    Examples
    --------
    >>> round(wald_power(np.array([0.0]), np.eye(1)), 6)  # no pre-trend: the size
    0.05
    """
    mean = np.asarray(mean, dtype=np.float64)
    p = mean.size
    solved, _ = _solve(np.asarray(covariance, dtype=np.float64), mean)
    if solved is None or p == 0:
        return float("nan")
    lam = float(mean @ solved)
    if n_obs is None:
        return noncentral_power(lam, p, alpha)
    if n_obs <= p:
        return float("nan")
    # Hotelling: the scaled statistic is noncentral F with the same lambda
    return noncentral_power(lam, p, alpha, n_obs - p)


def noncentral_power(lam: float, df: float, alpha: float,
                     df_denominator: float | None = None) -> float:
    """Power at level ``alpha`` of a Wald test with ``df`` restrictions against noncentrality
    ``lam``: noncentral chi-squared, or noncentral F with ``df_denominator`` (``alpha`` at
    ``lam = 0``)."""
    if not lam > 0:
        return alpha
    if df_denominator is None:
        return float(_ncx2_sf(chdtri(df, alpha), df, lam))
    crit = fdtri(df, df_denominator, 1.0 - alpha)
    return float(_ncf_sf(crit, df, df_denominator, lam))


def _ncx2_sf(x, df, nc):
    """``scipy.stats.ncx2.sf`` for ``nc > 0``: the special function it calls, so that a fit
    does not import :mod:`scipy.stats` (half a second) for one tail probability."""
    try:
        from scipy.special._ufuncs import _ncx2_sf as sf
    except ImportError:  # another scipy: the public route, same numbers
        from scipy.stats import ncx2

        return ncx2.sf(x, df, nc)
    return sf(x, df, nc)


def _ncf_sf(x, dfn, dfd, nc):
    """``scipy.stats.ncf.sf`` (see :func:`_ncx2_sf`)."""
    try:
        from scipy.special._ufuncs import _ncf_sf as sf
    except ImportError:
        from scipy.stats import ncf

        return ncf.sf(x, dfn, dfd, nc)
    return sf(x, dfn, dfd, nc)


def linear_drift(t_index, b_index, per_period: float) -> np.ndarray:
    """Expected cells under a linear pre-trend: the treated drift by ``per_period`` a period.

    A cell comparing period ``t`` with base period ``b`` then has mean
    ``per_period * (t - b)`` (indices of the periods); cells without a base period (level
    comparisons) get NaN.
    """
    t_index = np.asarray(t_index, dtype=np.float64)
    b_index = np.asarray(b_index, dtype=np.float64)
    return np.where(b_index >= 0, per_period * (t_index - b_index), np.nan)
