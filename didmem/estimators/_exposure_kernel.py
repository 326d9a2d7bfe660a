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
the ordinary cell (``psi`` as in :mod:`didmem.inference.kernels`). ``psi`` is written into
the block-wise layout of :class:`~didmem.inference.influence.CellInfluence`.
:func:`exposure_cells_numpy` is the plain-numpy twin (the test oracle).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["exposure_cells_kernel", "exposure_cells_numpy"]


@njit(cache=True, parallel=True)
def exposure_cells_kernel(y, w, starts, hist, n_hist, cell_k, cell_t, cell_b, cell_cs,
                          cell_ref, pos, offsets, flat, hist_mu0, hist_w0, var_treated,
                          var_control, store):
    """ATT, statistics and influence functions of every cell (see the module notes).

    Returns ``att, mu1, mu0, w1, w0, n_control, missing``: ``mu0`` is the treated-weighted
    mean of the histories' control means, ``w0`` and ``n_control`` the weight and number
    of the history-matched controls, ``missing`` the number of the cell's treated histories
    without a control (the cell's estimate is then NaN). Each treated history's control
    mean and weight are written to ``hist_mu0[c, h]`` and ``hist_w0[c, h]`` (cells x
    histories), which the grouped-sum bootstrap reads; the sums of the squared influence
    values of the treated and of the controls to ``var_treated[c]`` and ``var_control[c]``.
    The influence values themselves are written to ``flat`` only when ``store`` is True.
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
                    hist_mu0[c, h] = s0h[h]
                    hist_w0[c, h] = w0h[h]
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
        vt = 0.0
        for i in range(lo, hi):
            d = y[i, t] - y[i, b]
            psi = w[i] * (d - s0h[hist[i]] - tau) / sw1
            vt += psi * psi
            if store:
                flat[base + i - lo] = psi
        vc = 0.0
        for j in range(cs, n_blocks):
            if j == k:
                continue
            nj = starts[j + 1] - starts[j]
            base = offsets[j] + pos[c, j] * nj
            for i in range(starts[j], starts[j + 1]):
                h = hist[i]
                if w1h[h] > 0.0:
                    d = y[i, t] - y[i, b]
                    psi = -(w1h[h] / sw1) * w[i] * (d - s0h[h]) / w0h[h]
                    vc += psi * psi
                    if store:
                        flat[base + i - starts[j]] = psi
        var_treated[c] = vt
        var_control[c] = vc
    return att, mu1, mu0, w1, w0, n_control, missing


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


@njit(cache=True)
def group_weight_sums(weights, w, group_starts, out):
    """``out[r, g] = sum_{i in group g} weights[r, i] w_i`` (rows sorted by group)."""
    for r in range(weights.shape[0]):
        for g in range(group_starts.size - 1):
            s = 0.0
            for i in range(group_starts[g], group_starts[g + 1]):
                s += weights[r, i] * w[i]
            out[r, g] = s


@njit(cache=True, parallel=True)
def exposure_draws(block_sums, group_w, control_sums, control_suffix, group_start_of_block,
                   group_hist, control_of_group, next_control, cell_k, cell_t, cell_b,
                   cell_cs, cell_ref, att, w1, mu0h, w0h, w1h, out, row0):
    """Bootstrap draws of every cell from grouped sums (:class:`ExposureInfluence`).

    Groups are the (block, history) pairs, ordered by block. ``block_sums[r, j]`` holds
    ``sum_i U_ri w_i y_i`` over the times of block ``j``, then ``sum_i U_ri w_i`` and
    ``sum_i U_ri``; ``group_w[r, g]`` is ``sum_i U_ri w_i`` over group ``g``;
    ``control_sums[q, r]`` the ``w y`` and ``w`` sums of control group ``q`` (a group of a
    block that is a control of some cell, ``control_of_group[g]``, -1 for others) and
    ``control_suffix[q, r]`` their sum over the history's control groups of this and later
    blocks; ``next_control[h, j]`` is the first control group of history ``h`` in a block
    ``>= j`` (-1 when none). Draw ``r`` of cell ``c`` is ``sum_i U_ri psi_ci``, the
    treated part ``sum_h (S_h(w d) - mu0_h S_h(w)) - tau S(w)`` over ``W1`` and, for each
    treated history, ``-(W1_h / W1) (C_h(w d) - mu0_h C_h(w)) / W0_h`` over its controls.
    """
    n_draws = block_sums.shape[0]
    n_time = block_sums.shape[2] - 2
    for c in prange(cell_k.size):  # one cell at a time: a control group's draws lie together
        if cell_ref[c] == 1:
            for r in range(n_draws):
                out[row0 + r, c] = 0.0
            continue
        k, t, b, cs = cell_k[c], cell_t[c], cell_b[c], cell_cs[c]
        acc = np.empty(n_draws)
        for r in range(n_draws):
            own = block_sums[r, k]
            acc[r] = own[t] - own[b] - att[c] * own[n_time]
        for g in range(group_start_of_block[k], group_start_of_block[k + 1]):
            h = group_hist[g]
            if w1h[k, h] <= 0.0:
                continue
            m0 = mu0h[c, h]
            coef = w1h[k, h] / w0h[c, h]
            q = next_control[h, cs]
            mine = control_of_group[g] if k >= cs else -1  # no control of itself
            for r in range(n_draws):
                cwd = 0.0
                cw = 0.0
                if q >= 0:
                    cwd = control_suffix[q, r, t] - control_suffix[q, r, b]
                    cw = control_suffix[q, r, n_time]
                if mine >= 0:
                    cwd -= control_sums[mine, r, t] - control_sums[mine, r, b]
                    cw -= control_sums[mine, r, n_time]
                acc[r] -= m0 * group_w[r, g] + coef * (cwd - m0 * cw)
        for r in range(n_draws):
            out[row0 + r, c] = acc[r] / w1[c]


@njit(cache=True, parallel=True)
def never_control_draws(block_sums, v, g, cell_k, cell_t, cell_b, cell_ref, att, w1, out,
                        row0):
    """The draws of :meth:`ExposureInfluence._never_draws` from its products: ``out[row0 +
    r, c] = (S_k(w d) - tau S_k(w) - g[r, c] - (v[r, k, t] - v[r, k, b])) / W1``."""
    n_time = block_sums.shape[2] - 2
    for r in prange(block_sums.shape[0]):
        for c in range(cell_k.size):
            if cell_ref[c] == 1:
                out[row0 + r, c] = 0.0
                continue
            k, t, b = cell_k[c], cell_t[c], cell_b[c]
            own = block_sums[r, k]
            ctl = v[r, k]
            out[row0 + r, c] = (own[t] - own[b] - att[c] * own[n_time] - g[r, c]
                                - (ctl[t] - ctl[b])) / w1[c]
