"""The cells of the k-th exposure with history-matched controls, and their influence functions.

Units are in the design's block order (blocks: the k-th exposure's cohorts, then the units
without a k-th exposure in the panel); ``hist`` gives each row's history code (its earlier
exposure cohorts). A cell ``(g, t)`` with base ``b`` pools the histories of cohort ``g``'s
units: with ``d_i = y_it - y_ib``, ``mu0_h`` the weighted mean change of the cell's candidate
controls (blocks ``cs ..``, less the cell's own) *with history h*, ``W1_h`` the treated
weight in history ``h`` and ``W1`` its total,

    tau = sum_{i treated} w_i (d_i - mu0_{h(i)}) / W1
    psi_i = w_i (d_i - mu0_{h(i)} - tau) / W1                 (treated)
    psi_i = -(W1_h / W1) w_i (d_i - mu0_h) / W0_h              (control of history h)

and 0 for candidate controls of histories without treated units. With one history this is
the ordinary cell (``psi`` as in :mod:`didmem.inference.kernels`). With ``store``, ``psi`` is
written into the block-wise layout of :class:`~didmem.inference.influence.StoredInfluence`;
without, only its sums of squares (the cells' variances and their treated parts) are kept.
:func:`exposure_cells_numpy` is the plain-numpy twin (the test oracle).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["exposure_cells_kernel", "exposure_cells_numpy"]


@njit(cache=True, parallel=True)
def exposure_cells_kernel(y, w, starts, hist, n_hist, cell_k, cell_t, cell_b, cell_cs,
                          cell_ref, pos, offsets, flat, store):
    """ATT, statistics and influence functions of every cell (see the module notes).

    Returns ``att, mu1, mu0, w1, w0, n_control, missing, var, treated_var``: ``mu0`` is the
    treated-weighted mean of the histories' control means, ``w0`` and ``n_control`` the
    weight and number of the history-matched controls, ``missing`` the number of the
    cell's treated histories without a control (the cell's estimate is then NaN), ``var``
    ``sum_i psi_i**2`` and ``treated_var`` its treated cohort's part. ``psi`` goes to
    ``flat`` only when ``store`` is true.
    """
    n_cells = cell_k.size
    n_blocks = starts.size - 1
    att = np.zeros(n_cells)
    mu1 = np.zeros(n_cells)
    mu0 = np.zeros(n_cells)
    w1 = np.zeros(n_cells)
    w0 = np.zeros(n_cells)
    n_control = np.zeros(n_cells, dtype=np.int64)
    missing = np.zeros(n_cells, dtype=np.int64)
    var = np.zeros(n_cells)
    treated_var = np.zeros(n_cells)
    for c in prange(n_cells):
        if cell_ref[c] == 1:
            continue
        k, t, b, cs = cell_k[c], cell_t[c], cell_b[c], cell_cs[c]
        w1h = np.zeros(n_hist)
        w0h = np.zeros(n_hist)
        s0h = np.zeros(n_hist)
        lo, hi = starts[k], starts[k + 1]
        sw1 = 0.0
        swd1 = 0.0
        for i in range(lo, hi):
            w1h[hist[i]] += w[i]
            sw1 += w[i]
            swd1 += w[i] * (y[i, t] - y[i, b])
        m = 0
        for j in range(cs, n_blocks):
            if j == k:
                continue
            for i in range(starts[j], starts[j + 1]):
                h = hist[i]
                if w1h[h] > 0.0:
                    w0h[h] += w[i]
                    s0h[h] += w[i] * (y[i, t] - y[i, b])
                    m += 1
        bad = 0
        pooled = 0.0
        sw0 = 0.0
        for h in range(n_hist):
            if w1h[h] > 0.0:
                if w0h[h] > 0.0:
                    s0h[h] = s0h[h] / w0h[h]  # now the history's control mean
                    pooled += w1h[h] * s0h[h]
                    sw0 += w0h[h]
                else:
                    bad += 1
        w1[c] = sw1
        w0[c] = sw0
        n_control[c] = m
        if bad:
            missing[c] = bad
            att[c] = np.nan
            continue
        mu1[c] = swd1 / sw1
        mu0[c] = pooled / sw1
        tau = mu1[c] - mu0[c]
        att[c] = tau
        base = offsets[k] + pos[c, k] * (hi - lo)
        sq = 0.0
        for i in range(lo, hi):
            d = y[i, t] - y[i, b]
            p = w[i] * (d - s0h[hist[i]] - tau) / sw1
            sq += p * p
            if store:
                flat[base + i - lo] = p
        treated_var[c] = sq
        for j in range(cs, n_blocks):
            if j == k:
                continue
            nj = starts[j + 1] - starts[j]
            base = offsets[j] + pos[c, j] * nj
            for i in range(starts[j], starts[j + 1]):
                h = hist[i]
                if w1h[h] > 0.0:
                    d = y[i, t] - y[i, b]
                    p = -(w1h[h] / sw1) * w[i] * (d - s0h[h]) / w0h[h]
                    sq += p * p
                    if store:
                        flat[base + i - starts[j]] = p
        var[c] = sq
    return att, mu1, mu0, w1, w0, n_control, missing, var, treated_var


def exposure_cells_numpy(y, w, starts, hist, cells):
    """Plain-numpy twin: ``att`` and the dense units x cells ``psi`` (reference cells 0)."""
    n, n_cells = y.shape[0], cells.k.size
    block = np.repeat(np.arange(starts.size - 1), np.diff(starts))
    att = np.zeros(n_cells)
    psi = np.zeros((n, n_cells))
    for c in range(n_cells):
        if cells.ref[c]:
            continue
        k, t, b, cs = cells.k[c], cells.t[c], cells.b[c], cells.cs[c]
        d = y[:, t] - y[:, b]
        treated = block == k
        candidates = (block >= cs) & ~treated
        w1 = w[treated].sum()
        terms = np.zeros(n)
        for h in np.unique(hist[treated]):
            ctrl = candidates & (hist == h)
            mu0 = np.average(d[ctrl], weights=w[ctrl])
            mine = treated & (hist == h)
            terms[mine] = d[mine] - mu0
            w1h = w[mine].sum()
            psi[ctrl, c] = -(w1h / w1) * w[ctrl] * (d[ctrl] - mu0) / w[ctrl].sum()
        att[c] = np.sum(w[treated] * terms[treated]) / w1
        psi[treated, c] = w[treated] * (terms[treated] - att[c]) / w1
    return att, psi
