"""Plain-numpy twins of the numba kernels, used as test oracles.

They build the dense units x cells influence-function matrix that the fast path never
forms, so they are meant for small panels only.
"""

from __future__ import annotations

import numpy as np

from .kernels import MAMMEN_HIGH, MAMMEN_LOW, MAMMEN_P_LOW

__all__ = [
    "rademacher_from_raw",
    "mammen_from_uniform",
    "influence_matrix",
    "cell_statistics",
    "type1_quantiles",
    "sup_t_statistics",
]


def rademacher_from_raw(raw, n_rows, n_cols):
    """Twin of :func:`didmem.inference.kernels.rademacher_from_raw`."""
    words = (n_cols + 63) // 64
    bits = np.unpackbits(
        np.ascontiguousarray(raw[: n_rows * words]).astype("<u8").view(np.uint8), bitorder="little"
    )
    bits = bits.reshape(n_rows, words * 64)[:, :n_cols]
    return 1.0 - 2.0 * bits.astype(np.float64)


def mammen_from_uniform(u):
    """Twin of :func:`didmem.inference.kernels.mammen_from_uniform`."""
    return np.where(u < MAMMEN_P_LOW, MAMMEN_LOW, MAMMEN_HIGH)


def _members(starts, k, cs):
    n_blocks = starts.size - 1
    rows = np.arange(starts[-1])
    block = np.searchsorted(starts, rows, side="right") - 1
    treated = block == k
    control = (block >= cs) & (block != k) & (block < n_blocks)
    return treated, control


def influence_matrix(y, w, starts, cell_k, cell_t, cell_b, cell_cs, cell_ref):
    """Dense influence functions, one column per cell, and the cells' estimates.

    Returns
    -------
    psi : ndarray (rows x cells)
    att : ndarray (cells,)
    """
    n = y.shape[0]
    psi = np.zeros((n, cell_k.size))
    att = np.zeros(cell_k.size)
    for c in range(cell_k.size):
        if cell_ref[c]:
            continue
        d = y[:, cell_t[c]] - (y[:, cell_b[c]] if cell_b[c] >= 0 else 0.0)
        treated, control = _members(starts, cell_k[c], cell_cs[c])
        m1 = np.average(d[treated], weights=w[treated])
        m0 = np.average(d[control], weights=w[control])
        att[c] = m1 - m0
        psi[treated, c] = w[treated] * (d[treated] - m1) / w[treated].sum()
        psi[control, c] = -w[control] * (d[control] - m0) / w[control].sum()
    return psi, att


def cell_statistics(y, w, starts, cell_k, cell_t, cell_b, cell_cs, cell_ref, clusters=None):
    """Estimates and analytic variances (``sum psi**2``, or of cluster sums)."""
    psi, att = influence_matrix(y, w, starts, cell_k, cell_t, cell_b, cell_cs, cell_ref)
    if clusters is None:
        var = (psi**2).sum(axis=0)
    else:
        sums = np.zeros((clusters.max() + 1, psi.shape[1]))
        np.add.at(sums, clusters, psi)
        var = (sums**2).sum(axis=0)
    return att, var


def type1_quantiles(draws, probs):
    """Twin of :func:`didmem.inference.kernels.type1_quantiles` via numpy's inverted CDF."""
    return np.quantile(draws, probs, axis=0, method="inverted_cdf")


def sup_t_statistics(draws, sigma, keep):
    """Twin of :func:`didmem.inference.bands.sup_t_statistics`."""
    return np.max(np.abs(draws[:, keep]) / sigma[keep], axis=1)
