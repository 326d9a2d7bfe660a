"""The numba kernels of the holes route (:mod:`.influence`): the cells' pairwise
variances from per-block Gram matrices, the Gram matrices and multiplier sums read from the
rows, the Rademacher sums from random bits, the cells' draws from the sums and the
aggregations' coefficients. Each takes plain arrays; the layout is the holes module's
(features ``P = 2T + 2`` per unit: ``w y`` and ``w`` at each time, ``w``, ``1``)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__: list[str] = []

@njit(cache=True)
def _bilinear(idx_u, val_u, idx_v, val_v, gram):
    out = 0.0
    for a in range(4):
        if val_u[a] == 0.0:
            continue
        row = gram[idx_u[a]]
        acc = 0.0
        for b in range(4):
            acc += val_v[b] * row[idx_v[b]]
        out += val_u[a] * acc
    return out


@njit(cache=True)
def _pair(c, d, k, cs, ref, idx, tau, kappa, gram, suffix):
    """``sum_j coef_cj' G_j coef_dj`` over the blocks where both cells have coefficients."""
    if ref[c] == 1 or ref[d] == 1:
        return 0.0
    kc, kd = k[c], k[d]
    out = 0.0
    # block kc: cell c treated
    if kc == kd:
        out += _bilinear(idx[c], tau[c], idx[d], tau[d], gram[kc])
    elif kc >= cs[d]:
        out += _bilinear(idx[c], tau[c], idx[d], kappa[d], gram[kc])
    # block kd (another block): cell d treated
    if kd != kc and kd >= cs[c]:
        out += _bilinear(idx[c], kappa[c], idx[d], tau[d], gram[kd])
    # blocks where both are controls
    m = max(cs[c], cs[d])
    if m < gram.shape[0]:
        out += _bilinear(idx[c], kappa[c], idx[d], kappa[d], suffix[m])
        if kc >= m:
            out -= _bilinear(idx[c], kappa[c], idx[d], kappa[d], gram[kc])
        if kd >= m and kd != kc:
            out -= _bilinear(idx[c], kappa[c], idx[d], kappa[d], gram[kd])
    return out


@njit(cache=True, parallel=True)
def _pair_matrix(which, k, cs, ref, idx, tau, kappa, gram, suffix):
    n = which.size
    out = np.empty((n, n))
    for a in prange(n):
        for b in range(a, n):
            v = _pair(which[a], which[b], k, cs, ref, idx, tau, kappa, gram, suffix)
            out[a, b] = v
            out[b, a] = v
    return out


@njit(cache=True, parallel=True)
def _pair_diagonal(k, cs, ref, idx, tau, kappa, gram, suffix):
    n = k.size
    out = np.empty(n)
    for c in prange(n):
        out[c] = _pair(c, c, k, cs, ref, idx, tau, kappa, gram, suffix)
    return out


@njit(cache=True)
def _sparse_gram(unit_start, time, wy, w_unit, block, n_blocks, n_t):
    """Per-block Gram matrices of the features, unit by unit from the rows (few rows per
    unit: cross-sections and sparse panels)."""
    p = 2 * n_t + 2
    gram = np.zeros((n_blocks, p, p))
    n_units = unit_start.size - 1
    idx = np.empty(2 * n_t + 2, dtype=np.int64)
    val = np.empty(2 * n_t + 2)
    for i in range(n_units):
        m = 0
        for r in range(unit_start[i], unit_start[i + 1]):
            idx[m] = time[r]
            val[m] = wy[r]
            idx[m + 1] = n_t + time[r]
            val[m + 1] = w_unit[i]
            m += 2
        idx[m] = 2 * n_t
        val[m] = w_unit[i]
        idx[m + 1] = 2 * n_t + 1
        val[m + 1] = 1.0
        m += 2
        g = gram[block[i]]
        for a in range(m):
            for b in range(m):
                g[idx[a], idx[b]] += val[a] * val[b]
    return gram


@njit(cache=True, parallel=True)
def _sparse_sums(weights, unit_start, time, wy, w_unit, block, n_blocks, n_t):
    """``sum_i U_di z_i`` per draw and block (draws x blocks x P) from the rows."""
    n_draws = weights.shape[0]
    p = 2 * n_t + 2
    out = np.zeros((n_draws, n_blocks, p))
    n_units = unit_start.size - 1
    for d in prange(n_draws):
        s = out[d]
        u = weights[d]
        for i in range(n_units):
            ui = u[i]
            j = block[i]
            wi = w_unit[i]
            for r in range(unit_start[i], unit_start[i + 1]):
                s[j, time[r]] += ui * wy[r]
                s[j, n_t + time[r]] += ui * wi
            s[j, 2 * n_t] += ui * wi
            s[j, 2 * n_t + 1] += ui
    return out


_LANES = 64  # draws per pass over the rows: one random word per 64 units and draw
_ONE = np.uint64(0x3FF0000000000000)  # the bits of 1.0; with the sign bit set, -1.0


@njit(cache=True)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True)
def _sum_of_signs(raw, base, lo, hi):
    """``sum_{lo <= i < hi} (1 - 2 bit_i)`` of the bits laid out from word ``base`` on."""
    ones = 0
    for wd in range(lo // 64, (hi - 1) // 64 + 1):
        word = raw[base + wd]
        if wd == lo // 64 and lo % 64:
            word &= ~np.uint64(0) << np.uint64(lo % 64)
        if wd == (hi - 1) // 64 and hi % 64:
            word &= (np.uint64(1) << np.uint64(hi % 64)) - np.uint64(1)
        ones += _popcount(word)
    return float(hi - lo - 2 * ones)


@njit(cache=True, parallel=True)
def _rademacher_sums(raw, n_draws, unit_start, time, wy, w_unit, weighted, starts, n_t, out):
    """:func:`_sparse_sums` with Rademacher weights read from random words as
    :func:`~didmem.inference.kernels.rademacher_from_raw` lays them out (the same draws,
    never held as a draws x units matrix).

    The rows are read once per 64 draws, not once per draw: a block's sums for 64 draws
    are kept as times x 64 accumulators (the draws in the fast axis, so the updates are
    vector operations), and the 64 draws' words of 64 consecutive units are read once.
    Each sum adds the same terms in the same (unit, row) order as one draw at a time.
    Unweighted (every ``w_unit`` 1), the sums of the weights are sums of signs: exact
    integers, so the per-time ones need no product and the block totals come from bit
    counts. Writes rows ``:n_draws`` of ``out`` (draws x blocks x P) and returns them.
    """
    n_blocks = starts.size - 1
    words = (unit_start.size - 1 + 63) // 64
    for c in prange((n_draws + _LANES - 1) // _LANES):
        d0 = c * _LANES
        m = min(_LANES, n_draws - d0)
        word = np.zeros(_LANES, dtype=np.uint64)
        bits = np.empty(_LANES, dtype=np.uint64)
        u = bits.view(np.float64)  # +-1.0, built from the sign bit
        acc_y = np.empty((n_t, _LANES))
        acc_w = np.empty((n_t, _LANES))
        tot_w = np.empty(_LANES)
        tot_1 = np.empty(_LANES)
        for j in range(n_blocks):
            acc_y[:] = 0.0
            acc_w[:] = 0.0
            tot_w[:] = 0.0
            tot_1[:] = 0.0
            for i in range(starts[j], starts[j + 1]):
                b = i % 64
                if b == 0 or i == starts[j]:
                    base = d0 * words + i // 64
                    for d in range(m):
                        word[d] = raw[base + d * words]
                shift = np.uint64(b)
                for d in range(_LANES):
                    bits[d] = _ONE | (((word[d] >> shift) & np.uint64(1)) << np.uint64(63))
                wi = w_unit[i]
                for r in range(unit_start[i], unit_start[i + 1]):
                    x = wy[r]
                    ay = acc_y[time[r]]
                    aw = acc_w[time[r]]
                    if weighted:
                        for d in range(_LANES):
                            ay[d] += u[d] * x
                            aw[d] += u[d] * wi
                    else:
                        for d in range(_LANES):
                            ay[d] += u[d] * x
                            aw[d] += u[d]
                if weighted:
                    for d in range(_LANES):
                        tot_w[d] += u[d] * wi
                        tot_1[d] += u[d]
            if not weighted:
                for d in range(m):
                    tot_1[d] = _sum_of_signs(raw, (d0 + d) * words, starts[j], starts[j + 1])
                    tot_w[d] = tot_1[d]
            for d in range(m):
                o = out[d0 + d, j]
                for t in range(n_t):
                    o[t] = acc_y[t, d]
                    o[n_t + t] = acc_w[t, d]
                o[2 * n_t] = tot_w[d]
                o[2 * n_t + 1] = tot_1[d]
    return out[:n_draws]


@njit(cache=True, parallel=True)
def _cell_draws(sums, k, cs, ref, idx, tau, kappa, out, row0):
    """Each cell's draw from the grouped feature sums (draws x blocks x P)."""
    n_draws, n_blocks, p = sums.shape
    for d in prange(n_draws):
        suffix = np.zeros((n_blocks + 1, p))
        for j in range(n_blocks - 1, -1, -1):
            for q in range(p):
                suffix[j, q] = suffix[j + 1, q] + sums[d, j, q]
        for c in range(k.size):
            if ref[c] == 1:
                out[row0 + d, c] = 0.0
                continue
            kc = k[c]
            v = 0.0
            for a in range(4):
                q = idx[c, a]
                ctrl = suffix[cs[c], q]
                if kc >= cs[c]:
                    ctrl -= sums[d, kc, q]
                v += tau[c, a] * sums[d, kc, q] + kappa[c, a] * ctrl
            out[row0 + d, c] = v


@njit(cache=True)
def _combination_coefficients(indptr, indices, data, n_keys, k, cs, ref, idx, tau, kappa,
                              n_blocks, p):
    """Coefficients (keys x blocks x P) of the linear combinations of cells (CSC columns)."""
    own = np.zeros((n_keys, n_blocks, p))
    ctrl = np.zeros((n_keys, n_blocks + 1, p))
    for c in range(k.size):
        if ref[c] == 1:
            continue
        for nz in range(indptr[c], indptr[c + 1]):
            key = indices[nz]
            v = data[nz]
            for a in range(4):
                q = idx[c, a]
                own[key, k[c], q] += v * tau[c, a]
                ctrl[key, cs[c], q] += v * kappa[c, a]
                if k[c] >= cs[c]:
                    own[key, k[c], q] -= v * kappa[c, a]
    for key in range(n_keys):
        for j in range(1, n_blocks):
            for q in range(p):
                ctrl[key, j, q] += ctrl[key, j - 1, q]
        for j in range(n_blocks):
            for q in range(p):
                own[key, j, q] += ctrl[key, j, q]
    return own
