"""The area under the ROC curve of two samples and DeLong's variance of it.

Plain numpy and scipy's midranks (``rankdata``, method ``"average"``): the AUC is the
Mann-Whitney statistic with ties counted one half, and DeLong, DeLong & Clarke-Pearson
(1988) give its variance from the structural components (placement values) of each sample.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm, rankdata, t as student_t

__all__ = ["delong_auc", "delong_df", "auc_interval", "newcombe_variance"]


def delong_auc(positives, negatives) -> tuple:
    r"""AUC of ``positives`` against ``negatives`` and DeLong's estimate of its variance.

    Parameters
    ----------
    positives, negatives : array-like of float
        Scores of the two samples (members and non-members), ``m`` and ``n`` of them; higher
        scores are taken as evidence of a positive. No value may be NaN.

    Returns
    -------
    auc : float
        :math:`\hat\theta = \frac{1}{mn} \sum_{i,j} \psi(X_i, Y_j)`, ``psi`` 1 when
        ``X > Y``, 1/2 on a tie, 0 otherwise (NaN when a sample is empty).
    variance : float
        :math:`S_{10}/m + S_{01}/n`, the sample variances (``ddof=1``) of the placement
        values :math:`V_{10}(X_i) = \frac{1}{n}\sum_j \psi(X_i, Y_j)` and
        :math:`V_{01}(Y_j) = \frac{1}{m}\sum_i \psi(X_i, Y_j)` (NaN when a sample has fewer
        than two scores).

    Notes
    -----
    With midranks :math:`R` in the pooled sample and :math:`R^X`, :math:`R^Y` within each
    sample, :math:`V_{10}(X_i) = (R(X_i) - R^X(X_i)) / n` and
    :math:`V_{01}(Y_j) = 1 - (R(Y_j) - R^Y(Y_j)) / m` (Sun & Xu 2014, "Fast implementation of
    DeLong's algorithm"), in :math:`O((m + n) \log(m + n))`.

    References
    ----------
    DeLong, E. R., DeLong, D. M. & Clarke-Pearson, D. L. (1988). Comparing the areas under two
    or more correlated receiver operating characteristic curves: a nonparametric approach.
    Biometrics 44(3), 837-845.
    """
    auc, s10, s01 = _placement_variances(positives, negatives)
    return auc, s10 + s01


def delong_df(positives, negatives) -> float:
    r"""Welch-Satterthwaite degrees of freedom of DeLong's variance :math:`S_{10}/m +
    S_{01}/n`: :math:`(S_{10}/m + S_{01}/n)^2 / [(S_{10}/m)^2/(m-1) + (S_{01}/n)^2/(n-1)]`,
    between ``min(m, n) - 1`` and ``m + n - 2`` (NaN where the variance is NaN or 0)."""
    _, a, b = _placement_variances(positives, negatives)
    if not np.isfinite(a + b) or a + b <= 0:
        return float("nan")
    m, n = np.size(positives), np.size(negatives)
    return float((a + b) ** 2 / (a ** 2 / (m - 1) + b ** 2 / (n - 1)))


def _placement_variances(positives, negatives) -> tuple:
    """``(auc, S10 / m, S01 / n)`` (NaN where undefined)."""
    x = np.asarray(positives, dtype=np.float64).ravel()
    y = np.asarray(negatives, dtype=np.float64).ravel()
    m, n = x.size, y.size
    if m == 0 or n == 0:
        return float("nan"), float("nan"), float("nan")
    pooled = rankdata(np.concatenate([x, y]))
    v10 = (pooled[:m] - rankdata(x)) / n
    v01 = 1.0 - (pooled[m:] - rankdata(y)) / m
    auc = float(v10.mean())
    if m < 2 or n < 2:
        return auc, float("nan"), float("nan")
    return auc, float(v10.var(ddof=1) / m), float(v01.var(ddof=1) / n)


def newcombe_variance(theta, m: int, n: int):
    r"""The variance of an AUC of ``theta`` with ``m`` and ``n`` scores that
    :func:`auc_interval` inverts (Newcombe's Method 5).

    .. math:: V(\theta) = \frac{\theta(1-\theta)}{mn}\Big[1 + N^*\frac{1-\theta}{2-\theta}
              + N^*\frac{\theta}{1+\theta}\Big], \qquad N^* = \frac{m+n}{2} - 1:

    Hanley & McNeil's (1982) Mann-Whitney variance
    :math:`[\theta(1-\theta) + (m-1)(Q_1-\theta^2) + (n-1)(Q_2-\theta^2)]/(mn)`, with
    :math:`Q_1 = \theta/(2-\theta)` and :math:`Q_2 = 2\theta^2/(1+\theta)` (their values
    for exponential scores) and both ``m - 1`` and ``n - 1`` replaced by their mean
    :math:`N^*`, which keeps it from being too small when one sample is small. A function of
    ``theta`` alone, zero at 0 and 1.
    """
    theta = np.asarray(theta, dtype=np.float64)
    size = (m + n) / 2.0 - 1.0
    return theta * (1 - theta) * (1 + size * (1 - theta) / (2 - theta)
                                  + size * theta / (1 + theta)) / (m * n)


def auc_interval(auc: float, m: int, n: int, z: float, variance: float | None = None,
                 df: float | None = None) -> tuple:
    r"""Newcombe's (2006) score interval of an AUC: the ``theta`` with
    :math:`|\hat\theta - \theta| \le z \sqrt{r\,V(\theta)}`.

    Parameters
    ----------
    auc : float
        :math:`\hat\theta` of ``m`` positive against ``n`` negative scores.
    m, n : int
        Sizes of the two samples.
    z : float
        The normal quantile (1.96 for 95%).
    variance : float, optional
        An estimate of the AUC's variance from the scores (DeLong's, :func:`delong_auc`):
        where it exceeds :math:`V(\hat\theta)` the interval widens by their ratio,
        :math:`r = \max(1, \mathrm{variance} / V(\hat\theta))` (``r = 1`` without it,
        or at an AUC of 0 or 1, where DeLong's estimate is 0).
    df : float, optional
        Degrees of freedom of ``variance`` (:func:`delong_df`): it is then scaled by
        :math:`(t_{df} / z)^2`, the t quantile at ``z``'s level over ``z``, since an
        estimated variance is itself noisy (the interval is otherwise too short on
        heavy-tailed scores).

    Returns
    -------
    tuple of float
        ``(lower, upper)``, within ``[0, 1]``; NaN when ``auc`` is NaN or a sample is empty.

    Notes
    -----
    :math:`V` is :func:`newcombe_variance` (Newcombe's Method 5). As Wilson's interval of a
    proportion, the bounds are where the variance *at the bound*, not the estimated one,
    puts them, so the interval is neither empty nor of zero width at an AUC of 0 or 1 (it
    reaches 1 when :math:`\hat\theta = 1`), and it lies inside ``[0, 1]``, strictly so
    where :math:`0 < \hat\theta < 1`. It depends on the scores only through
    :math:`\hat\theta` (so through their ranks: a monotone transform of the scores leaves
    it unchanged) and is symmetric: ``auc_interval(1 - a)`` is ``1 - auc_interval(a)``
    reversed.

    Limits: :math:`V` is the variance of exponential scores; where the true variance is
    larger (heavy tails) Newcombe's interval alone is too narrow (coverage 0.89-0.92 on
    Cauchy scores at AUCs of 0.9-0.97), which the ratio ``r`` to DeLong's estimate (with
    its t quantile) mends;
    where it is smaller (many ties) the interval is wider than it needs to be.
    ``benchmarks/auc_coverage.py`` measures its coverage beside DeLong's Wald and logit
    intervals and a stratified bootstrap (``benchmarks/RESULTS.md``).

    References
    ----------
    Newcombe, R. G. (2006). Confidence intervals for an effect size measure based on the
    Mann-Whitney statistic. Part 2: asymptotic methods and evaluation. Statistics in
    Medicine 25(4), 559-573.
    Hanley, J. A. & McNeil, B. J. (1982). The meaning and use of the area under a receiver
    operating characteristic (ROC) curve. Radiology 143(1), 29-36.
    """
    if not np.isfinite(auc) or m < 1 or n < 1:
        return float("nan"), float("nan")
    z2 = float(z) ** 2
    if variance is not None and np.isfinite(variance) and 0 < auc < 1:
        if df is not None and np.isfinite(df) and df > 0:
            variance = variance * (float(student_t.ppf(norm.cdf(z), df)) / z) ** 2
        z2 *= max(1.0, float(variance) / float(newcombe_variance(auc, m, n)))

    def gap(theta):  # negative inside the interval, positive outside
        return (auc - theta) ** 2 - z2 * float(newcombe_variance(theta, m, n))

    # V > 0 on (0, 1), so gap < 0 just beside auc and gap(0) = auc^2, gap(1) = (1 - auc)^2
    inner = min(max(auc, _EDGE), 1 - _EDGE)
    lower = 0.0 if auc <= 0 else brentq(gap, 0.0, inner, xtol=1e-13)
    upper = 1.0 if auc >= 1 else brentq(gap, inner, 1.0, xtol=1e-13)
    return float(lower), float(upper)


_EDGE = 1e-12
