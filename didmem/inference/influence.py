"""The generic inference route: explicit per-unit influence functions of the cells.

With covariates a cell's influence function is no longer linear in cohort means (the
nuisance models enter it), so the grouped-sum route of :mod:`didmem.inference.bootstrap`
does not apply. This module stores ``psi`` (units x cells) explicitly, but only where it
can be non-zero: the units of a block (cohort) enter a cell only as its treated cohort or
among its controls. For every block ``j`` it keeps the cells that involve the block and a
dense ``m_j x n_j`` matrix of their influence values (one contiguous row per cell, so that
the per-cell kernel writes each cell's values in one run).

Memory: 8 bytes per (unit, cell) pair in which the unit is treated or a control. With
never-treated controls that is ``n_cells x (cohort size + never-treated)``: at the paper's
scale (95 cohorts x 150 units, 2,000 never-treated, 96 periods, 9,025 cells) about 155 MB;
with not-yet-treated controls each cell also holds the later cohorts, up to about 0.7 GB.

Every inference quantity is a product with this matrix:

* analytic variance of cell ``c``: ``sum_i psi_ic**2`` (or of cluster sums);
* bootstrap draws: ``U @ psi`` for a multiplier matrix ``U`` (draws x units), block by block;
* influence functions of linear combinations ``L`` (keys x cells): ``psi @ L.T``;
* covariance of cells (the pre-test): ``psi.T @ psi``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

__all__ = ["CellInfluence", "cell_layout"]


def cell_layout(cells, n_blocks: int):
    """For every block, the cells whose influence function involves its units.

    Returns ``cols`` (per block, ascending cell indices) and ``pos`` (n_cells x n_blocks,
    the column of cell ``c`` in block ``j``'s matrix, -1 where it does not involve ``j``).
    Reference cells (fixed at 0) involve no block.
    """
    n_cells = cells.k.size
    member = np.zeros((n_cells, n_blocks), dtype=bool)
    live = cells.ref == 0
    blocks = np.arange(n_blocks)
    member[:] = (blocks[None, :] >= cells.cs[:, None]) & live[:, None]
    member[np.arange(n_cells), cells.k] = live
    pos = np.full((n_cells, n_blocks), -1, dtype=np.int64)
    cols = []
    for j in range(n_blocks):
        idx = np.flatnonzero(member[:, j])
        pos[idx, j] = np.arange(idx.size)
        cols.append(idx)
    return cols, pos


@dataclass(frozen=True)
class CellInfluence:
    """Per-unit influence functions ``psi`` of the cells, stored block by block.

    Attributes
    ----------
    starts : ndarray (n_blocks + 1,)
        Block ``j`` holds units ``starts[j]:starts[j+1]`` (the design's row order).
    cols : tuple of ndarray
        Cells involving block ``j``.
    values : tuple of ndarray
        ``values[j][m]`` is ``psi`` of cell ``cols[j][m]`` on block ``j``'s units.
    n_cells : int
    """

    starts: np.ndarray
    cols: tuple
    values: tuple
    n_cells: int

    @property
    def nbytes(self) -> int:
        return int(sum(v.nbytes for v in self.values))

    def _blocks(self):
        for j, (cols, vals) in enumerate(zip(self.cols, self.values)):
            if cols.size:
                yield self.starts[j], self.starts[j + 1], cols, vals

    def dense(self) -> np.ndarray:
        """The full units x cells matrix (for tests and small panels)."""
        out = np.zeros((int(self.starts[-1]), self.n_cells))
        for lo, hi, cols, vals in self._blocks():
            out[lo:hi, cols] = vals.T
        return out

    def cluster_psi(self, clusters, n_clusters: int) -> np.ndarray:
        """``sum_{i in cluster} psi_ic`` (clusters x cells)."""
        sums = np.zeros((n_clusters, self.n_cells))
        for lo, hi, cols, vals in self._blocks():
            part = np.zeros((n_clusters, cols.size))
            np.add.at(part, clusters[lo:hi], vals.T)
            sums[:, cols] += part
        return sums

    def variance(self, clusters=None, n_clusters: int = 0) -> np.ndarray:
        """``sum_i psi_ic**2`` per cell, or of cluster sums when ``n_clusters > 0``."""
        if n_clusters:
            sums = self.cluster_psi(clusters, n_clusters)
            return np.einsum("ij,ij->j", sums, sums)
        var = np.zeros(self.n_cells)
        for _, _, cols, vals in self._blocks():
            var[cols] += np.einsum("ij,ij->i", vals, vals)
        return var

    def draws(self, weights: np.ndarray) -> np.ndarray:
        """``weights @ psi`` (draws x cells) for a multiplier matrix (draws x units)."""
        out = np.zeros((weights.shape[0], self.n_cells))
        for lo, hi, cols, vals in self._blocks():
            out[:, cols] += weights[:, lo:hi] @ vals.T
        return out

    def combine(self, matrix) -> np.ndarray:
        """``psi @ matrix.T`` (units x keys) for a keys x cells matrix (dense or sparse)."""
        matrix = sparse.csc_matrix(matrix)
        out = np.zeros((int(self.starts[-1]), matrix.shape[0]))
        for lo, hi, cols, vals in self._blocks():
            out[lo:hi] = (matrix[:, cols] @ vals).T
        return out

    def covariance(self, which: np.ndarray) -> np.ndarray:
        """``psi[:, which].T @ psi[:, which]`` (unclustered: the pre-test without clusters)."""
        which = np.asarray(which)
        where = np.full(self.n_cells, -1, dtype=np.int64)
        where[which] = np.arange(which.size)
        cov = np.zeros((which.size, which.size))
        for _, _, cols, vals in self._blocks():
            mine = where[cols]
            sel = mine >= 0
            if sel.any():
                sub = vals[sel]
                idx = mine[sel]
                cov[np.ix_(idx, idx)] += sub @ sub.T
        return cov
