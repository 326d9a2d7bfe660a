r"""The influence functions of the k-th exposure's cells, held lazily, and their bootstrap.

A fit needs the cells' variances and the bootstrap draws; only aggregations, pre-tests and
clustered variances need the per-unit influence functions themselves. :class:`ExposureInfluence`
keeps what the cell kernel (:mod:`._exposure_kernel`) returns without storing ``psi`` and
builds the stored :class:`~didmem.inference.influence.CellInfluence` only on demand.

With never-treated controls (every cell's controls are the block of units without a k-th
exposure in the panel) the bootstrap runs on grouped sums, as the first exposure's: for a
multiplier draw ``U`` let, per block ``j`` and history ``h``,
``SY_j = sum_{i in j} U_i w_i y_i`` (a vector over times), ``SW_j = sum_{i in j} U_i w_i``,
``SW_jh`` its part in history ``h``, and over the control block's units of history ``h``
``E_h = sum_i U_i w_i (y_i - m_h)`` with ``m_h`` their weighted mean outcome path. With
``W1_j``, ``W1_jh`` and ``W0_h`` the treated and control weights and
``A_jh = W1_jh / (W1_j W0_h)``,

.. math:: G_j = SY_j / W1_j - \sum_h (SW_{jh} / W1_j) m_h - \sum_h A_{jh} E_h,

and the draw of cell ``(g, t)`` with base ``b`` and treated block ``k`` is
``G_k[t] - G_k[b] - tau SW_k / W1_k``: the sum ``sum_i U_i psi_i`` of the module notes of
:mod:`._exposure_kernel`, with no per-unit matrix. The cost is that of the first
exposure's bootstrap plus two products of (blocks x histories) by (histories x times) per
draw. With not-yet-treated controls each cell has its own control histories' weights; the
draws then come from the stored influence functions (:func:`~didmem.inference.bootstrap.
bootstrap_influence`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from .._arrays import PicklableProxies
from ..inference.bootstrap import (_CHUNK_ELEMENTS, BootstrapDraws, bootstrap_influence,
                                   draw_multipliers)
from ..inference.influence import CellInfluence, cell_layout
from ._exposure_kernel import exposure_cells_kernel

__all__ = ["ExposureInfluence", "exposure_cells"]


def exposure_cells(design, cells, hist, n_hist, *, store: bool):
    """Run the cell kernel; with ``store`` also return the stored influence functions."""
    n_blocks = design.starts.size - 1
    cols, pos = cell_layout(cells, n_blocks)
    offsets = np.zeros(n_blocks + 1, dtype=np.int64)
    if store:
        sizes = np.diff(design.starts) * np.array([c.size for c in cols])
        offsets[1:] = np.cumsum(sizes)
    flat = np.zeros(int(offsets[-1]))
    out = exposure_cells_kernel(design.y, design.w, design.starts, hist, n_hist,
                                *cells.kernel_args(), pos, offsets, flat, store)
    influence = None
    if store:
        values = tuple(flat[offsets[j]:offsets[j + 1]].reshape(cols[j].size, -1)
                       for j in range(n_blocks))
        influence = CellInfluence(design.starts, tuple(cols), values, cells.size)
    return out, influence


@dataclass(frozen=True, eq=False)
class ExposureInfluence(PicklableProxies):
    """The k-th exposure's cell influence functions: variances now, ``psi`` on demand.

    It offers what the generic inference route asks of
    :class:`~didmem.inference.influence.CellInfluence` (variances, draws, combinations,
    covariances, the treated part of the variances) and a :meth:`bootstrap` of its own.

    Attributes
    ----------
    design, cells
        The prepared design (units in block order) and the cell layout.
    hist : ndarray of int
        History code of every design row.
    n_hist : int
    att, var, treated_var : ndarray
        The cells' estimates, ``sum_i psi_i**2`` (unclustered) and its treated part.
    """

    design: Any
    cells: Any
    hist: np.ndarray
    n_hist: int
    att: np.ndarray
    var: np.ndarray
    treated_var: np.ndarray

    # ------------------------------------------------------------ stored psi, on demand
    def stored(self) -> CellInfluence:
        """The per-unit influence functions (computed once, on first use)."""
        return self._memo("psi", lambda: exposure_cells(
            self.design, self.cells, self.hist, self.n_hist, store=True)[1])

    @property
    def n_cells(self) -> int:
        return int(self.cells.size)

    @property
    def nbytes(self) -> int:
        return int(self.var.nbytes + self.treated_var.nbytes + self.hist.nbytes)

    def variance(self, clusters=None, n_clusters: int = 0) -> np.ndarray:
        """``sum_i psi_ic**2`` per cell, or of cluster sums when ``n_clusters > 0``."""
        if n_clusters:
            return self.stored().variance(clusters, n_clusters)
        return self.var.copy()

    def treated_variance(self) -> np.ndarray:
        """The treated cohort's part ``sum_{i in g} psi_i**2`` of every cell's variance."""
        return self.treated_var.copy()

    def draws(self, weights: np.ndarray) -> np.ndarray:
        return self.stored().draws(weights)

    def combine(self, matrix) -> np.ndarray:
        return self.stored().combine(matrix)

    def covariance(self, which: np.ndarray) -> np.ndarray:
        return self.stored().covariance(which)

    def dense(self) -> np.ndarray:
        return self.stored().dense()

    # ------------------------------------------------------------ bootstrap
    @property
    def grouped(self) -> bool:
        """Whether every live cell's controls are the last block alone (never-treated)."""
        last = self.design.starts.size - 2
        live = self.cells.ref == 0
        return bool(np.all(self.cells.cs[live] == last) and np.all(self.cells.k[live] < last))

    def bootstrap(self, n_draws: int, multiplier: str, rng, clusters=None,
                  n_clusters: int = 0) -> BootstrapDraws:
        """The multiplier bootstrap of every cell: grouped sums with never-treated controls
        (see the module notes), else products with the stored influence functions. Both
        draw the same multipliers in the same chunks, so they agree to rounding."""
        if not self.grouped:
            return bootstrap_influence(self.design, self, n_draws=n_draws,
                                       multiplier=multiplier, rng=rng)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):  # many small products
            return self._grouped_bootstrap(n_draws, multiplier, rng)

    def _grouped_bootstrap(self, n_draws, multiplier, rng) -> BootstrapDraws:
        design, cells = self.design, self.cells
        n = design.n_units
        starts, w = design.starts, design.w
        n_blocks = starts.size - 1
        last = n_blocks - 1
        h_count = self.n_hist
        block = np.repeat(np.arange(n_blocks), np.diff(starts))
        weight = sparse.csr_matrix((w, (block * h_count + self.hist, np.arange(n))),
                                   shape=(n_blocks * h_count, n))
        by_block = np.asarray(weight.sum(axis=1)).reshape(n_blocks, h_count)
        w1 = by_block[:last].sum(axis=1)
        w0h = by_block[last]
        # the control block's units sorted by history, their outcomes centred on its mean
        lo_c = starts[last]
        order = lo_c + np.argsort(self.hist[lo_c:], kind="stable")
        bounds = np.searchsorted(self.hist[order], np.arange(h_count + 1))
        wy = design.y * w[:, None]
        mean = np.zeros((h_count, design.y.shape[1]))
        for h in np.flatnonzero(w0h > 0):
            rows = order[bounds[h]:bounds[h + 1]]
            mean[h] = wy[rows].sum(axis=0) / w0h[h]
        centred = wy[order] - w[order, None] * mean[self.hist[order]]
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.where(by_block[:last] > 0, by_block[:last] / (w1[:, None] * w0h[None, :]), 0.0)
        live = np.flatnonzero(cells.ref == 0)
        k, t, b = cells.k[live], cells.t[live], cells.b[live]
        slope = self.att[live] / w1[k]
        out = np.zeros((n_draws, cells.size))
        block_weights = np.empty((n_draws, n_blocks))
        total = np.empty(n_draws)
        chunk = max(1, min(n_draws, _CHUNK_ELEMENTS // max(n, 1)))  # as bootstrap_influence
        n_weights = design.n_clusters if design.clusters is not None else n
        for row0 in range(0, n_draws, chunk):
            m = min(chunk, n_draws - row0)
            u = draw_multipliers(rng, m, n_weights, multiplier)
            if design.clusters is not None:
                u = u[:, design.clusters]
            sw_h = np.asarray(weight @ u.T).T.reshape(m, n_blocks, h_count)
            sy = np.empty((m, last, design.y.shape[1]))
            for j in range(last):
                np.matmul(u[:, starts[j]:starts[j + 1]], wy[starts[j]:starts[j + 1]], out=sy[:, j])
            u_c = u[:, order]
            e = np.zeros((m, h_count, design.y.shape[1]))
            for h in np.flatnonzero(bounds[1:] > bounds[:-1]):
                e[:, h] = u_c[:, bounds[h]:bounds[h + 1]] @ centred[bounds[h]:bounds[h + 1]]
            g = sy / w1[None, :, None] - np.matmul(sw_h[:, :last] / w1[None, :, None], mean)
            g -= np.matmul(a, e)
            sw = sw_h.sum(axis=2)
            out[row0:row0 + m, live] = g[:, k, t] - g[:, k, b] - sw[:, k] * slope[None, :]
            block_weights[row0:row0 + m] = sw
            total[row0:row0 + m] = u.sum(axis=1)
        return BootstrapDraws(out, block_weights, total, multiplier)
