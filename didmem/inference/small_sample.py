"""Small-sample corrections of the group-time cells: Welch variances, degrees of freedom and
t-adjusted simultaneous critical values.

A cell ``ATT(g, t)`` (without covariates) is a difference of two weighted means of outcome
changes: cohort ``g``'s and the control group's. Its influence-function variance
``sum_i psi_i**2`` splits into a treated part ``A`` and a control part ``B``, each the
plug-in variance of a mean, which divides the sum of squares by ``n`` where the unbiased
estimator divides by ``n - 1``. With 15 units per cohort that is 7% too small, and the
studentised cell has the heavier tails of a t distribution with about 14 degrees of freedom;
a sup over many cells sits far in those tails, so both errors compound.

The correction here is Welch's (1947) for a difference of two means, cell by cell:

* variance ``A n_1 / (n_1 - 1) + B n_0 / (n_0 - 1)`` (the HC1 / CR1 factor per group);
* degrees of freedom by Welch-Satterthwaite,
  ``(A' + B')**2 / (A'**2 / (n_1 - 1) + B'**2 / (n_0 - 1))`` with the corrected parts;
* with a cluster column, the factor ``G / (G - 1)`` on the whole variance and ``G - 1``
  degrees of freedom (CR1).

The simultaneous band keeps the dependence between cells that the multiplier bootstrap
estimates (the sup-t critical value ``c`` of the draws studentised by the uncorrected
analytic standard errors, on the normal scale) and gives each cell the t quantile at the same
pointwise level: ``c_j = F^{-1}_{t, df_j}(Phi(c))``. That is a Gaussian copula with t
margins; as ``df_j`` grows ``c_j`` tends to ``c``, R's band.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri, stdtr, stdtrit

__all__ = ["SmallSampleCorrection", "treated_variance", "welch_correction", "cluster_correction",
           "block_welch", "t_critical_values", "t_to_normal", "small_sample_correction"]


@dataclass(frozen=True)
class SmallSampleCorrection:
    """The small-sample correction of every cell.

    Attributes
    ----------
    variance : ndarray
        Corrected variances (on the scale of ``sum_i psi_i**2``).
    df : ndarray
        Degrees of freedom of each studentised cell (NaN where the variance is zero).
    factor : ndarray
        ``variance`` divided by the uncorrected variance.
    """

    variance: np.ndarray
    df: np.ndarray
    factor: np.ndarray


def treated_variance(prepared, cells, stats, influence=None) -> np.ndarray:
    """The treated cohort's part ``sum_{i in g} psi_i**2`` of every cell's variance: that of
    ``influence`` (a :class:`~didmem.inference.influence.CellInfluence`), by default the
    balanced route's from the cells' statistics (reference cells get 0)."""
    if influence is None:
        from .grouped import GroupedInfluence

        influence = GroupedInfluence(prepared, cells, stats)
    return influence.treated_variance()


def _factor(n: np.ndarray) -> np.ndarray:
    """``n / (n - 1)``, and 1 where ``n <= 1`` (a single unit's part is zero anyway)."""
    n = np.asarray(n, dtype=np.float64)
    return np.where(n > 1, n / np.maximum(n - 1, 1), 1.0)


def welch_correction(treated: np.ndarray, control: np.ndarray, n_treated: np.ndarray,
                     n_control: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Welch's variance and Welch-Satterthwaite degrees of freedom of a difference of means.

    Parameters
    ----------
    treated, control : ndarray
        Plug-in variance parts (dividing by ``n``) of the treated and control means.
    n_treated, n_control : ndarray
        Units in each group.

    Returns
    -------
    variance, df : ndarray
        ``variance = treated n1/(n1-1) + control n0/(n0-1)``; ``df`` as in the module notes
        (a group of one unit contributes no term; NaN where the variance is zero).

    Examples
    --------
    Two groups of 3 and 5 units with plug-in parts 2/3 and 4/5:

    >>> v, df = welch_correction(np.array([2 / 3]), np.array([0.8]), np.array([3]), np.array([5]))
    >>> float(v[0]), round(float(df[0]), 4)
    (2.0, 5.3333)
    """
    a = np.maximum(treated, 0.0) * _factor(n_treated)
    b = np.maximum(control, 0.0) * _factor(n_control)
    n1 = np.asarray(n_treated, dtype=np.float64)
    n0 = np.asarray(n_control, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = (np.where(n1 > 1, a**2 / np.maximum(n1 - 1, 1), 0.0)
                 + np.where(n0 > 1, b**2 / np.maximum(n0 - 1, 1), 0.0))
        df = np.where(denom > 0, (a + b) ** 2 / denom, np.nan)
    return a + b, df


def block_welch(parts: np.ndarray, counts: np.ndarray,
                dependence=None) -> tuple[np.ndarray, np.ndarray]:
    """Welch's correction of a sum of independent means' variances, block by block: the one
    Welch function of the cells (groups of units), the aggregations (blocks) and the holes.

    Parameters
    ----------
    parts : ndarray (n_blocks, n_rows)
        Each block's plug-in part ``sum_{i in b} psi_i**2`` of each row's variance.
    counts : ndarray (n_blocks,) or (n_blocks, n_rows)
        Units per block, the same for every row or per row (a block with no unit in a row
        adds nothing to it).

    Returns
    -------
    variance, df : ndarray (n_rows,)
        ``sum_b a_b`` with ``a_b = parts_b n_b / (n_b - 1)``, and the Welch-Satterthwaite
        ``(sum_b a_b)**2 / sum_b a_b**2 / (n_b - 1)`` (blocks of one unit add no term). For a
        single cell against the never-treated block it is :func:`welch_correction`.

    Other Parameters
    ----------------
    dependence : tuple, optional
        ``(pairs, shared, r2)`` for blocks estimated on overlapping units (a panel with
        holes): ``pairs`` (n_pairs x 2) indices of two blocks, ``shared`` and ``r2``
        (n_pairs x n_rows) the units they share and the squared correlation of their
        variables there. Each pair adds ``2 a_k a_l r2 m / ((n_k - 1)(n_l - 1))`` to the
        denominator: the covariance of two sample variances on ``m`` shared units under
        normality, so the degrees of freedom no longer treat the blocks as independent.
    """
    parts = np.maximum(np.asarray(parts, dtype=np.float64), 0.0)
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim == 1:
        counts = counts[:, None]
    a = parts * _factor(counts)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = np.where(counts > 1, a**2 / np.maximum(counts - 1, 1), 0.0).sum(axis=0)
        if dependence is not None:
            pairs, shared, r2 = dependence
            full = np.broadcast_to(counts, a.shape)
            for (k, l), m, r in zip(pairs, np.asarray(shared, dtype=np.float64),
                                    np.asarray(r2, dtype=np.float64)):
                ok = (full[k] > 1) & (full[l] > 1) & (m > 0)
                denom = denom + np.where(ok, 2 * a[k] * a[l] * r * m / (
                    np.maximum(full[k] - 1, 1) * np.maximum(full[l] - 1, 1)), 0.0)
        total = a.sum(axis=0)
        df = np.where(denom > 0, total**2 / denom, np.nan)
    return total, df


def cluster_correction(variance: np.ndarray, n_clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """CR1: ``G / (G - 1)`` times the cluster-robust variance, ``G - 1`` degrees of freedom."""
    g = float(n_clusters)
    factor = g / (g - 1) if g > 1 else 1.0
    return variance * factor, np.full(np.shape(variance), max(g - 1, 1.0))


def t_critical_values(level: float, df: np.ndarray) -> np.ndarray:
    """The t quantile at ``level`` for each ``df`` (the normal one where ``df`` is infinite).

    ``level`` is a one-sided probability: ``Phi(c)`` for a normal-scale critical value ``c``,
    ``1 - alpha / 2`` for pointwise intervals.
    """
    df = np.asarray(df, dtype=np.float64)
    out = np.full(df.shape, np.nan)
    finite = np.isfinite(df) & (df > 0)
    out[finite] = stdtrit(df[finite], level)
    out[np.isinf(df)] = ndtri(level)
    return out


def t_to_normal(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Map ``|t|`` with ``df`` degrees of freedom to the normal value of the same tail area.

    Computed from the lower tail, ``-Phi^{-1}(F_t(-|t|))``, so that large values stay exact.
    """
    t = np.abs(np.asarray(t, dtype=np.float64))
    df = np.broadcast_to(np.asarray(df, dtype=np.float64), t.shape)
    out = t.copy()
    finite = np.isfinite(df) & np.isfinite(t)
    out[finite] = -ndtri(stdtr(df[finite], -t[finite]))
    return out


def normal_level(critical_value: float) -> float:
    """``Phi(c)``: the one-sided level of a normal-scale critical value."""
    return float(ndtr(critical_value))


def small_sample_correction(influence, variance) -> SmallSampleCorrection:
    """Welch (or, with clusters, CR1) correction of every cell's variance.

    Parameters
    ----------
    influence : CellInfluence
        The fit's influence functions: their design (its clusters) and, without clusters,
        the independent groups of each cell's variance with their contributing units
        (:meth:`~didmem.inference.influence.CellInfluence.welch_groups`).
    variance : ndarray
        The uncorrected influence-function variances ``sum_i psi_i**2`` (NaN at reference
        cells, which stay NaN).
    """
    variance = np.asarray(variance, dtype=np.float64)
    prepared = influence.prepared
    if prepared.clusters is not None:
        corrected, df = cluster_correction(variance, prepared.n_clusters)
    else:
        corrected, df = block_welch(*influence.welch_groups(), influence.welch_dependence())
        corrected = np.where(np.isnan(variance), np.nan, corrected)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(variance > 0, corrected / variance, 1.0)
    df = np.where(variance > 0, df, np.nan)
    return SmallSampleCorrection(variance=corrected, df=df, factor=factor)
