"""The balanced route without covariates: influence functions held as per-cohort moments.

On a balanced panel without covariates the influence function of a cell is linear in the
units' outcome paths: ``w_i (d_i - mu_1) / W_1`` on the cell's cohort and
``-w_i (d_i - mu_0) / W_0`` on its controls, ``d_i`` the outcome change from the base
period (see :mod:`didmem.inference.kernels`). So the estimates and variances come from one
numba pass over the units (:func:`~didmem.inference.kernels.cell_statistics`); a bootstrap
draw from per-block sums of ``U_i w_i y_i`` and ``U_i w_i`` (one matrix product per block
and chunk of draws, :func:`~didmem.inference.kernels.cell_draws`); an aggregation's
influence functions from per-block coefficients; the pre-test's covariance from per-block
Gram matrices. No units x cells matrix is ever formed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from . import kernels
from .influence import CellInfluence

__all__ = ["GroupedInfluence", "grouped_influence", "bootstrap_cells"]


def grouped_influence(prepared, cells) -> "GroupedInfluence":
    """The cells of a balanced design without covariates: estimates, variances (of cluster
    sums with clusters) and the means and weights their influence functions need."""
    clusters = prepared.clusters if prepared.clusters is not None else np.zeros(1, dtype=np.int64)
    att, var, mu1, mu0, w1, w0 = kernels.cell_statistics(
        prepared.y, prepared.w, prepared.starts, *cells.kernel_args(), clusters, prepared.n_clusters)
    return GroupedInfluence(prepared, cells, {"mu1": mu1, "mu0": mu0, "w1": w1, "w0": w0},
                            att=att, var=var)


def bootstrap_cells(prepared, cells, stats, *, n_draws: int, multiplier: str, rng,
                    multipliers=None):
    """The bootstrap of a balanced design's cells from their grouped statistics."""
    return GroupedInfluence(prepared, cells, stats).bootstrap(
        n_draws, multiplier, rng, prepared.clusters, prepared.n_clusters, multipliers=multipliers)


@dataclass(frozen=True, eq=False)
class GroupedInfluence(CellInfluence):
    """The cells' influence functions on a balanced design without covariates, held as the
    cells' grouped statistics (see the module notes).

    Attributes
    ----------
    design, cells
        The prepared panel (``y`` a dense units x times matrix) and the cell layout.
    stats : mapping
        ``mu1, mu0, w1, w0``: each cell's treated and control mean change and weight.
    att, var : ndarray, optional
        The estimates and ``sum_i psi_i**2`` (of cluster sums with the design's clusters),
        from :func:`grouped_influence`; None when only the bootstrap or the combinations
        are asked for.
    """

    prepared: Any
    cells: Any
    stats: Mapping[str, np.ndarray]
    att: np.ndarray | None = field(default=None, repr=False)
    var: np.ndarray | None = field(default=None, repr=False)

    cohort_moments = True

    @property
    def n_cells(self) -> int:
        return int(self.cells.size)

    @property
    def estimates(self) -> np.ndarray:
        return self.att

    def variance(self, clusters=None, n_clusters: int = 0) -> np.ndarray:
        if n_clusters == self.prepared.n_clusters and self.var is not None:
            return self.var.copy()
        clusters = clusters if clusters is not None else np.zeros(1, dtype=np.int64)
        return kernels.cell_statistics(self.prepared.y, self.prepared.w, self.prepared.starts,
                                       *self.cells.kernel_args(), clusters, n_clusters)[1]

    def treated_variance(self) -> np.ndarray:
        """``sum_{i in g} psi_i**2`` with ``psi_i = w_i (d_i - mu_1) / W_1``."""
        prepared, cells, stats = self.prepared, self.cells, self.stats
        out = np.zeros(cells.size)
        for k in range(prepared.n_cohorts):
            sel = np.flatnonzero((cells.k == k) & (cells.ref == 0))
            if sel.size == 0:
                continue
            lo, hi = prepared.starts[k], prepared.starts[k + 1]
            y = prepared.y[lo:hi]
            base = np.where(cells.b[sel] >= 0, y[:, np.maximum(cells.b[sel], 0)], 0.0)
            change = y[:, cells.t[sel]] - base
            psi = prepared.w[lo:hi, None] * (change - stats["mu1"][sel]) / stats["w1"][sel]
            out[sel] = np.einsum("ij,ij->j", psi, psi)
        return out

    # ------------------------------------------------------------------ bootstrap
    def chunk_drawer(self, multipliers, clusters, n_clusters: int) -> Callable:
        """Per chunk: the grouped sums of ``U_i (w_i y_i, w_i, 1)`` per block (one matrix
        product each), then every cell's draw from them in the numba kernel."""
        prepared, cells, stats = self.prepared, self.cells, self.stats
        n, n_t = prepared.y.shape
        n_blocks = prepared.starts.size - 1
        # columns: w*y (times), w, 1 -> one matrix product per block gives every grouped sum
        features = np.empty((n, n_t + 2))
        features[:, :n_t] = prepared.y * prepared.w[:, None]
        features[:, n_t] = prepared.w
        features[:, n_t + 1] = 1.0
        never_only = bool(np.all(cells.cs == n_blocks - 1))
        sums = np.empty((n_blocks, multipliers.chunk, n_t + 2))

        def draw(row0, weights, out):
            m = weights.shape[0]
            if clusters is not None:
                weights = weights[:, clusters]
            part = sums[:, :m]
            for k in range(n_blocks):
                lo, hi = prepared.starts[k], prepared.starts[k + 1]
                np.matmul(weights[:, lo:hi], features[lo:hi], out=part[k])
            by_draw = np.ascontiguousarray(part.transpose(1, 0, 2))
            if never_only:  # controls are the never-treated block alone: no suffix sums
                suffix = by_draw
            else:
                suffix = np.ascontiguousarray(np.cumsum(by_draw[:, ::-1], axis=1)[:, ::-1])
            kernels.cell_draws(by_draw, suffix, *cells.kernel_args(), stats["mu1"],
                               stats["mu0"], stats["w1"], stats["w0"], out.cells, row0)
            out.block_weights[row0:row0 + m] = by_draw[:, :, n_t]
            out.total[row0:row0 + m] = by_draw[:, :, n_t + 1].sum(axis=1)

        return draw

    # ------------------------------------------------------------------ combinations
    def combination_psi(self, weights, omega) -> np.ndarray:
        """From per-block coefficients of ``y_i`` and ``1`` and one matrix product per
        block, formed only for the rows whose cells use the block."""
        prepared, cells, stats = self.prepared, self.cells, self.stats
        csc = weights.tocsc()
        n, n_time = prepared.y.shape
        n_keys, k = csc.shape[0], prepared.n_cohorts
        coef, beta = kernels.aggregate_coefficients(
            *cells.kernel_args(), stats["mu1"], stats["mu0"], stats["w1"], stats["w0"],
            csc.indptr.astype(np.int64), csc.indices.astype(np.int64), csc.data, n_keys,
            prepared.starts.size - 1, n_time,
        )
        beta[:k] += omega.T / n  # estimated-weights term: omega_g w_i / n on cohort g's units
        # a block enters only the keys whose cells use it (a cohort's own keys, the
        # controls'): its units' other columns are 0, and the product is formed for the
        # active columns only
        active = (coef != 0).any(axis=1) | (beta != 0)
        psi = np.zeros((n, n_keys))
        for j in range(prepared.starts.size - 1):
            lo, hi = prepared.starts[j], prepared.starts[j + 1]
            w = prepared.w[lo:hi, None]
            cols = np.flatnonzero(active[j])
            if cols.size == n_keys:
                psi[lo:hi] = w * (prepared.y[lo:hi] @ coef[j] + beta[j])
            elif cols.size:
                psi[lo:hi, cols] = w * (prepared.y[lo:hi] @ coef[j][:, cols] + beta[j, cols])
        psi -= (omega @ prepared.cohort_shares)[None, :] / n
        return psi

    def combine(self, matrix) -> np.ndarray:
        """``psi @ matrix.T``: the combinations without the estimated-weights term."""
        from scipy import sparse

        matrix = sparse.csr_matrix(matrix)
        return self.combination_psi(matrix, np.zeros((matrix.shape[0], self.prepared.n_cohorts)))

    def covariance(self, which: np.ndarray) -> np.ndarray:
        """From per-block Gram matrices of ``(y_i, 1)`` weighted by ``w_i**2``: O(units x
        times**2) once plus O(1) per pair of cells."""
        prepared, cells, stats = self.prepared, self.cells, self.stats
        z = np.concatenate([prepared.y, np.ones((prepared.n_units, 1))], axis=1)
        zw = z * prepared.w[:, None]
        n_blocks = prepared.starts.size - 1
        gram = np.empty((n_blocks, z.shape[1], z.shape[1]))
        for b in range(n_blocks):
            lo, hi = prepared.starts[b], prepared.starts[b + 1]
            gram[b] = zw[lo:hi].T @ zw[lo:hi]
        suffix = np.ascontiguousarray(np.cumsum(gram[::-1], axis=0)[::-1])
        return kernels.pretest_covariance(
            gram, suffix, cells.k[which], cells.t[which], cells.b[which], cells.cs[which],
            stats["mu1"][which], stats["mu0"][which], stats["w1"][which], stats["w0"][which],
        )

    def cluster_psi(self, clusters, n_clusters: int) -> np.ndarray:
        sums = np.zeros((n_clusters, self.n_cells))
        np.add.at(sums, clusters, self.dense())
        return sums

    def dense(self) -> np.ndarray:
        from scipy import sparse

        return self.combine(sparse.identity(self.n_cells, format="csr"))
