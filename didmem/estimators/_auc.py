"""The area under the ROC curve of two samples and DeLong's variance of it.

Plain numpy and scipy's midranks (``rankdata``, method ``"average"``): the AUC is the
Mann-Whitney statistic with ties counted one half, and DeLong, DeLong & Clarke-Pearson
(1988) give its variance from the structural components (placement values) of each sample.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

__all__ = ["delong_auc"]


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
    x = np.asarray(positives, dtype=np.float64).ravel()
    y = np.asarray(negatives, dtype=np.float64).ravel()
    m, n = x.size, y.size
    if m == 0 or n == 0:
        return float("nan"), float("nan")
    pooled = rankdata(np.concatenate([x, y]))
    v10 = (pooled[:m] - rankdata(x)) / n
    v01 = 1.0 - (pooled[m:] - rankdata(y)) / m
    auc = float(v10.mean())
    if m < 2 or n < 2:
        return auc, float("nan")
    return auc, float(v10.var(ddof=1) / m + v01.var(ddof=1) / n)
