"""Inference for linear combinations of cells (aggregations, the pre-test).

An aggregation's influence function is ``sum_c L[key, c] psi_c`` plus, for estimated
cohort-share weights, ``(omega[key, g(i)] w_i - Omega[key]) / n`` with
``Omega = sum_g omega[key, g] pg_g``. Its analytic covariance is the fit's route's
(:meth:`~didmem.inference.influence.CellInfluence.combination_moments`); its bootstrap
draws follow from the cells' draws and the grouped weight sums of the same bootstrap, so
cells and aggregations share one set of draws.

The functions taking ``(design, cells, stats, ..., influence=None)`` ask ``influence``, by
default the balanced route's :class:`~didmem.inference.grouped.GroupedInfluence` of
``(design, cells, stats)``.
"""

from __future__ import annotations

import numpy as np


__all__ = ["combination_variance", "combination_covariance", "combination_draws",
           "combine_draws", "aggregate_coefficients",
           "cell_covariance", "combination_block_variances", "combination_moments"]


def _influence(prepared, cells, stats, influence):
    if influence is not None:
        return influence
    from .grouped import GroupedInfluence

    return GroupedInfluence(prepared, cells, stats)


def combination_moments(prepared, cells, stats, weights, omega, influence=None, *,
                        blocks: bool = True):
    """``psi' psi`` (rows x rows; of cluster sums with clusters) of the linear combinations
    ``weights`` / ``omega`` and each block's part of its diagonal (None without ``blocks``
    or with clusters: the small-sample correction does not split those by block)."""
    return _influence(prepared, cells, stats, influence).combination_moments(
        weights, omega, blocks=blocks)


def combination_covariance(prepared, cells, stats, weights, omega, influence=None) -> np.ndarray:
    """``psi' psi`` (rows x rows) of the linear combinations; with clusters, of cluster sums.
    Divided by nothing: like the variances, it is on the scale of ``sum_i psi_i``."""
    return combination_moments(prepared, cells, stats, weights, omega, influence,
                               blocks=False)[0]


def combination_variance(prepared, cells, stats, weights, omega, influence=None) -> np.ndarray:
    """``sum_i psi_i**2`` (or of cluster sums) for every row of ``weights`` / ``omega``."""
    return np.diag(combination_covariance(prepared, cells, stats, weights, omega,
                                          influence)).copy()


def combination_block_variances(prepared, cells, stats, weights, omega, influence=None):
    """``sum_{i in block} psi_i**2`` (blocks x rows): each block's part of the variances
    (unclustered); the small-sample correction weighs it by ``n_b / (n_b - 1)``."""
    return combination_moments(prepared, cells, stats, weights, omega, influence)[1]


def combination_draws(prepared, boot, weights, omega) -> np.ndarray:
    """Bootstrap draws (draws x rows) of each linear combination."""
    k = prepared.n_cohorts
    draws = combine_draws(boot.cells, weights)
    wif = (boot.block_weights[:, :k] @ omega.T
           - np.outer(boot.total, omega @ prepared.cohort_shares))
    return draws + wif / prepared.n_units


def cell_covariance(prepared, cells, stats, which: np.ndarray, influence=None) -> np.ndarray:
    """Analytic covariance ``sum_i psi_ci psi_di`` of the cells ``which``, as R ``did``'s
    Wald pre-test forms it (:meth:`~didmem.inference.influence.CellInfluence.
    pretest_covariance`)."""
    return _influence(prepared, cells, stats, influence).pretest_covariance(which)


#: draws per sparse product of :func:`combine_draws` (bounds its copy: this x cells)
_COMBINE_ROWS = 128


def combine_draws(draws: np.ndarray, weights) -> np.ndarray:
    """``draws @ weights.T`` (draws x keys) for a sparse ``weights`` (keys x cells): the
    sparse product a block of draws at a time, each key's entries summed in their order
    (as :func:`~didmem.inference.kernels.combine_draws`)."""
    weights = weights.tocsr()
    weights = weights.astype(np.float64) if weights.dtype != np.float64 else weights
    out = np.empty((draws.shape[0], weights.shape[0]))
    for r0 in range(0, draws.shape[0], _COMBINE_ROWS):
        block = np.ascontiguousarray(draws[r0:r0 + _COMBINE_ROWS].T)
        out[r0:r0 + _COMBINE_ROWS] = (weights @ block).T
    return out


def aggregate_coefficients(cell_k, cell_t, cell_b, cell_cs, cell_ref, mu1, mu0, w1, w0,
                           indptr, keys, coefs, n_keys: int, n_blocks: int, n_time: int):
    """Per-block coefficients of linear combinations of cells, in numpy: the numbers of
    :func:`~didmem.inference.kernels.aggregate_coefficients` (the same additions in the same
    order, one ``np.add.at`` per array), without loading numba.

    Column ``c`` of a CSC matrix (``indptr``, ``keys``, ``coefs``) lists the keys that cell
    ``c`` enters and with what coefficient. A cell's influence function on a unit of block
    ``j`` is ``w_i (y_i . a_j + beta_j)``: returns ``a`` (blocks x times x keys) and
    ``beta`` (blocks x keys), summed over the cells.
    """
    a = np.zeros((n_blocks, n_time, n_keys))
    beta = np.zeros((n_blocks, n_keys))
    cell = np.repeat(np.arange(cell_k.size), np.diff(indptr))
    live = cell_ref[cell] != 1
    cell, key, coef = cell[live], np.asarray(keys)[live], np.asarray(coefs)[live]
    if cell.size == 0:
        return a, beta
    k, t, b, cs = cell_k[cell], cell_t[cell], cell_b[cell], cell_cs[cell]
    f1, f0 = coef / w1[cell], coef / w0[cell]
    has_b = (b >= 0).astype(np.int64)
    own_in = (k >= cs) & (k < n_blocks)  # the own block lies in the controls' range
    n_ctrl = n_blocks - cs - own_in
    # a: per entry (k, t), (k, b), then per control block j ascending (j, t), (j, b)
    per = 1 + has_b
    size = per * (1 + n_ctrl)
    entry = np.repeat(np.arange(cell.size), size)
    pos = np.arange(entry.size) - np.repeat(np.cumsum(size) - size, size)
    pe = per[entry]
    ctrl_pos = pos - pe
    is_own = ctrl_pos < 0
    slot = np.where(is_own, pos, ctrl_pos % pe)  # 0: the time, 1: the base
    j = cs[entry] + np.where(is_own, 0, ctrl_pos // pe)
    j = np.where(is_own, k[entry], j + (own_in[entry] & (j >= k[entry])))
    time_ = np.where(slot == 0, t[entry], b[entry])
    sign = np.where(slot == 0, 1.0, -1.0) * np.where(is_own, 1.0, -1.0)
    value = sign * np.where(is_own, f1[entry], f0[entry])
    np.add.at(a.reshape(-1), (j * n_time + time_) * n_keys + key[entry], value)
    # beta: per entry k, then every control block j ascending
    size = 1 + n_ctrl
    entry = np.repeat(np.arange(cell.size), size)
    pos = np.arange(entry.size) - np.repeat(np.cumsum(size) - size, size)
    is_own = pos == 0
    j = cs[entry] + pos - 1
    j = np.where(is_own, k[entry], j + (own_in[entry] & (j >= k[entry])))
    value = np.where(is_own, -(f1 * mu1[cell])[entry], (f0 * mu0[cell])[entry])
    np.add.at(beta.reshape(-1), j * n_keys + key[entry], value)
    return a, beta
