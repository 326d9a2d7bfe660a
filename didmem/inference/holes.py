"""Influence functions of the cells on panels with holes and on repeated cross-sections.

R ``did`` estimates an unbalanced panel (``allow_unbalanced_panel = TRUE``) and repeated
cross-sections (``panel = FALSE``) with its cross-section estimators: a cell ``(g, t)`` with
base period ``b`` compares four weighted means of the rows observed at ``t`` or ``b``,

    ATT = (m_1t - m_1b) - (m_0t - m_0b),

cohort ``g``'s (1) and the controls' (0). On a panel a unit's influence function is the sum
over its rows, so a unit observed at both periods enters both means. Without covariates it
is linear in two features per (unit, time),

    psi_i = w_i sum_t O_it (a_t y_it + c_t),

``O_it`` one where the row is observed, with coefficients that depend only on the cell and
the unit's block (treated cohort, control or neither): ``a = 1/W_1t``, ``c = -m_1t/W_1t`` on
the treated at ``t``, with signs flipped at ``b`` and on the controls. So every inference
quantity follows from per-block sums of the features

    z_i = (w_i O_it y_it for each t, w_i O_it for each t, w_i, 1)      (P = 2T + 2)

- the analytic variance and covariances from the per-block Gram matrices ``sum_i z_i z_i'``;
- a bootstrap draw from ``sum_i U_i z_i`` per block (one pass over the rows per draw);
- an aggregation (rows ``L`` of cells, plus the estimated-weights term on the ``w_i`` and
  ``1`` features) from its coefficients per block.

No units x cells matrix is ever formed, and for cross-sections no units x times matrix
either: a row has one time, so its features are four numbers. ``reference_psi`` builds the
dense matrix for the tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from numba import njit, prange

from ..errors import EstimationError
from ._prepared import HoleRows, _fmt
from .bootstrap import _CHUNK_ELEMENTS, MultiplierChunks
from .influence import CellInfluence

__all__ = ["HoleRows", "HolesInfluence", "hole_cells", "check_hole_cells", "reference_psi"]

_DENSE_LIMIT = 40_000_000  # features held as a dense units x P matrix up to 320 MB


# ----------------------------------------------------------------------------- kernels
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


@njit(cache=True)
def _co_observed(unit_start, time, wy, w_unit, block, n_blocks, n_t):
    """Per block and pair of times ``(t, s)``: the units observed at both (``counts``) and,
    over those units, the sums ``(wy_t**2, wy_s**2, wy_t wy_s, wy_t w, wy_s w, w**2)``
    (``sums``, blocks x T x T x 6; only for ``t != s``)."""
    counts = np.zeros((n_blocks, n_t, n_t), dtype=np.int64)
    sums = np.zeros((n_blocks, n_t, n_t, 6))
    for i in range(unit_start.size - 1):
        j = block[i]
        wi = w_unit[i]
        for r in range(unit_start[i], unit_start[i + 1]):
            for q in range(unit_start[i], unit_start[i + 1]):
                a, b = time[r], time[q]
                counts[j, a, b] += 1
                if r != q:
                    o = sums[j, a, b]
                    o[0] += wy[r] * wy[r]
                    o[1] += wy[q] * wy[q]
                    o[2] += wy[r] * wy[q]
                    o[3] += wy[r] * wi
                    o[4] += wy[q] * wi
                    o[5] += wi * wi
    return counts, sums


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


# ----------------------------------------------------------------------------- the cells
def hole_cells(rows: HoleRows, w, starts, cells, n_times: int):
    """Estimates and influence-function coefficients of every cell on a design with holes.

    Returns ``att``, the coefficients ``(idx, tau, kappa)`` (feature index and coefficient
    on the treated cohort and on each control block, four per cell: ``y`` at ``t``, ``y``
    at ``b``, weight at ``t``, weight at ``b``), the means ``(m1, m0)`` of the outcome
    change, and the weight sums ``(w1t, w1b, w0t, w0b)`` of the four groups.
    """
    n_units = w.size
    n_blocks = starts.size - 1
    block = np.repeat(np.arange(n_blocks), np.diff(starts))
    rb = block[rows.unit]
    wr = w[rows.unit]
    flat = rb * n_times + rows.time
    sw = np.bincount(flat, weights=wr, minlength=n_blocks * n_times).reshape(n_blocks, n_times)
    swy = np.bincount(flat, weights=wr * rows.y,
                      minlength=n_blocks * n_times).reshape(n_blocks, n_times)
    suf_w = np.zeros((n_blocks + 1, n_times))
    suf_y = np.zeros((n_blocks + 1, n_times))
    suf_w[:-1] = np.cumsum(sw[::-1], axis=0)[::-1]
    suf_y[:-1] = np.cumsum(swy[::-1], axis=0)[::-1]
    k, t, cs, ref = cells.k, cells.t, cells.cs, cells.ref
    has_base = cells.b >= 0
    b = np.where(has_base, cells.b, t)
    own = (k >= cs).astype(np.float64)

    def group(time_idx):
        w1, y1 = sw[k, time_idx], swy[k, time_idx]
        w0 = suf_w[cs, time_idx] - own * w1
        y0 = suf_y[cs, time_idx] - own * y1
        return w1, y1, w0, y0

    w1t, y1t, w0t, y0t = group(t)
    w1b, y1b, w0b, y0b = group(b)
    w1b = np.where(has_base, w1b, np.inf)
    w0b = np.where(has_base, w0b, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        m1t, m0t = y1t / w1t, y0t / w0t
        m1b = np.where(has_base, y1b / w1b, 0.0)
        m0b = np.where(has_base, y0b / w0b, 0.0)
        att = (m1t - m1b) - (m0t - m0b)
        idx = np.stack([t, b, n_times + t, n_times + b], axis=1).astype(np.int64)
        tau = np.stack([1 / w1t, -1 / w1b, -m1t / w1t, m1b / w1b], axis=1)
        kappa = np.stack([-1 / w0t, 1 / w0b, m0t / w0t, -m0b / w0b], axis=1)
    live = ref == 0
    att = np.where(live, att, 0.0)
    tau[~live] = 0.0
    kappa[~live] = 0.0
    stats = {"mu1": m1t - m1b, "mu0": m0t - m0b, "w1t": w1t, "w1b": w1b, "w0t": w0t,
             "w0b": w0b}
    del n_units
    return att, (idx, np.ascontiguousarray(tau), np.ascontiguousarray(kappa)), stats


def check_hole_cells(prepared, cells, stats, owner: str) -> None:
    """Refuse cells that miss one of their four groups of rows (R returns NA for them)."""
    live = cells.ref == 0
    has_base = cells.b >= 0
    groups = [("the cohort", "t", stats["w1t"]), ("the cohort", "b", stats["w1b"]),
              ("the controls", "t", stats["w0t"]), ("the controls", "b", stats["w0b"])]
    problems = []
    for who, when, weight in groups:
        bad = live & ~(weight > 0)
        if when == "b":
            bad &= has_base
        for c in np.flatnonzero(bad)[:3]:
            at = cells.t[c] if when == "t" else cells.b[c]
            problems.append(f"{who} at time {_fmt(prepared.times[at])} in cell (cohort "
                            f"{_fmt(prepared.cohorts[cells.k[c]])}, time "
                            f"{_fmt(prepared.times[cells.t[c]])})")
        if bad.any() and len(problems) >= 3:
            break
    if problems:
        raise EstimationError(
            f"{owner}: some cells have no observed rows in one of their four groups, e.g. "
            + "; ".join(problems[:3]) + ". Each cell compares the cohort's and the controls' "
            "rows at its time and its base period, so each needs at least one of each. "
            "Panel.describe_holes() shows the rows per (cohort, time).")


@dataclass(frozen=True, eq=False)
class HolesInfluence(CellInfluence):
    """The cells' influence functions on a design with holes, held as coefficients.

    The :class:`~didmem.inference.influence.CellInfluence` of panels with holes and of
    repeated cross-sections without covariates: variances, draws, covariances, the
    small-sample groups and the aggregations' covariances, all from per-block sums of the
    row features (see the module notes).
    """

    rows: HoleRows
    w: np.ndarray
    starts: np.ndarray
    n_times: int
    k: np.ndarray
    cs: np.ndarray
    ref: np.ndarray
    idx: np.ndarray
    tau: np.ndarray
    kappa: np.ndarray
    gram: np.ndarray
    gram_suffix: np.ndarray
    features: np.ndarray | None  # dense units x P, or None (read the rows)
    prepared: Any = field(default=None, repr=False)
    cells: Any = field(default=None, repr=False)
    att: np.ndarray | None = field(default=None, repr=False)
    stats: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, rows: HoleRows, w, starts, cells, n_times, coefficients, *, prepared=None,
              att=None, stats=None):
        """From the rows and the coefficients of :func:`hole_cells` (``att`` and ``stats``
        are its estimates and statistics, ``prepared`` the prepared panel, for a fit)."""
        idx, tau, kappa = coefficients
        n_units = w.size
        n_blocks = starts.size - 1
        p = 2 * n_times + 2
        wy = w[rows.unit] * rows.y
        features = None
        if n_units * p <= _DENSE_LIMIT and rows.size * 4 >= n_units * n_times:
            features = np.zeros((n_units, p))
            features[rows.unit, rows.time] = wy
            features[rows.unit, n_times + rows.time] = w[rows.unit]
            features[:, 2 * n_times] = w
            features[:, 2 * n_times + 1] = 1.0
            gram = np.empty((n_blocks, p, p))
            for j in range(n_blocks):
                f = features[starts[j]:starts[j + 1]]
                gram[j] = f.T @ f
        else:
            block = np.repeat(np.arange(n_blocks), np.diff(starts))
            gram = _sparse_gram(rows.unit_start, rows.time, wy, w, block, n_blocks, n_times)
        suffix = np.zeros((n_blocks + 1, p, p))
        suffix[:-1] = np.cumsum(gram[::-1], axis=0)[::-1]
        return cls(rows=rows, w=w, starts=starts, n_times=n_times, k=cells.k, cs=cells.cs,
                   ref=cells.ref, idx=idx, tau=tau, kappa=kappa, gram=gram,
                   gram_suffix=suffix, features=features, prepared=prepared, cells=cells,
                   att=att, stats={} if stats is None else stats)

    @property
    def estimates(self) -> np.ndarray:
        return self.att

    # ------------------------------------------------------------------ sizes
    @property
    def n_cells(self) -> int:
        return int(self.k.size)

    @property
    def n_blocks(self) -> int:
        return int(self.starts.size - 1)

    @property
    def n_features(self) -> int:
        return 2 * self.n_times + 2

    @property
    def nbytes(self) -> int:
        extra = 0 if self.features is None else self.features.nbytes
        return int(self.gram.nbytes + self.gram_suffix.nbytes + extra)

    def _block(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_blocks), np.diff(self.starts))

    # ------------------------------------------------------------------ grouped sums
    def feature_sums(self, weights: np.ndarray) -> np.ndarray:
        """``sum_i U_di z_i`` per draw and block (draws x blocks x P)."""
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        if self.features is not None:
            out = np.empty((weights.shape[0], self.n_blocks, self.n_features))
            for j in range(self.n_blocks):
                lo, hi = self.starts[j], self.starts[j + 1]
                out[:, j] = weights[:, lo:hi] @ self.features[lo:hi]
            return out
        wy = self.w[self.rows.unit] * self.rows.y
        return _sparse_sums(weights, self.rows.unit_start, self.rows.time, wy, self.w,
                            self._block(), self.n_blocks, self.n_times)

    def _chunk_mode(self, multiplier: str, n_clusters: int) -> str:
        """How a chunk of draws is made (see :meth:`multiplier_chunks`)."""
        if n_clusters:
            return "clusters"
        if multiplier == "normal":
            return "gram_roots"
        if multiplier == "rademacher" and self.features is None:
            return "fused"
        return "units"

    def multiplier_chunks(self, n_draws: int, multiplier: str, rng, n_clusters: int = 0):
        """The bootstrap's chunks, in the form its kernel reads fastest.

        Rademacher and Mammen weights are drawn per unit (per cluster with clusters), as on
        a balanced panel; Rademacher weights on sparse rows as random words that the fused
        kernel reads bit by bit (:func:`_rademacher_sums`, 64 draws per pass). Gaussian
        weights without clusters need no weight per unit at all: given the data, a block's
        sum ``sum_i U_i z_i`` is exactly normal with covariance the block's Gram matrix, so
        it is drawn as ``xi @ sqrt(G_j)``: the same distribution in O(draws x blocks x
        P**2), whatever the number of rows.
        """
        n = self.w.size
        n_blocks, p = self.n_blocks, self.n_features
        n_weights = n_clusters or n
        mode = self._chunk_mode(multiplier, n_clusters)
        # chunks in multiples of the one _CHUNK_ELEMENTS: multipliers, or grouped sums
        chunk = max(1, min(n_draws, 2 * _CHUNK_ELEMENTS // max(n_weights, 1),
                           25 * _CHUNK_ELEMENTS // (n_blocks * p)))
        source = None
        if mode == "gram_roots":
            chunk = max(1, min(n_draws, 25 * _CHUNK_ELEMENTS // (n_blocks * p)))

            def source(rng, m):
                return rng.standard_normal((n_blocks, m, p))
        elif mode == "fused":  # 64 draws per pass; one buffer of grouped sums, reused
            chunk = min(n_draws, max(64, 5 * _CHUNK_ELEMENTS // (n_blocks * p) // 64 * 64))
            words = (n + 63) // 64

            def source(rng, m):
                return np.asarray(rng.bit_generator.random_raw(m * words), dtype=np.uint64)
        return MultiplierChunks(rng, n_draws, n_weights, multiplier, chunk=chunk,
                                source=source)

    def chunk_drawer(self, multipliers, clusters, n_clusters: int) -> Callable:
        """Per chunk: the grouped feature sums (draws x blocks x P) in the chunk's form,
        then every cell's draw from them (:func:`_cell_draws`)."""
        n_t, n_blocks, p = self.n_times, self.n_blocks, self.n_features
        mode = self._chunk_mode(multipliers.multiplier, n_clusters)
        if mode == "clusters":
            csums = self.cluster_sums(clusters, n_clusters).reshape(n_clusters, -1)
        elif mode == "gram_roots":
            roots = np.empty((n_blocks, p, p))
            for j in range(n_blocks):
                vals, vecs = np.linalg.eigh(self.gram[j])
                roots[j] = (vecs * np.sqrt(np.clip(vals, 0.0, None))).T
        elif mode == "fused":
            buffer = np.empty((multipliers.chunk, n_blocks, p))
        wy = self.w[self.rows.unit] * self.rows.y
        unweighted = bool(np.all(self.w == 1.0))

        def draw(row0, chunk, out):
            if mode == "gram_roots":
                m = chunk.shape[1]
                sums = np.ascontiguousarray(np.matmul(chunk, roots).transpose(1, 0, 2))
            elif mode == "clusters":
                m = chunk.shape[0]
                sums = (chunk @ csums).reshape(m, n_blocks, p)
            elif mode == "fused":
                m = min(multipliers.chunk, multipliers.n_draws - row0)
                sums = _rademacher_sums(chunk, m, self.rows.unit_start, self.rows.time, wy,
                                        self.w, not unweighted, self.starts, n_t, buffer)
            else:
                m = chunk.shape[0]
                sums = self.feature_sums(chunk)
            _cell_draws(sums, self.k, self.cs, self.ref, self.idx, self.tau, self.kappa,
                        out.cells, row0)
            out.block_weights[row0:row0 + m] = sums[:, :, 2 * n_t]
            out.total[row0:row0 + m] = sums[:, :, 2 * n_t + 1].sum(axis=1)

        return draw

    def cluster_sums(self, clusters: np.ndarray, n_clusters: int) -> np.ndarray:
        """``sum_{i in cluster} z_i`` per cluster and block (clusters x blocks x P)."""
        n_t, p = self.n_times, self.n_features
        key = (np.asarray(clusters, dtype=np.int64) * self.n_blocks + self._block()) * p
        size = n_clusters * self.n_blocks * p
        rows = self.rows
        wr = self.w[rows.unit]
        out = np.bincount(key[rows.unit] + rows.time, weights=wr * rows.y, minlength=size)
        out += np.bincount(key[rows.unit] + n_t + rows.time, weights=wr, minlength=size)
        out += np.bincount(key + 2 * n_t, weights=self.w, minlength=size)
        out += np.bincount(key + 2 * n_t + 1, minlength=size)
        return out.reshape(n_clusters, self.n_blocks, p)

    # ------------------------------------------------------------------ the generic route
    def draws(self, weights: np.ndarray) -> np.ndarray:
        """``weights @ psi`` (draws x cells) for a multiplier matrix (draws x units)."""
        sums = self.feature_sums(weights)
        out = np.empty((weights.shape[0], self.n_cells))
        _cell_draws(sums, self.k, self.cs, self.ref, self.idx, self.tau, self.kappa, out, 0)
        return out

    def cluster_psi(self, clusters, n_clusters: int) -> np.ndarray:
        """``sum_{i in cluster} psi_ic`` (clusters x cells)."""
        return self.draws_from_sums(self.cluster_sums(clusters, n_clusters))

    def variance(self, clusters=None, n_clusters: int = 0) -> np.ndarray:
        """``sum_i psi_ic**2`` per cell, or of cluster sums when ``n_clusters > 0``."""
        if n_clusters:
            sums = self.cluster_psi(clusters, n_clusters)
            return np.einsum("ij,ij->j", sums, sums)
        return _pair_diagonal(self.k, self.cs, self.ref, self.idx, self.tau, self.kappa,
                              self.gram, self.gram_suffix)

    def draws_from_sums(self, sums: np.ndarray) -> np.ndarray:
        out = np.empty((sums.shape[0], self.n_cells))
        _cell_draws(np.ascontiguousarray(sums), self.k, self.cs, self.ref, self.idx,
                    self.tau, self.kappa, out, 0)
        return out

    def covariance(self, which: np.ndarray) -> np.ndarray:
        """``psi[:, which].T @ psi[:, which]`` (unclustered: the pre-test without clusters)."""
        which = np.ascontiguousarray(which, dtype=np.int64)
        return _pair_matrix(which, self.k, self.cs, self.ref, self.idx, self.tau, self.kappa,
                            self.gram, self.gram_suffix)

    def welch_parts(self):
        """Cross-sections only: the plug-in variance of each cell's four means (cohort and
        controls, at ``t`` and at ``b``: independent rows, so no covariance between them)
        and their row counts, both 4 x cells; None on a panel with holes."""
        if self.rows.size != self.w.size:
            return None
        parts = np.zeros((4, self.n_cells))
        own = self.k >= self.cs
        for c in np.flatnonzero(self.ref == 0):
            for half, cols in enumerate(((0, 2), (1, 3))):
                idx = self.idx[c, list(cols)]
                t_coef = self.tau[c, list(cols)]
                k_coef = self.kappa[c, list(cols)]
                g_own = self.gram[self.k[c]][np.ix_(idx, idx)]
                g_ctrl = self.gram_suffix[self.cs[c]][np.ix_(idx, idx)] - (g_own if own[c]
                                                                           else 0.0)
                parts[half, c] = t_coef @ g_own @ t_coef
                parts[2 + half, c] = k_coef @ g_ctrl @ k_coef
        n_t = self.n_times
        flat = self._block()[self.rows.unit] * n_t + self.rows.time
        counts = np.bincount(flat, minlength=self.n_blocks * n_t).reshape(self.n_blocks, n_t)
        suffix = np.zeros((self.n_blocks + 1, n_t))
        suffix[:-1] = np.cumsum(counts[::-1], axis=0)[::-1]
        n = np.zeros((4, self.n_cells))
        for half in (0, 1):
            when = self.idx[:, half]
            n[half] = counts[self.k, when]
            n[2 + half] = suffix[self.cs, when] - np.where(own, n[half], 0.0)
        has_base = self.tau[:, 1] != 0
        n[1][~has_base] = 0.0
        n[3][~has_base] = 0.0
        return parts, n

    def welch_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """The independent parts of every cell's variance and the units that estimate each.

        Cross-sections: the four means (cohort and controls, at ``t`` and at ``b``;
        :meth:`welch_parts`). A panel with holes: for the cohort and for the controls,
        three parts (:meth:`observation_welch_groups`, issue 50).
        """
        split = self.welch_parts()
        if split is not None:
            return split
        return self.observation_welch_groups()

    def observation_welch_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Welch parts of a panel with holes: per side (cohort, controls) of each cell, the
        units observed at both periods, at ``t`` only and at ``b`` only, each part paired
        with the count of units whose deviations estimate it (groups x cells, six groups).

        A side's difference of means ``m_t - m_b`` is, unit by unit, a sum over the three
        independent groups ``B`` (both), ``T`` (``t`` only) and ``O`` (``b`` only):
        ``sum_B w_i z_i + sum_T w_i y_it / W_t - sum_O w_i y_ib / W_b`` with
        ``z_i = y_it / W_t - y_ib / W_b``, so its variance is
        ``sum_B w_i**2 var(z) + sum_T w_i**2 var(y_t) / W_t**2 + sum_O w_i**2 var(y_b) / W_b**2``.

        * ``B``: the plug-in sum of squares of ``w_i z_i`` about the group's own
          (``w**2``-weighted) mean, with ``n_B`` units (so ``n_B / (n_B - 1)`` and
          ``n_B - 1`` degrees of freedom);
        * ``T``: ``var(y_t)`` is the same for every unit observed at ``t`` (rows missing at
          random), so it is estimated from all ``n_t`` of them about the mean ``m_t`` that
          the cell itself estimates from them: the group's part is its share
          ``sum_T w**2 / sum_t w**2`` of the plug-in ``sum_{i obs. at t} w_i**2
          (y_it - m_t)**2 / W_t**2``, with ``n_t`` units (``n_t - 1`` degrees of freedom);
        * ``O``: likewise at ``b`` with ``n_b``.

        Unweighted, the corrected parts add up to an unbiased variance, and without holes
        ``T`` and ``O`` are empty and ``B`` is the balanced panel's Welch part. The three
        estimates share ``B``'s units; their Satterthwaite degrees of freedom count the
        covariances that follow (:meth:`welch_dependence`; see docs/inference.rst for the
        Monte Carlo). Before issue
        50, ``T`` and ``O`` were taken about the whole side's means with their own few units
        (often two: ``n / (n - 1) = 2`` and one degree of freedom).
        """
        sides, _ = self._pattern_sums()
        parts, n = [], []
        for side in sides:
            share_t = np.divide(side["w2_only_t"], side["w2_t"],
                                out=np.zeros_like(side["w2_t"]), where=side["w2_t"] > 0)
            share_b = np.divide(side["w2_only_b"], side["w2_b"],
                                out=np.zeros_like(side["w2_b"]), where=side["w2_b"] > 0)
            parts += [side["centred_both"], side["level_t"] * share_t,
                      side["level_b"] * share_b]
            n += [side["n_both"], np.where(side["n_only_t"] > 0, side["n_t"], 0),
                  np.where(side["n_only_b"] > 0, side["n_b"], 0)]
        live = self.ref == 0
        return (np.where(live, np.stack(parts), 0.0),
                np.where(live, np.stack(n), 0))

    def welch_dependence(self):
        """The dependence between the Welch parts of :meth:`welch_groups` that share units:
        ``(pairs, shared, r2)`` (see :func:`~didmem.inference.small_sample.block_welch`), or
        None on cross-sections (independent rows).

        On a panel with holes a side's three parts are estimated on overlapping units: the
        ``n_B`` units observed at both periods estimate ``B`` and also enter the level
        variances at ``t`` (``T``) and at ``b`` (``O``). Two sample variances of variables
        ``x`` and ``y`` with correlation ``r`` on ``m`` shared units have covariance
        ``2 r**2 m s_x**2 s_y**2 / (nu_x nu_y)`` under normality, so the Satterthwaite degrees
        of freedom count ``2 a_k a_l r_kl**2 m_kl / (nu_k nu_l)`` for each pair (issue 50).
        On ``B``'s units ``psi_i = u_t + u_b`` (the unit's terms at ``t`` and at ``b``);
        ``r`` is estimated from their centred moments there: ``(B, T)`` the correlation of
        ``u_t + u_b`` with ``u_t``, ``(B, O)`` with ``u_b``, ``(T, O)`` of ``u_t`` with ``u_b``.
        """
        if self.rows.size == self.w.size:
            return None
        sides, live = self._pattern_sums()
        r2, shared = [], []
        for side in sides:
            tt, bb, tb = side["both_moments"]
            zz = tt + bb + 2 * tb
            for num, den in (((tt + tb) ** 2, zz * tt), ((bb + tb) ** 2, zz * bb),
                             (tb**2, tt * bb)):
                r2.append(np.clip(np.divide(num, den, out=np.zeros_like(num), where=den > 0),
                                  0.0, 1.0))
                shared.append(side["n_both"])
        pairs = np.array([[0, 1], [0, 2], [1, 2], [3, 4], [3, 5], [4, 5]])
        return pairs, np.where(live, np.stack(shared), 0), np.where(live, np.stack(r2), 0.0)

    def observation_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Each cell's plug-in variance ``sum_i psi_i**2`` split by side and observation
        pattern (cohort and controls; at both periods, at ``t`` only, at ``b`` only) and the
        units of each group (groups x cells, six groups; they add up to the variance)."""
        sides, live = self._pattern_sums()
        parts = [p for side in sides for p in (side["part_both"], side["part_t"],
                                                 side["part_b"])]
        n = [c for side in sides for c in (side["n_both"], side["n_only_t"], side["n_only_b"])]
        return np.where(live, np.stack(parts), 0.0), np.where(live, np.stack(n), 0)

    def _pattern_sums(self):
        """Per side of every cell (cohort, controls): the sums of squares and counts of its
        units by observation pattern at the cell's two periods."""
        counts, both = _co_observed(self.rows.unit_start, self.rows.time,
                                    self.w[self.rows.unit] * self.rows.y, self.w,
                                    self._block(), self.n_blocks, self.n_times)

        def suffix(a):
            out = np.zeros((a.shape[0] + 1,) + a.shape[1:], dtype=a.dtype)
            out[:-1] = np.cumsum(a[::-1], axis=0)[::-1]
            return out

        n_t = self.n_times
        t, b = self.idx[:, 0], self.idx[:, 1]  # b is t for level comparisons
        based = b != t
        own = (self.k >= self.cs)[:, None]
        # the sums over every unit observed at t (or b): wy**2, wy w, w**2, from the Gram
        at = np.stack([self.gram[:, t, t], self.gram[:, t, n_t + t],
                       self.gram[:, n_t + t, n_t + t]], axis=-1)  # blocks x cells x 3
        at_b = np.stack([self.gram[:, b, b], self.gram[:, b, n_t + b],
                         self.gram[:, n_t + b, n_t + b]], axis=-1)
        cells = np.arange(self.n_cells)
        sides = []
        for coef, block_of in ((self.tau, None), (self.kappa, "controls")):
            def total(a):  # a: blocks x cells x ... -> the cell's treated block or controls
                mine = a[self.k, cells]
                if block_of is None:
                    return mine
                tail = suffix(a)[self.cs, cells]
                return tail - np.where(own.reshape((-1,) + (1,) * (mine.ndim - 1)), mine, 0)

            s_both = np.where(based[:, None], total(both[:, t, b]), 0.0)  # cells x 6
            c_both = np.where(based, total(counts[:, t, b]), 0)
            c_t, c_b = total(counts[:, t, t]), total(counts[:, b, b])
            s_t, s_b = total(at), total(at_b)
            a0, a1, a2, a3 = coef.T
            ww = a2 + a3
            part_both = (a0**2 * s_both[:, 0] + a1**2 * s_both[:, 1]
                         + 2 * a0 * a1 * s_both[:, 2] + 2 * a0 * ww * s_both[:, 3]
                         + 2 * a1 * ww * s_both[:, 4] + ww**2 * s_both[:, 5])
            only_t = s_t - s_both[:, [0, 3, 5]]
            only_b = np.where(based[:, None], s_b - s_both[:, [1, 4, 5]], 0.0)
            part_t = a0**2 * only_t[:, 0] + 2 * a0 * a2 * only_t[:, 1] + a2**2 * only_t[:, 2]
            part_b = a1**2 * only_b[:, 0] + 2 * a1 * a3 * only_b[:, 1] + a3**2 * only_b[:, 2]
            # B's w z about its own w**2-weighted mean: sum (w z)**2 - (sum w (w z))**2 / sum w**2
            zz = a0**2 * s_both[:, 0] + a1**2 * s_both[:, 1] + 2 * a0 * a1 * s_both[:, 2]
            zw = a0 * s_both[:, 3] + a1 * s_both[:, 4]
            centred = zz - np.divide(zw**2, s_both[:, 5], out=np.zeros_like(zw),
                                     where=s_both[:, 5] > 0)
            # on B, the two levels' variables u_t = a0 wy_t + a2 w and u_b = a1 wy_b + a3 w
            # about B's own w**2-weighted means: their centred moments (psi = u_t + u_b)
            w2 = s_both[:, 5]
            mean_t = a0 * s_both[:, 3] + a2 * w2
            mean_b = a1 * s_both[:, 4] + a3 * w2
            moments = np.stack([
                a0**2 * s_both[:, 0] + 2 * a0 * a2 * s_both[:, 3] + a2**2 * w2,
                a1**2 * s_both[:, 1] + 2 * a1 * a3 * s_both[:, 4] + a3**2 * w2,
                a0 * a1 * s_both[:, 2] + a0 * a3 * s_both[:, 3] + a2 * a1 * s_both[:, 4]
                + a2 * a3 * w2])
            moments -= np.divide(np.stack([mean_t**2, mean_b**2, mean_t * mean_b]), w2,
                                 out=np.zeros_like(moments), where=w2 > 0)
            level_t = a0**2 * s_t[:, 0] + 2 * a0 * a2 * s_t[:, 1] + a2**2 * s_t[:, 2]
            level_b = np.where(based, a1**2 * s_b[:, 0] + 2 * a1 * a3 * s_b[:, 1]
                               + a3**2 * s_b[:, 2], 0.0)
            sides.append({
                "part_both": part_both, "part_t": part_t, "part_b": part_b,
                "n_both": c_both, "n_only_t": c_t - c_both,
                "n_only_b": np.where(based, c_b - c_both, 0),
                "centred_both": np.maximum(centred, 0.0), "level_t": level_t,
                "level_b": level_b, "n_t": c_t, "n_b": np.where(based, c_b, 0),
                "w2_t": s_t[:, 2], "w2_only_t": only_t[:, 2],
                "w2_b": np.where(based, s_b[:, 2], 0.0), "w2_only_b": only_b[:, 2],
                "both_moments": np.where(based, moments, 0.0)})
        return sides, (self.ref == 0)

    def contributing_units(self) -> np.ndarray:
        """``(n_treated, n_control)`` (2 x cells): the units of the cell's cohort and of its
        controls observed at its time or its base period."""
        n = self.observation_groups()[1]
        return np.stack([n[:3].sum(axis=0), n[3:].sum(axis=0)])

    def treated_variance(self) -> np.ndarray:
        """The treated cohort's part ``sum_{i in g} psi_i**2`` of every cell's variance."""
        out = np.zeros(self.n_cells)
        for c in np.flatnonzero(self.ref == 0):
            g = self.gram[self.k[c]][np.ix_(self.idx[c], self.idx[c])]
            out[c] = self.tau[c] @ g @ self.tau[c]
        return out

    # ------------------------------------------------------------------ combinations
    def combination_coefficients(self, weights, omega, n_units: int, pg) -> np.ndarray:
        """Coefficients (rows x blocks x P) of linear combinations of the cells plus the
        estimated-weights term ``(omega[row, g(i)] w_i - Omega[row]) / n``."""
        from scipy import sparse

        csc = sparse.csc_matrix(weights)
        coef = _combination_coefficients(
            csc.indptr.astype(np.int64), csc.indices.astype(np.int64),
            csc.data.astype(np.float64), csc.shape[0], self.k, self.cs, self.ref, self.idx,
            self.tau, self.kappa, self.n_blocks, self.n_features)
        n_t = self.n_times
        n_cohorts = omega.shape[1]
        coef[:, :n_cohorts, 2 * n_t] += omega / n_units
        coef[:, :, 2 * n_t + 1] -= (omega @ pg)[:, None] / n_units
        return coef

    def combination_moments(self, weights, omega, *, blocks: bool = True):
        """The combinations' covariance and block parts from per-block moments, without a
        units x rows matrix (see :meth:`CellInfluence.combination_moments`)."""
        prepared = self.prepared
        coef = self.combination_coefficients(weights, omega, prepared.n_units,
                                             prepared.cohort_shares)
        covariance = self.combination_covariance(coef, prepared.clusters, prepared.n_clusters)
        parts = (self.combination_block_variances(coef)
                 if blocks and prepared.clusters is None else None)
        return covariance, parts

    def combination_covariance(self, coef, clusters=None, n_clusters: int = 0) -> np.ndarray:
        """``psi' psi`` (rows x rows) of combinations with coefficients ``coef``."""
        if n_clusters:
            sums = self.cluster_sums(clusters, n_clusters)
            s = np.einsum("gjp,kjp->gk", sums, coef)
            return s.T @ s
        out = np.zeros((coef.shape[0], coef.shape[0]))
        for j in range(self.n_blocks):
            a = coef[:, j]
            out += (a @ self.gram[j]) @ a.T
        return out

    def combination_block_variances(self, coef) -> np.ndarray:
        """``sum_{i in block} psi_i**2`` (blocks x rows) of the combinations."""
        out = np.empty((self.n_blocks, coef.shape[0]))
        for j in range(self.n_blocks):
            a = coef[:, j]
            out[j] = np.einsum("kp,kp->k", a @ self.gram[j], a)
        return out

    def dense(self) -> np.ndarray:
        """The full units x cells matrix (for tests and small designs)."""
        return reference_psi(self.rows, self.w, self.starts, self.k, self.cs, self.ref,
                             self.idx, self.tau, self.kappa, self.n_times)


def reference_psi(rows, w, starts, k, cs, ref, idx, tau, kappa, n_times) -> np.ndarray:
    """Dense units x cells influence functions, row by row in plain numpy (the tests'
    oracle of every quantity above)."""
    n_units = w.size
    n_blocks = starts.size - 1
    block = np.repeat(np.arange(n_blocks), np.diff(starts))
    feats = np.zeros((n_units, 2 * n_times + 2))
    feats[rows.unit, rows.time] = w[rows.unit] * rows.y
    feats[rows.unit, n_times + rows.time] = w[rows.unit]
    psi = np.zeros((n_units, k.size))
    for c in range(k.size):
        if ref[c]:
            continue
        treated = block == k[c]
        control = (block >= cs[c]) & ~treated
        psi[treated, c] = feats[treated][:, idx[c]] @ tau[c]
        psi[control, c] = feats[control][:, idx[c]] @ kappa[c]
    return psi
