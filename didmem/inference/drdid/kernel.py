"""Compiled twin of :mod:`didmem.inference.drdid.panel`: every cell at once, in parallel.

:func:`covariate_cells_kernel` gathers each cell's units (its cohort's block, then the
control blocks), builds the outcome change and the covariates at the base period, fits the
nuisance models and writes the cell's ``psi = IF / n_cell`` straight into the block-wise
store of :class:`~didmem.inference.influence.StoredInfluence` (one flat buffer: block ``j``'s
``m_j x n_j`` matrix starts at ``offsets[j]``, one contiguous row per cell). The formulas
are those of :mod:`didmem.inference.drdid.panel`, which the tests hold it to.

Status codes per cell: 0 fine, 2 the outcome-regression Gram of the controls is singular,
3 the propensity-score Gram is singular (reciprocal 1-norm condition below machine epsilon).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

METHOD_CODES = {"reg": 0, "ipw": 1, "dr": 2}
_EPS = np.finfo(np.float64).eps


@njit(cache=True)
def _inverse(a):
    """Inverse by Gauss-Jordan with partial pivoting; ``ok`` False when singular."""
    n = a.shape[0]
    m = a.copy()
    inv = np.eye(n)
    for col in range(n):
        piv = col
        best = abs(m[col, col])
        for r in range(col + 1, n):
            if abs(m[r, col]) > best:
                best = abs(m[r, col])
                piv = r
        if best == 0.0:
            return inv, False
        if piv != col:
            for j in range(n):
                tmp = m[col, j]
                m[col, j] = m[piv, j]
                m[piv, j] = tmp
                tmp = inv[col, j]
                inv[col, j] = inv[piv, j]
                inv[piv, j] = tmp
        d = m[col, col]
        for j in range(n):
            m[col, j] /= d
            inv[col, j] /= d
        for r in range(n):
            if r != col:
                f = m[r, col]
                if f != 0.0:
                    for j in range(n):
                        m[r, j] -= f * m[col, j]
                        inv[r, j] -= f * inv[col, j]
    return inv, True


@njit(cache=True)
def _norm1(a):
    best = 0.0
    for j in range(a.shape[1]):
        s = 0.0
        for i in range(a.shape[0]):
            s += abs(a[i, j])
        if s > best:
            best = s
    return best


@njit(cache=True)
def _checked_inverse(a):
    """Inverse and whether its reciprocal 1-norm condition number reaches machine epsilon."""
    inv, ok = _inverse(a)
    if not ok:
        return inv, False
    rcond = 1.0 / (_norm1(a) * _norm1(inv))
    return inv, rcond >= _EPS


@njit(cache=True)
def _gram(x, wt):
    p = x.shape[1]
    g = np.zeros((p, p))
    for i in range(x.shape[0]):
        if wt[i] == 0.0:
            continue
        for a in range(p):
            v = wt[i] * x[i, a]
            for b in range(a, p):
                g[a, b] += v * x[i, b]
    for a in range(p):
        for b in range(a):
            g[a, b] = g[b, a]
    return g


@njit(cache=True)
def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@njit(cache=True)
def _logit(x, d, w, max_iter=50, tol=1e-10):
    n, p = x.shape
    # start at the intercept-only fit (x[:, 0] is the intercept): fewer Newton steps
    share = (w * d).sum() / w.sum()
    beta = np.zeros(p)
    beta[0] = np.log(share / (1.0 - share))
    eta = np.full(n, beta[0])
    ps = np.empty(n)
    info = np.empty((p, p))
    score = np.empty(p)
    for _ in range(max_iter):
        # one fused pass: scores, information and gradient
        info[:] = 0.0
        score[:] = 0.0
        for i in range(n):
            pi = _sigmoid(eta[i])
            r = w[i] * (d[i] - pi)
            v = w[i] * pi * (1.0 - pi)
            for a in range(p):
                xa = x[i, a]
                score[a] += r * xa
                va = v * xa
                for b in range(a, p):
                    info[a, b] += va * x[i, b]
        for a in range(p):
            for b in range(a):
                info[a, b] = info[b, a]
        inv, ok = _inverse(info)
        if not ok:
            break
        step = inv @ score
        beta = beta + step
        for i in range(n):
            e = 0.0
            for a in range(p):
                e += x[i, a] * beta[a]
            eta[i] = e
        # Newton converges quadratically: a step this small leaves an error near rounding
        big = 0.0
        size = 0.0
        for a in range(p):
            big = max(big, abs(step[a]))
            size = max(size, abs(beta[a]))
        if big <= tol * (size + 1.0):
            break
    for i in range(n):
        ps[i] = _sigmoid(eta[i])
    return ps


@njit(cache=True)
def _dot(x, i, v):
    s = 0.0
    for a in range(v.size):
        s += x[i, a] * v[a]
    return s


@njit(cache=True)
def _cell(dy, d, x, w, method, trim_level, ps_cap, ps_given):
    """ATT, IF (DRDID scale), controls trimmed, largest score, status of one cell.

    ``ps_given`` holds the fitted logit scores of these units when they were fitted once
    for several cells (an empty array otherwise: the logit is fitted here). Three fused
    passes over the units after the nuisance fits; the formulas are those of
    :mod:`didmem.inference.drdid.panel` (``r`` is the outcome change less the outcome model).
    """
    n, p = x.shape
    inf = np.zeros(n)
    w = w / w.mean()
    beta = np.zeros(p)
    a_inv = np.zeros((p, p))
    if method != 1:  # outcome regression on the controls
        g = np.zeros((p, p))
        rhs = np.zeros(p)
        for i in range(n):
            if d[i] == 0.0:
                for a in range(p):
                    va = w[i] * x[i, a]
                    rhs[a] += va * dy[i]
                    for b in range(a, p):
                        g[a, b] += va * x[i, b]
        for a in range(p):
            for b in range(a):
                g[a, b] = g[b, a]
        a_inv, ok = _checked_inverse(g)
        if not ok:
            return 0.0, inf, 0, 0.0, 2
        beta = a_inv @ rhs
        a_inv = a_inv * n  # inverse of X'W_cX / n
    ps = np.zeros(n)
    if method != 0:  # propensity score
        if ps_given.size:
            ps = ps_given.copy()
        else:
            _, ok = _checked_inverse(_gram(x, w))
            if not ok:
                return 0.0, inf, 0, 0.0, 3
            ps = _logit(x, d, w)
    # pass 1: residuals, weights, their sums, M1, M3 and the logit information
    n_trim = 0
    max_ps = 0.0
    r = np.empty(n)
    wt = np.empty(n)
    wc = np.zeros(n)
    swt = swc = swtr = swcr = 0.0
    m1 = np.zeros(p)
    m3 = np.zeros(p)
    info = np.zeros((p, p))
    for i in range(n):
        r[i] = dy[i] - _dot(x, i, beta)
        if method == 0:
            wt[i] = w[i] * d[i]
        else:
            pi = ps[i]
            max_ps = max(max_ps, pi)
            pi = min(pi, ps_cap)
            ps[i] = pi
            keep = 1.0
            if d[i] == 0.0 and pi >= trim_level:
                keep = 0.0
                n_trim += 1
            wt[i] = keep * w[i] * d[i]
            wc[i] = keep * w[i] * pi * (1.0 - d[i]) / (1.0 - pi)
            v = w[i] * pi * (1.0 - pi)
            for a in range(p):
                va = v * x[i, a]
                for b in range(a, p):
                    info[a, b] += va * x[i, b]
        swt += wt[i]
        swc += wc[i]
        swtr += wt[i] * r[i]
        swcr += wc[i] * r[i]
        for a in range(p):
            m1[a] += wt[i] * x[i, a]
            m3[a] += wc[i] * x[i, a]
    mt = swt / n
    v1 = a_inv @ (m1 / n)
    if method == 0:
        att = swtr / swt
        for i in range(n):
            inf[i] = (wt[i] * (r[i] - att)
                      - w[i] * (1.0 - d[i]) * r[i] * _dot(x, i, v1)) / mt
        return att, inf, 0, 0.0, 0
    for a in range(p):
        for b in range(a):
            info[a, b] = info[b, a]
    h_inv, _ = _inverse(info / n)
    mc = swc / n
    eta_t = swtr / swt
    eta_c = swcr / swc
    # pass 2: M2
    m2 = np.zeros(p)
    for i in range(n):
        f = wc[i] * (r[i] - eta_c)
        for a in range(p):
            m2[a] += f * x[i, a]
    v2 = h_inv @ (m2 / n)
    v3 = a_inv @ (m3 / n)
    # pass 3: the influence function
    for i in range(n):
        score = w[i] * (d[i] - ps[i]) * _dot(x, i, v2)
        treat = wt[i] * (r[i] - eta_t)
        cont = wc[i] * (r[i] - eta_c) + score
        if method == 2:
            e = w[i] * (1.0 - d[i]) * r[i]
            treat -= e * _dot(x, i, v1)
            cont -= e * _dot(x, i, v3)
        inf[i] = treat / mt - cont / mc
    return eta_t - eta_c, inf, n_trim, max_ps, 0


@njit(cache=True)
def _gather(yt, xt, w, starts, k, cs, t, b, xb):
    """A cell's units (its cohort's block first in block order, then the controls)."""
    n_blocks = starts.size - 1
    n_cov = xt.shape[1]
    n = starts[k + 1] - starts[k]
    for j in range(cs, n_blocks):
        if j != k:
            n += starts[j + 1] - starts[j]
    dy = np.empty(n)
    d = np.zeros(n)
    x = np.empty((n, n_cov + 1))
    wi = np.empty(n)
    m = 0
    for j in range(n_blocks):
        if j != k and j < cs:
            continue
        for i in range(starts[j], starts[j + 1]):
            dy[m] = yt[t, i] - yt[b, i]
            d[m] = 1.0 if j == k else 0.0
            x[m, 0] = 1.0
            for q in range(n_cov):
                x[m, q + 1] = xt[xb, q, i]
            wi[m] = w[i]
            m += 1
    return dy, d, x, wi


@njit(cache=True, parallel=True)
def pscore_kernel(yt, xt, w, starts, key_k, key_cs, key_xb, ps_offsets, ps_flat):
    """Logit scores for each distinct (cohort, controls, covariate period): cells that share
    them (every cell of a cohort with never-treated controls and time-invariant covariates)
    share one fit. Returns a status per key (3: singular propensity-score Gram)."""
    n_keys = key_k.size
    status = np.zeros(n_keys, dtype=np.int64)
    for q in prange(n_keys):
        _, d, x, wi = _gather(yt, xt, w, starts, key_k[q], key_cs[q], 0, 0, key_xb[q])
        wi = wi / wi.mean()
        _, ok = _checked_inverse(_gram(x, wi))
        if not ok:
            status[q] = 3
            continue
        ps = _logit(x, d, wi)
        ps_flat[ps_offsets[q]:ps_offsets[q + 1]] = ps
    return status


@njit(cache=True, parallel=True)
def covariate_cells_kernel(yt, xt, w, starts, cell_k, cell_t, cell_b, cell_cs, cell_ref, pos,
                           offsets, method, trim_level, ps_cap, cell_key, ps_offsets, ps_flat,
                           flat):
    """Every cell's ATT and ``psi``; returns ``att, n_trimmed, max_ps, status`` per cell.

    ``yt`` is the outcome as times x units and ``xt`` the covariates as times x covariates x
    units, so that a cell reads its units' values in contiguous runs. Covariates are taken at
    the earlier of the cell's two periods (its base period, except for pre-treatment cells
    under a universal base), as R ``did`` does. ``cell_key[c] >= 0`` points to the cell's
    shared logit scores in ``ps_flat`` (from :func:`pscore_kernel`); -1: fit them here.
    """
    n_cells = cell_k.size
    n_blocks = starts.size - 1
    att = np.zeros(n_cells)
    n_trim = np.zeros(n_cells, dtype=np.int64)
    max_ps = np.zeros(n_cells)
    status = np.zeros(n_cells, dtype=np.int64)
    empty = np.zeros(0)
    for c in prange(n_cells):
        if cell_ref[c] == 1:
            continue
        k = cell_k[c]
        t = cell_t[c]
        b = cell_b[c]
        dy, d, x, wi = _gather(yt, xt, w, starts, k, cell_cs[c], t, b, min(t, b))
        n = dy.size
        q = cell_key[c]
        ps_given = empty if q < 0 else ps_flat[ps_offsets[q]:ps_offsets[q + 1]]
        a, inf, nt, mp, st = _cell(dy, d, x, wi, method, trim_level, ps_cap, ps_given)
        att[c] = a
        n_trim[c] = nt
        max_ps[c] = mp
        status[c] = st
        m = 0
        for j in range(n_blocks):
            if j != k and j < cell_cs[c]:
                continue
            base = offsets[j] + pos[c, j] * (starts[j + 1] - starts[j])
            for i in range(starts[j], starts[j + 1]):
                flat[base + i - starts[j]] = inf[m] / n
                m += 1
    return att, n_trim, max_ps, status
