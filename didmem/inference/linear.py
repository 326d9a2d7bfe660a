"""Inference for linear combinations of cells (aggregations, the pre-test).

An aggregation's influence function is ``sum_c L[key, c] psi_c`` plus, for estimated
cohort-share weights, ``(omega[key, g(i)] w_i - Omega[key]) / n`` with
``Omega = sum_g omega[key, g] pg_g``. Its analytic variance needs the dense units x keys
matrix (keys are few); its bootstrap draws follow from the cells' draws and the grouped
weight sums of the same bootstrap, so cells and aggregations share one set of draws.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .holes import HolesInfluence

__all__ = ["combination_variance", "combination_covariance", "combination_draws",
           "cell_covariance", "combination_block_variances", "combination_moments"]


def _wif_constants(design, omega):
    return omega @ design.cohort_shares


def _combination_psi(design, cells, stats, weights, omega, influence=None) -> np.ndarray:
    """The units x rows influence functions of the linear combinations ``weights``/``omega``.

    They come from per-block coefficients and one matrix product per block or, on the
    generic route (``influence`` given, with covariates), from the stored cell influence
    functions.
    """
    n = design.n_units
    if influence is not None:
        psi = influence.combine(weights)
        for j in range(design.n_cohorts):  # estimated-weights term on cohort j's units
            lo, hi = design.starts[j], design.starts[j + 1]
            psi[lo:hi] += design.w[lo:hi, None] * omega[:, j][None, :] / n
        psi -= _wif_constants(design, omega)[None, :] / n
        return psi
    csc = weights.tocsc()
    n, n_time = design.y.shape
    n_keys, k = csc.shape[0], design.n_cohorts
    coef, beta = kernels.aggregate_coefficients(
        *cells.kernel_args(), stats["mu1"], stats["mu0"], stats["w1"], stats["w0"],
        csc.indptr.astype(np.int64), csc.indices.astype(np.int64), csc.data, n_keys,
        design.starts.size - 1, n_time,
    )
    beta[:k] += omega.T / n  # estimated-weights term: omega_g w_i / n on cohort g's units
    # a block enters only the keys whose cells use it (a cohort's own keys, the controls'):
    # its units' other columns are 0, and the product is formed for the active columns only
    active = (coef != 0).any(axis=1) | (beta != 0)
    psi = np.zeros((n, n_keys))
    for j in range(design.starts.size - 1):
        lo, hi = design.starts[j], design.starts[j + 1]
        w = design.w[lo:hi, None]
        cols = np.flatnonzero(active[j])
        if cols.size == n_keys:
            psi[lo:hi] = w * (design.y[lo:hi] @ coef[j] + beta[j])
        elif cols.size:
            psi[lo:hi, cols] = w * (design.y[lo:hi] @ coef[j][:, cols] + beta[j, cols])
    psi -= _wif_constants(design, omega)[None, :] / n
    return psi


def _holes_coefficients(design, influence, weights, omega):
    return influence.combination_coefficients(weights, omega, design.n_units,
                                              design.cohort_shares)


def combination_variance(design, cells, stats, weights, omega, influence=None) -> np.ndarray:
    """``sum_i psi_i**2`` (or of cluster sums) for every row of ``weights`` / ``omega``."""
    if isinstance(influence, HolesInfluence):
        return np.diag(combination_covariance(design, cells, stats, weights, omega,
                                              influence)).copy()
    return _sum_squares(design, _combination_psi(design, cells, stats, weights, omega, influence))


def combination_covariance(design, cells, stats, weights, omega, influence=None) -> np.ndarray:
    """``psi' psi`` (rows x rows) of the linear combinations; with clusters, of cluster sums.

    The same influence functions as :func:`combination_variance`, whose values are its
    diagonal. Divided by nothing: like the variances, it is on the scale of ``sum_i psi_i``.
    """
    if isinstance(influence, HolesInfluence):  # from per-block moments, no units x rows matrix
        coef = _holes_coefficients(design, influence, weights, omega)
        return influence.combination_covariance(coef, design.clusters, design.n_clusters)
    psi = _combination_psi(design, cells, stats, weights, omega, influence)
    return _cross_products(design, psi)


def combination_moments(design, cells, stats, weights, omega, influence=None, *,
                        blocks: bool = True):
    """:func:`combination_covariance` and :func:`combination_block_variances` from one
    computation of the influence functions; the latter None without ``blocks`` or with
    clusters (the small-sample correction does not split those by block)."""
    if isinstance(influence, HolesInfluence):  # from per-block moments, no units x rows matrix
        coef = _holes_coefficients(design, influence, weights, omega)
        covariance = influence.combination_covariance(coef, design.clusters, design.n_clusters)
        parts = (influence.combination_block_variances(coef)
                 if blocks and design.clusters is None else None)
        return covariance, parts
    psi = _combination_psi(design, cells, stats, weights, omega, influence)
    parts = None
    if blocks and design.clusters is None:
        parts = np.add.reduceat(psi * psi, design.starts[:-1], axis=0)
    return _cross_products(design, psi), parts


def _cross_products(design, psi) -> np.ndarray:
    if design.clusters is not None:
        sums = np.zeros((design.n_clusters, psi.shape[1]))
        np.add.at(sums, design.clusters, psi)
        psi = sums
    return psi.T @ psi


def combination_block_variances(design, cells, stats, weights, omega, influence=None):
    """``sum_{i in block} psi_i**2`` (blocks x rows): each block's part of the variances.

    Their column sums are :func:`combination_variance` (unclustered); the small-sample
    correction weighs each block's part by ``n_b / (n_b - 1)``.
    """
    if isinstance(influence, HolesInfluence):
        return influence.combination_block_variances(
            _holes_coefficients(design, influence, weights, omega))
    psi = _combination_psi(design, cells, stats, weights, omega, influence)
    return np.add.reduceat(psi * psi, design.starts[:-1], axis=0)


def _sum_squares(design, psi):
    if design.clusters is None:
        return np.einsum("ij,ij->j", psi, psi)
    sums = np.zeros((design.n_clusters, psi.shape[1]))
    np.add.at(sums, design.clusters, psi)
    return np.einsum("ij,ij->j", sums, sums)


def combination_draws(design, boot, weights, omega) -> np.ndarray:
    """Bootstrap draws (draws x rows) of each linear combination."""
    k = design.n_cohorts
    weights = weights.tocsr()
    draws = np.empty((boot.n_draws, weights.shape[0]))
    kernels.combine_draws(boot.cells, weights.indptr.astype(np.int64),
                          weights.indices.astype(np.int64), weights.data.astype(np.float64),
                          draws)
    wif = boot.block_weights[:, :k] @ omega.T - np.outer(boot.total, _wif_constants(design, omega))
    return draws + wif / design.n_units


def cell_covariance(design, cells, stats, which: np.ndarray, influence=None) -> np.ndarray:
    """Analytic covariance ``sum_i psi_ci psi_di`` of the cells ``which``.

    Unclustered, except on panels with holes and cross-sections with clusters, where it is
    the covariance of the cluster sums of ``psi``, as R ``did`` 2.5.1 forms the ``V`` of its
    Wald pre-test (and of its standard errors) there.

    On the generic route (``influence`` given) it is ``psi.T @ psi`` block by block. Else it
    uses per-block Gram matrices of ``(y_i, 1)`` weighted by ``w_i**2``, so the cost is
    O(units x times**2) once plus O(1) per pair of cells.
    """
    if influence is not None:
        if design.n_clusters and design.holes is not None:  # R clusters its V: as the SEs
            sums = influence.cluster_psi(design.clusters, design.n_clusters)[:, which]
            return sums.T @ sums
        return influence.covariance(which)
    z = np.concatenate([design.y, np.ones((design.n_units, 1))], axis=1)
    zw = z * design.w[:, None]
    n_blocks = design.starts.size - 1
    gram = np.empty((n_blocks, z.shape[1], z.shape[1]))
    for b in range(n_blocks):
        lo, hi = design.starts[b], design.starts[b + 1]
        gram[b] = zw[lo:hi].T @ zw[lo:hi]
    suffix = np.ascontiguousarray(np.cumsum(gram[::-1], axis=0)[::-1])
    return kernels.pretest_covariance(
        gram, suffix, cells.k[which], cells.t[which], cells.b[which], cells.cs[which],
        stats["mu1"][which], stats["mu0"][which], stats["w1"][which], stats["w0"][which],
    )
