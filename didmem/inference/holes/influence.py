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
dense matrix for the tests. The numba kernels live in :mod:`didmem.inference.holes.kernels`,
the small-sample (Welch) parts of the variances in :mod:`didmem.inference.holes.welch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from ...errors import EstimationError
from ..prepared import HoleRows, _fmt
from ..bootstrap import _CHUNK_ELEMENTS, MultiplierChunks
from .kernels import (_cell_draws, _combination_coefficients, _pair_diagonal,
                      _pair_matrix, _rademacher_sums, _sparse_gram, _sparse_sums)
from .welch import HolesWelchGroups
from ..influence import CellInfluence

__all__ = ["HoleRows", "HolesInfluence", "hole_cells", "check_hole_cells", "reference_psi"]

_DENSE_LIMIT = 40_000_000  # features held as a dense units x P matrix up to 320 MB


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
class HolesInfluence(HolesWelchGroups, CellInfluence):
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
