"""The k-th exposure's influence functions, computed once and only when asked, and a
bootstrap from grouped sums.

:class:`ExposureInfluence` is what the generic inference route reads of a fit of the k-th
exposure (:mod:`._exposure`). A fit needs only the cells' variances, their treated parts
(the small-sample correction) and the bootstrap draws, and none of them needs the explicit
units x cells influence functions: the variances are sums of squares the cell kernel
accumulates as it goes, and every cell's draw is linear in sums of ``U_i w_i y_i`` and
``U_i w_i`` by block, by (block, history) and over a history's control blocks
(:func:`._exposure_kernel.exposure_draws`). The stored influence functions
(:class:`~didmem.inference.influence.CellInfluence`, several hundred MB at the paper's
scale, since every unit without a k-th exposure enters every cell) are built the first time
an aggregation, a covariance or a clustered variance asks for them, then kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from .._arrays import PicklableProxies
from ..inference.bootstrap import BootstrapDraws, draw_multipliers
from ..inference.influence import CellInfluence, cell_layout
from ._exposure_kernel import (exposure_cells_kernel, exposure_draws, group_weight_sums,
                               never_control_draws)

__all__ = ["ExposureInfluence"]

_CHUNK_ELEMENTS = 2_000_000  # multipliers held at once (16 MB), as the first exposure's
_SUMS_BYTES = 200_000_000  # the control groups' sums held at once


@dataclass(frozen=True, eq=False)
class ExposureInfluence(PicklableProxies):
    """Influence functions of the k-th exposure's cells (see the module notes).

    Attributes
    ----------
    y, w, starts : ndarray
        The design's outcomes (units x times), weights and block starts, in its row order.
    hist : ndarray of int
        Each row's history code (``n_hist`` codes).
    cells : Cells
        The cell layout.
    att, w1 : ndarray
        Each cell's estimate and treated weight.
    mu0h, w0h : ndarray (cells x histories)
        Each cell's control mean and control weight per treated history.
    var_treated, var_control : ndarray
        Sums of the squared influence values of each cell's treated and controls.
    """

    y: np.ndarray = field(repr=False)
    w: np.ndarray = field(repr=False)
    starts: np.ndarray = field(repr=False)
    hist: np.ndarray = field(repr=False)
    n_hist: int
    cells: object = field(repr=False)
    att: np.ndarray = field(repr=False)
    w1: np.ndarray = field(repr=False)
    mu0h: np.ndarray = field(repr=False)
    w0h: np.ndarray = field(repr=False)
    var_treated: np.ndarray = field(repr=False)
    var_control: np.ndarray = field(repr=False)

    @classmethod
    def build(cls, design, cells, hist, n_hist):
        """Run the cell kernel without storing influence values.

        Returns ``influence, stats, n_control, missing`` (see
        :func:`._exposure_kernel.exposure_cells_kernel`).
        """
        n_blocks = design.starts.size - 1
        hist_mu0 = np.zeros((cells.size, n_hist))
        hist_w0 = np.zeros((cells.size, n_hist))
        var_treated = np.zeros(cells.size)
        var_control = np.zeros(cells.size)
        att, mu1, mu0, w1, w0, n_control, missing = exposure_cells_kernel(
            design.y, design.w, design.starts, hist, n_hist, *cells.kernel_args(),
            np.zeros((cells.size, n_blocks), dtype=np.int64),
            np.zeros(n_blocks + 1, dtype=np.int64), np.zeros(0), hist_mu0, hist_w0,
            var_treated, var_control, False)
        influence = cls(y=design.y, w=design.w, starts=design.starts, hist=hist,
                        n_hist=n_hist, cells=cells, att=att, w1=w1, mu0h=hist_mu0,
                        w0h=hist_w0, var_treated=var_treated, var_control=var_control)
        stats = {"mu1": mu1, "mu0": mu0, "w1": w1, "w0": w0}
        return influence, stats, n_control, missing

    # ------------------------------------------------------------ stored values
    @property
    def stored(self) -> CellInfluence:
        """The explicit influence functions, built on first use and kept."""
        return self._memo("stored", self._store)

    def _store(self) -> CellInfluence:
        n_blocks = self.starts.size - 1
        cols, pos = cell_layout(self.cells, n_blocks)
        sizes = np.diff(self.starts) * np.array([c.size for c in cols])
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        flat = np.zeros(int(offsets[-1]))
        exposure_cells_kernel(self.y, self.w, self.starts, self.hist, self.n_hist,
                              *self.cells.kernel_args(), pos, offsets, flat,
                              np.zeros_like(self.mu0h), np.zeros_like(self.w0h),
                              np.zeros(self.cells.size), np.zeros(self.cells.size), True)
        values = tuple(flat[offsets[j]:offsets[j + 1]].reshape(cols[j].size, -1)
                       for j in range(n_blocks))
        return CellInfluence(self.starts, tuple(cols), values, self.cells.size)

    @property
    def n_cells(self) -> int:
        return self.cells.size

    @property
    def cols(self):
        return self.stored.cols

    @property
    def values(self):
        return self.stored.values

    @property
    def nbytes(self) -> int:
        return self.stored.nbytes

    def dense(self) -> np.ndarray:
        """The full units x cells matrix (for tests and small panels)."""
        return self.stored.dense()

    def draws(self, weights: np.ndarray) -> np.ndarray:
        """``weights @ psi`` from the stored values (see :meth:`bootstrap` for the fast way)."""
        return self.stored.draws(weights)

    def combine(self, matrix) -> np.ndarray:
        """``psi @ matrix.T`` (units x keys), from the stored values."""
        return self.stored.combine(matrix)

    def covariance(self, which: np.ndarray) -> np.ndarray:
        """``psi[:, which].T @ psi[:, which]``, from the stored values."""
        return self.stored.covariance(which)

    def variance(self, clusters=None, n_clusters: int = 0) -> np.ndarray:
        """``sum_i psi_ic**2`` per cell from the kernel's sums (of cluster sums, from the
        stored values, when ``n_clusters > 0``)."""
        if n_clusters:
            return self.stored.variance(clusters, n_clusters)
        return self.var_treated + self.var_control

    def treated_variance(self) -> np.ndarray:
        """The treated cohort's part of every cell's variance (the Welch correction's)."""
        return self.var_treated.copy()

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
        n_hist = self.n_hist
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
        return (order, group_starts, group_block, group_hist, group_start_of_block, control,
                control_of_group, next_control, w1h)

    def _bootstrap(self, n_draws, multiplier, rng, clusters, n_clusters):
        (order, group_starts, group_block, group_hist, group_start_of_block, control,
         control_of_group, next_control, w1h) = self._layout()
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
        live = self.cells.ref == 0
        # never-treated controls: one control block, the same controls for every cell
        never_only = bool(np.all(self.cells.cs[live] == n_blocks - 1))
        out = np.empty((n_draws, self.n_cells))
        block_weights = np.empty((n_draws, n_blocks))
        total = np.empty(n_draws)
        for row0 in range(0, n_draws, chunk):
            m = min(chunk, n_draws - row0)
            weights = draw_multipliers(rng, m, n_weights, multiplier)
            if n_clusters:
                weights = weights[:, clusters]
            weights = np.ascontiguousarray(weights[:, order])
            sums = np.empty((control.size, m, n_t + 2))
            for q in range(control.size):
                lo, hi = control_starts[q], control_ends[q]
                np.matmul(weights[:, lo:hi], features[lo:hi], out=sums[q])
            block_sums = np.empty((n_blocks, m, n_t + 2))
            for j in range(n_blocks):
                if never_only and j == n_blocks - 1:  # the control groups' sums add up to it
                    np.sum(sums, axis=0, out=block_sums[j])
                    continue
                lo, hi = self.starts[j], self.starts[j + 1]
                np.matmul(weights[:, lo:hi], features[lo:hi], out=block_sums[j])
            block_sums = np.ascontiguousarray(block_sums.transpose(1, 0, 2))
            group_w = np.empty((m, group_hist.size))
            group_weight_sums(weights, w_sorted, group_starts, group_w)
            if never_only:
                self._never_draws(block_sums, group_w, sums, group_block, group_hist, control,
                                  w1h, out, row0)
            else:
                suffix = sums.copy()
                for groups in by_history:
                    for a, b in zip(groups[:-1], groups[1:]):
                        suffix[b] += suffix[a]
                exposure_draws(block_sums, group_w, sums, suffix,
                               group_start_of_block, group_hist, control_of_group,
                               next_control, *self.cells.kernel_args(), self.att, self.w1,
                               self.mu0h, self.w0h, w1h, out, row0)
            block_weights[row0:row0 + m] = block_sums[:, :, n_t]
            total[row0:row0 + m] = block_sums[:, :, n_t + 1].sum(axis=1)
        return BootstrapDraws(out, block_weights, total, multiplier)

    def _never_draws(self, block_sums, group_w, sums, group_block, group_hist, control, w1h,
                     out, row0):
        """The draws when every cell's controls are the last block (never-treated controls).

        A history's controls and their weight ``W0_h`` are then the same for every cell, so
        the controls' part of a cell's draw, ``sum_h (W1_h / W0_h) (C_h(t) - C_h(b) - mu0_h
        C_h(w))``, is two matrix products: ``V = A C`` with ``A[k, h] = W1_{kh} / W0_h`` gives
        the first two terms of every cell of cohort ``k``, and the third joins the treated
        part's ``sum_h mu0_h S_{kh}(w)`` in one product per cohort with the cells' ``mu0_h``.
        """
        m, n_blocks, n_p = block_sums.shape
        n_t = n_p - 2
        k, t, b = self.cells.k, self.cells.t, self.cells.b
        ch = np.zeros((m, self.n_hist, n_p))  # the controls' sums by history
        ch[:, group_hist[control]] = sums.transpose(1, 0, 2)
        w0 = w1h[-1]  # the weight of each history's controls (the last block's units)
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.where((w1h > 0) & (w0 > 0), w1h / w0, 0.0)  # blocks x histories
        v = np.matmul(a, ch)  # draws x blocks x (times + 2)
        hw = np.zeros((m, n_blocks, self.n_hist))  # treated weight sums by (block, history)
        hw[:, group_block, group_hist] = group_w
        g = np.zeros((m, self.n_cells))
        for j, mine, mu0h in self._memo("by_cohort", self._by_cohort):
            g[:, mine] = (hw[:, j, :] - a[j] * ch[:, :, n_t]) @ mu0h
        never_control_draws(block_sums, v, g, k, t, b, self.cells.ref, self.att, self.w1, out,
                            row0)

    def _by_cohort(self):
        """For each treated block: its cells and their control means (histories x cells)."""
        out = []
        for j in range(self.starts.size - 2):
            mine = np.flatnonzero(self.cells.k == j)
            if mine.size:
                out.append((j, mine, np.ascontiguousarray(self.mu0h[mine].T)))
        return out
