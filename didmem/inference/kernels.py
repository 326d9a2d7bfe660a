"""Numba kernels of the estimation core.

Units are stored sorted by *block*: blocks ``0 .. K-1`` are the treated cohorts in ascending
order and block ``K`` holds the never-treated units; ``starts[k]:starts[k+1]`` are the rows
of block ``k``. A cell (one ATT(g, t)) is described by integer arrays:

``cell_k``
    block of the treated cohort;
``cell_t``, ``cell_b``
    index of the cell's time and of its base time (``-1``: no base, the outcome in levels);
``cell_cs``
    first treated block that is a control; the controls are blocks ``cell_cs .. K`` less the
    cell's own cohort (which lies in that range only for not-yet-treated pre-period cells);
``cell_ref``
    1 for a reference cell (universal base period): estimate 0, influence function 0.

For a cell with outcome change ``d_i = y_it - y_ib`` the influence function of unit ``i`` is

    psi_i = w_i (d_i - mu1) / W1        (treated units)
    psi_i = -w_i (d_i - mu0) / W0       (control units)

so that the analytic variance is ``sum_i psi_i**2`` and a bootstrap draw is
``sum_i U_i psi_i``. Each kernel has a plain-numpy twin in :mod:`didmem.inference.reference`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = [
    "rademacher_from_raw",
    "mammen_from_uniform",
    "cell_statistics",
    "cell_draws",
    "type1_quantiles",
    "aggregate_coefficients",
    "pretest_covariance",
]

MAMMEN_LOW = (1.0 - np.sqrt(5.0)) / 2.0
MAMMEN_HIGH = (1.0 + np.sqrt(5.0)) / 2.0
MAMMEN_P_LOW = (np.sqrt(5.0) + 1.0) / (2.0 * np.sqrt(5.0))


@njit(cache=True)
def rademacher_from_raw(raw, n_rows, n_cols):
    """Expand random 64-bit words into a ``n_rows x n_cols`` matrix of +-1.

    Bit ``j`` (least significant first) of word ``r * ceil(n_cols / 64) + j // 64`` gives
    entry ``(r, j)``: 0 -> +1, 1 -> -1.
    """
    words = (n_cols + 63) // 64
    out = np.empty((n_rows, n_cols))
    for r in range(n_rows):
        base = r * words
        for j in range(n_cols):
            bit = (raw[base + j // 64] >> np.uint64(j % 64)) & np.uint64(1)
            out[r, j] = 1.0 - 2.0 * np.float64(bit)
    return out


@njit(cache=True)
def mammen_from_uniform(u):
    """Mammen's two-point weights from uniforms: mean 0, variance 1, third moment 1."""
    out = np.empty_like(u)
    for r in range(u.shape[0]):
        for j in range(u.shape[1]):
            out[r, j] = MAMMEN_LOW if u[r, j] < MAMMEN_P_LOW else MAMMEN_HIGH
    return out


@njit(cache=True)
def _change(y, i, t, b):
    if b < 0:
        return y[i, t]
    return y[i, t] - y[i, b]


@njit(cache=True)
def _block_moments(y, w, lo, hi, t, b):
    sw = 0.0
    swd = 0.0
    for i in range(lo, hi):
        sw += w[i]
        swd += w[i] * _change(y, i, t, b)
    return sw, swd


@njit(cache=True)
def _control_blocks(k, cs, n_blocks):
    """Blocks ``cs .. n_blocks-1`` without the cell's own block ``k``."""
    out = np.empty(n_blocks - cs, dtype=np.int64)
    m = 0
    for j in range(cs, n_blocks):
        if j == k:
            continue
        out[m] = j
        m += 1
    return out[:m]


@njit(cache=True, parallel=True)
def cell_statistics(y, w, starts, cell_k, cell_t, cell_b, cell_cs, cell_ref,
                    clusters, n_clusters):
    """Estimate, analytic variance and the means each cell's influence function needs.

    Two passes over the cell's units (means first, then squares), so the variance is exact
    even when the outcome change is nearly constant.

    Returns
    -------
    att, var, mu1, mu0, w1, w0 : arrays of length n_cells
        ``var`` is ``sum_i psi_i**2``, or ``sum_c (sum_{i in c} psi_i)**2`` when
        ``n_clusters > 0`` (``clusters`` gives each row's cluster code).
    """
    n_cells = cell_k.size
    n_blocks = starts.size - 1
    att = np.zeros(n_cells)
    var = np.zeros(n_cells)
    mu1 = np.zeros(n_cells)
    mu0 = np.zeros(n_cells)
    w1 = np.zeros(n_cells)
    w0 = np.zeros(n_cells)
    for c in prange(n_cells):
        k = cell_k[c]
        t = cell_t[c]
        b = cell_b[c]
        ctrl = _control_blocks(k, cell_cs[c], n_blocks)
        sw1, swd1 = _block_moments(y, w, starts[k], starts[k + 1], t, b)
        sw0 = 0.0
        swd0 = 0.0
        for j in ctrl:
            a, d = _block_moments(y, w, starts[j], starts[j + 1], t, b)
            sw0 += a
            swd0 += d
        w1[c] = sw1
        w0[c] = sw0
        if cell_ref[c] == 1:
            continue
        m1 = swd1 / sw1
        m0 = swd0 / sw0
        mu1[c] = m1
        mu0[c] = m0
        att[c] = m1 - m0
        if n_clusters == 0:
            s = 0.0
            for i in range(starts[k], starts[k + 1]):
                p = w[i] * (_change(y, i, t, b) - m1) / sw1
                s += p * p
            for j in ctrl:
                for i in range(starts[j], starts[j + 1]):
                    p = w[i] * (_change(y, i, t, b) - m0) / sw0
                    s += p * p
            var[c] = s
        else:
            scratch = np.zeros(n_clusters)
            for i in range(starts[k], starts[k + 1]):
                scratch[clusters[i]] += w[i] * (_change(y, i, t, b) - m1) / sw1
            for j in ctrl:
                for i in range(starts[j], starts[j + 1]):
                    scratch[clusters[i]] -= w[i] * (_change(y, i, t, b) - m0) / sw0
            s = 0.0
            for g in range(n_clusters):
                s += scratch[g] * scratch[g]
            var[c] = s
    return att, var, mu1, mu0, w1, w0


@njit(cache=True, parallel=True)
def cell_draws(sums, suffix, cell_k, cell_t, cell_b, cell_cs, cell_ref,
               mu1, mu0, w1, w0, out, row0):
    """Bootstrap draws of every cell from grouped sums.

    ``sums[r, k, :]`` holds, for draw ``r`` and block ``k``, ``sum_i U_ri w_i y_i`` over the
    times followed by ``sum_i U_ri w_i`` (column ``T``); ``suffix[r, s]`` is the sum of
    ``sums[r, s:]`` over blocks. Draw ``r`` of cell ``c`` is ``sum_i U_ri psi_ci``; it is
    written to ``out[row0 + r, c]``.
    """
    n_draws = sums.shape[0]
    n_time = sums.shape[2] - 2
    for r in prange(n_draws):
        for c in range(cell_k.size):
            if cell_ref[c] == 1:
                out[row0 + r, c] = 0.0
                continue
            k = cell_k[c]
            t = cell_t[c]
            b = cell_b[c]
            cs = cell_cs[c]
            own = sums[r, k]
            ctrl = suffix[r, cs]
            tr = own[t] - mu1[c] * own[n_time]
            co = ctrl[t] - mu0[c] * ctrl[n_time]
            if b >= 0:
                tr -= own[b]
                co -= ctrl[b]
            if k >= cs:
                co -= own[t] - mu0[c] * own[n_time] - (own[b] if b >= 0 else 0.0)
            out[row0 + r, c] = tr / w1[c] - co / w0[c]


@njit(cache=True, parallel=True)
def combine_draws(draws, indptr, indices, data, out):
    """``out[r, key] = sum_j data[j] * draws[r, indices[j]]`` over ``j`` in
    ``indptr[key]:indptr[key + 1]``: the draws of linear combinations of cells (a CSR matrix
    of weights, keys x cells) from the cells' draws in their own layout (draws x cells), a
    draw per step of the parallel loop, the entries of a key in their order."""
    n_keys = indptr.size - 1
    for r in prange(draws.shape[0]):
        row = draws[r]
        for key in range(n_keys):
            s = 0.0
            for j in range(indptr[key], indptr[key + 1]):
                s += data[j] * row[indices[j]]
            out[r, key] = s


@njit(cache=True)
def _type1_index(n, p):
    """0-based order statistic of R's ``quantile(type = 1)`` at probability ``p``."""
    nppm = n * p
    j = np.floor(nppm + 4.0 * 2.220446049250313e-16)
    k = j + 1.0 if nppm > j else j
    if k < 1.0:
        k = 1.0
    if k > n:
        k = float(n)
    return int(k) - 1


@njit(cache=True, parallel=True)
def type1_quantiles(draws, probs):
    """Column-wise quantiles of type 1 (inverse of the empirical distribution function).

    Columns are processed in tiles that are copied out contiguously, then each column is
    partially sorted (selection) at the needed order statistics, highest first.
    """
    n, m = draws.shape
    n_q = probs.size
    out = np.empty((n_q, m))
    idx = np.empty(n_q, dtype=np.int64)
    for q in range(n_q):
        idx[q] = _type1_index(n, probs[q])
    order = np.argsort(-idx)
    tile = 32
    n_tiles = (m + tile - 1) // tile
    for tt in prange(n_tiles):
        c0 = tt * tile
        c1 = min(m, c0 + tile)
        buf = np.empty((c1 - c0, n))
        for r in range(n):
            for c in range(c0, c1):
                buf[c - c0, r] = draws[r, c]
        for c in range(c0, c1):
            col = buf[c - c0]
            hi = n
            for q in order:
                part = np.partition(col[:hi], idx[q])
                col[:hi] = part
                out[q, c] = col[idx[q]]
                hi = idx[q] + 1
    return out


@njit(cache=True)
def aggregate_coefficients(cell_k, cell_t, cell_b, cell_cs, cell_ref, mu1, mu0, w1, w0,
                           indptr, keys, coefs, n_keys, n_blocks, n_time):
    """Per-block coefficients of linear combinations of cells.

    Column ``c`` of a CSC matrix (``indptr``, ``keys``, ``coefs``) lists the keys that cell
    ``c`` enters and with what coefficient. A cell's influence function on a unit of block
    ``j`` is ``w_i (y_i . a_j + beta_j)``, so a linear combination of cells is too, with
    summed coefficients: returns ``a`` (blocks x times x keys) and ``beta`` (blocks x keys).
    """
    a = np.zeros((n_blocks, n_time, n_keys))
    beta = np.zeros((n_blocks, n_keys))
    for c in range(cell_k.size):
        if cell_ref[c] == 1:
            continue
        k = cell_k[c]
        t = cell_t[c]
        b = cell_b[c]
        ctrl = _control_blocks(k, cell_cs[c], n_blocks)
        for e in range(indptr[c], indptr[c + 1]):
            key = keys[e]
            f1 = coefs[e] / w1[c]
            f0 = coefs[e] / w0[c]
            a[k, t, key] += f1
            beta[k, key] -= f1 * mu1[c]
            if b >= 0:
                a[k, b, key] -= f1
            for j in ctrl:
                a[j, t, key] -= f0
                beta[j, key] += f0 * mu0[c]
                if b >= 0:
                    a[j, b, key] += f0
    return a, beta


@njit(cache=True)
def _bilinear(m, t1, b1, mu1, t2, b2, mu2, const):
    """``a1' M a2`` for a = e_t - e_b - mu e_const (b < 0: no base term)."""
    s = m[t1, t2] - mu2 * m[t1, const] - mu1 * m[const, t2] + mu1 * mu2 * m[const, const]
    if b2 >= 0:
        s -= m[t1, b2] - mu1 * m[const, b2]
    if b1 >= 0:
        s -= m[b1, t2] - mu2 * m[b1, const]
        if b2 >= 0:
            s += m[b1, b2]
    return s


@njit(cache=True, parallel=True)
def pretest_covariance(gram, suffix_gram, cell_k, cell_t, cell_b, cell_cs, mu1, mu0, w1, w0):
    """Covariance ``sum_i psi_ci psi_di`` of every pair of the given cells.

    ``gram[k]`` is ``sum_{i in block k} w_i**2 z_i z_i'`` with ``z_i = (y_i, 1)``;
    ``suffix_gram[s]`` is the sum of ``gram[s:]``. Each cell's influence function is linear
    in ``z_i`` with at most three non-zero coefficients per block, so every pair costs O(1).
    """
    n = cell_k.size
    n_blocks = gram.shape[0]
    const = gram.shape[1] - 1
    cov = np.zeros((n, n))
    for c in prange(n):
        kc = cell_k[c]
        for d in range(c, n):
            kd = cell_k[d]
            s = 0.0
            # treated x treated
            if kc == kd:
                s += _bilinear(gram[kc], cell_t[c], cell_b[c], mu1[c],
                               cell_t[d], cell_b[d], mu1[d], const) / (w1[c] * w1[d])
            # treated block of one cell among the controls of the other
            if kc >= cell_cs[d] and kc != kd:
                s -= _bilinear(gram[kc], cell_t[c], cell_b[c], mu1[c],
                               cell_t[d], cell_b[d], mu0[d], const) / (w1[c] * w0[d])
            if kd >= cell_cs[c] and kd != kc:
                s -= _bilinear(gram[kd], cell_t[c], cell_b[c], mu0[c],
                               cell_t[d], cell_b[d], mu1[d], const) / (w0[c] * w1[d])
            # controls x controls: blocks m .. K, less each cell's own cohort
            # (a cell never counts its own cohort as a control)
            m = max(cell_cs[c], cell_cs[d])
            if m < n_blocks:
                cc = _bilinear(suffix_gram[m], cell_t[c], cell_b[c], mu0[c],
                               cell_t[d], cell_b[d], mu0[d], const)
                if kc >= m:
                    cc -= _bilinear(gram[kc], cell_t[c], cell_b[c], mu0[c],
                                    cell_t[d], cell_b[d], mu0[d], const)
                if kd >= m and kd != kc:
                    cc -= _bilinear(gram[kd], cell_t[c], cell_b[c], mu0[c],
                                    cell_t[d], cell_b[d], mu0[d], const)
                s += cc / (w0[c] * w0[d])
            cov[c, d] = s
            cov[d, c] = s
    return cov
