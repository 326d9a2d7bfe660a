"""The k-th exposure's influence functions, with a bootstrap from grouped sums.

:class:`ExposureInfluence` keeps the explicit influence functions of
:class:`~didmem.inference.influence.CellInfluence` (the analytic variance, the small-sample
correction, aggregations and pre-tests read them) but draws the multiplier bootstrap
without multiplying the draws by them: every cell's draw is linear in sums of ``U_i w_i
y_i`` and ``U_i w_i`` by block, by (block, history) and over the history's control
blocks (:func:`._exposure_kernel.exposure_draws`). Its work is one pass over the data per
batch of draws, as for the first exposure, instead of the product of the draws with every
cell's stored controls (the product with the units without a k-th exposure, which enter
every cell, dominated the second exposure's fit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from ..inference.bootstrap import BootstrapDraws, draw_multipliers
from ..inference.influence import CellInfluence
from ._exposure_kernel import exposure_draws, group_weight_sums

__all__ = ["ExposureInfluence"]

_CHUNK_ELEMENTS = 2_000_000  # multipliers held at once (16 MB), as the first exposure's
_SUMS_BYTES = 200_000_000  # the control groups' sums held at once


@dataclass(frozen=True)
class ExposureInfluence(CellInfluence):
    """Influence functions of the k-th exposure's cells and what their bootstrap needs.

    Attributes (beyond :class:`~didmem.inference.influence.CellInfluence`'s)
    ----------------------------------------------------------------------
    y, w : ndarray
        The design's outcomes (units x times) and weights, in its row order.
    hist : ndarray of int
        Each row's history code.
    cells : Cells
        The cell layout.
    att, w1 : ndarray
        Each cell's estimate and treated weight.
    mu0h, w0h : ndarray (cells x histories)
        Each cell's control mean and control weight per treated history.
    """

    y: np.ndarray = field(default=None, repr=False)
    w: np.ndarray = field(default=None, repr=False)
    hist: np.ndarray = field(default=None, repr=False)
    cells: object = field(default=None, repr=False)
    att: np.ndarray = field(default=None, repr=False)
    w1: np.ndarray = field(default=None, repr=False)
    mu0h: np.ndarray = field(default=None, repr=False)
    w0h: np.ndarray = field(default=None, repr=False)

    def bootstrap(self, n_draws: int, multiplier: str, rng, clusters=None,
                  n_clusters: int = 0) -> BootstrapDraws:
        """The multiplier bootstrap of every cell from grouped sums.

        The weights are drawn exactly as :func:`~didmem.inference.bootstrap.
        bootstrap_influence` draws them (per unit, or per cluster and shared by its units),
        so a seed gives the same draws as the product with the stored influence functions,
        to rounding. BLAS runs on one thread (many small products, as on the first exposure).
        """
        with threadpool_limits(limits=1, user_api="blas"):
            return self._bootstrap(n_draws, multiplier, rng, clusters, n_clusters)

    def _layout(self):
        """Rows sorted by (block, history), and the groups' index tables."""
        starts = self.starts
        n_blocks = starts.size - 1
        n_hist = int(self.hist.max()) + 1 if self.hist.size else 1
        block = np.repeat(np.arange(n_blocks), np.diff(starts))
        order = np.lexsort((self.hist, block))
        key = block[order] * n_hist + self.hist[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        group_starts = np.r_[first, key.size].astype(np.int64)
        group_block = block[order][first]
        group_hist = np.ascontiguousarray(self.hist[order][first], dtype=np.int64)
        group_start_of_block = np.searchsorted(group_block, np.arange(n_blocks + 1)).astype(
            np.int64)
        live = self.cells.ref == 0
        first_control = int(self.cells.cs[live].min()) if live.any() else n_blocks
        control = np.flatnonzero(group_block >= first_control)
        control_of_group = np.full(group_block.size, -1, dtype=np.int64)
        control_of_group[control] = np.arange(control.size)
        next_control = np.full((n_hist, n_blocks + 1), -1, dtype=np.int64)
        for q in control[::-1]:  # the first control group of each history at or after j
            next_control[group_hist[q], : group_block[q] + 1] = control_of_group[q]
        w1h = np.zeros((n_blocks, n_hist))
        np.add.at(w1h, (block, self.hist), self.w)
        return (order, group_starts, group_hist, group_start_of_block, control,
                control_of_group, next_control, w1h)

    def _bootstrap(self, n_draws, multiplier, rng, clusters, n_clusters):
        (order, group_starts, group_hist, group_start_of_block, control, control_of_group,
         next_control, w1h) = self._layout()
        n, n_t = self.y.shape
        n_blocks = self.starts.size - 1
        features = np.empty((n, n_t + 2))
        features[:, :n_t] = self.y[order] * self.w[order, None]
        features[:, n_t] = self.w[order]
        features[:, n_t + 1] = 1.0
        w_sorted = np.ascontiguousarray(self.w[order])
        control_starts = group_starts[control]
        control_ends = group_starts[control + 1]
        # the control groups of one history, later blocks first (for the suffix sums)
        by_history = [control_of_group[control[group_hist[control] == h]][::-1]
                      for h in range(next_control.shape[0])]
        n_weights = n_clusters or n
        chunk = max(1, min(n_draws, _CHUNK_ELEMENTS // max(n_weights, 1),
                           _SUMS_BYTES // (16 * max(control.size, 1) * (n_t + 2))))
        out = np.empty((n_draws, self.n_cells))
        block_weights = np.empty((n_draws, n_blocks))
        total = np.empty(n_draws)
        for row0 in range(0, n_draws, chunk):
            m = min(chunk, n_draws - row0)
            weights = draw_multipliers(rng, m, n_weights, multiplier)
            if n_clusters:
                weights = weights[:, clusters]
            weights = np.ascontiguousarray(weights[:, order])
            block_sums = np.empty((n_blocks, m, n_t + 2))
            for j in range(n_blocks):
                lo, hi = self.starts[j], self.starts[j + 1]
                np.matmul(weights[:, lo:hi], features[lo:hi], out=block_sums[j])
            block_sums = np.ascontiguousarray(block_sums.transpose(1, 0, 2))
            group_w = np.empty((m, group_hist.size))
            group_weight_sums(weights, w_sorted, group_starts, group_w)
            sums = np.empty((control.size, m, n_t + 2))
            for q in range(control.size):
                lo, hi = control_starts[q], control_ends[q]
                np.matmul(weights[:, lo:hi], features[lo:hi], out=sums[q])
            suffix = sums.copy()
            for groups in by_history:
                for a, b in zip(groups[:-1], groups[1:]):
                    suffix[b] += suffix[a]
            exposure_draws(block_sums, group_w, np.ascontiguousarray(sums.transpose(1, 0, 2)),
                           np.ascontiguousarray(suffix.transpose(1, 0, 2)),
                           group_start_of_block, group_hist, control_of_group, next_control,
                           *self.cells.kernel_args(), self.att, self.w1, self.mu0h, self.w0h,
                           w1h, out, row0)
            block_weights[row0:row0 + m] = block_sums[:, :, n_t]
            total[row0:row0 + m] = block_sums[:, :, n_t + 1].sum(axis=1)
        return BootstrapDraws(out, block_weights, total, multiplier)
