"""The sums behind linear combinations of cells, in numpy (no numba to load).

:func:`aggregate_coefficients` gives every block's coefficients of the combinations'
influence functions, :func:`combine_draws` their bootstrap draws from the cells' draws. They
compute the numbers of their numba twins (:func:`didmem.inference.kernels.aggregate_coefficients`
and :func:`~didmem.inference.kernels.combine_draws`, tested against them in
``tests/test_kernels.py``), so that a fit and its aggregations load no numba kernel.
"""

from __future__ import annotations

import numpy as np

__all__ = ["aggregate_coefficients", "combine_draws"]
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
    """Per-block coefficients of linear combinations of cells: the numbers of
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
