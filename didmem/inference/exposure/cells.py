r"""The k-th exposure's route: its cells' influence functions, held lazily, and their bootstrap.

A fit needs the cells' variances and the bootstrap draws; only aggregations, pre-tests and
clustered variances need the per-unit influence functions themselves. With never-treated
controls even the cells come from sums by history (:func:`grouped_cells`: per-history
weights, mean paths and Gram matrices instead of a pass over every control unit per cell). :class:`ExposureInfluence`
keeps what the cell kernel (:mod:`.exposure.kernel`) returns without storing ``psi`` and
builds the stored :class:`~didmem.inference.influence.StoredInfluence` only on demand.

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
:mod:`.exposure.kernel`, with no per-unit matrix. The cost is that of the first
exposure's bootstrap plus two products of (blocks x histories) by (histories x times) per
draw. With not-yet-treated controls each cell has its own control histories' weights; the
draws then come from the stored influence functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from scipy import sparse

from ..._arrays import PicklableProxies
from ...errors import EstimationError
from ..influence import CellInfluence, StoredInfluence, cell_layout, unit_weight_drawer
from .kernel import exposure_cells_kernel

__all__ = ["ExposureInfluence", "check_matched", "exposure_cells", "exposure_influence",
           "grouped_cells", "history_sums", "never_only"]


def exposure_cells(prepared, cells, hist, n_hist, *, store: bool):
    """Run the cell kernel; with ``store`` also return the stored influence functions."""
    n_blocks = prepared.starts.size - 1
    cols, pos = cell_layout(cells, n_blocks)
    offsets = np.zeros(n_blocks + 1, dtype=np.int64)
    if store:
        sizes = np.diff(prepared.starts) * np.array([c.size for c in cols])
        offsets[1:] = np.cumsum(sizes)
    flat = np.zeros(int(offsets[-1]))
    out = exposure_cells_kernel(prepared.y, prepared.w, prepared.starts, hist, n_hist,
                                *cells.kernel_args(), pos, offsets, flat, store)
    influence = None
    if store:
        values = tuple(flat[offsets[j]:offsets[j + 1]].reshape(cols[j].size, -1)
                       for j in range(n_blocks))
        influence = StoredInfluence(prepared.starts, tuple(cols), values, cells.size,
                                    prepared=prepared, cells=cells, att=out[0])
    return out, influence


def never_only(prepared, cells) -> bool:
    """Whether every live cell's controls are the last block alone (never-treated)."""
    last = prepared.starts.size - 2
    live = cells.ref == 0
    return bool(np.all(cells.cs[live] == last) and np.all(cells.k[live] < last))


@dataclass(frozen=True)
class HistorySums:
    """Weights and means by block and history, with never-treated controls (the last
    block): ``weight`` (sparse, blocks*histories x units, ``w_i`` at its group),
    ``by_block`` (blocks x histories), ``w1`` (treated blocks), ``w0h`` and ``n0h`` (the
    control block's weight and units per history), ``order``/``bounds`` (the control
    block's rows sorted by history, and where each history starts), ``mean`` (histories x
    times: the controls' weighted mean outcome) and ``a`` (``W1_jh / (W1_j W0_h)``)."""

    weight: Any
    by_block: np.ndarray
    w1: np.ndarray
    w0h: np.ndarray
    n0h: np.ndarray
    order: np.ndarray
    bounds: np.ndarray
    mean: np.ndarray
    a: np.ndarray


def history_sums(prepared, hist, *, n_hist: int, y=None) -> HistorySums:
    """The :class:`HistorySums` of a design (``y`` replaces its outcomes when given)."""
    y = prepared.y if y is None else y
    n, starts, w = prepared.n_units, prepared.starts, prepared.w
    n_blocks = starts.size - 1
    last = n_blocks - 1
    block = np.repeat(np.arange(n_blocks), np.diff(starts))
    weight = sparse.csr_matrix((w, (block * n_hist + hist, np.arange(n))),
                               shape=(n_blocks * n_hist, n))
    by_block = np.asarray(weight.sum(axis=1)).reshape(n_blocks, n_hist)
    w1, w0h = by_block[:last].sum(axis=1), by_block[last]
    lo_c = starts[last]
    order = lo_c + np.argsort(hist[lo_c:], kind="stable")
    bounds = np.searchsorted(hist[order], np.arange(n_hist + 1))
    wy = y * w[:, None]
    mean = np.zeros((n_hist, y.shape[1]))
    for h in np.flatnonzero(w0h > 0):
        mean[h] = wy[order[bounds[h]:bounds[h + 1]]].sum(axis=0) / w0h[h]
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(by_block[:last] > 0, by_block[:last] / (w1[:, None] * w0h[None, :]), 0.0)
    return HistorySums(weight, by_block, w1, w0h, np.diff(bounds), order, bounds, mean, a)


def grouped_cells(prepared, cells, hist, n_hist):
    """The cell kernel's outputs from sums by history (never-treated controls, see
    :attr:`ExposureInfluence.grouped`): ``att, mu1, mu0, w1, w0, n_control, missing, var,
    treated_var`` in O(units x times + cells x histories), not O(cells x units).

    Outcomes are first centred on each unit's mean over time, which leaves every change
    ``y_it - y_ib`` as it is and keeps the control variances (from per-history Gram
    matrices) free of the units' levels.
    """
    y = prepared.y - prepared.y.mean(axis=1, keepdims=True)
    w = prepared.w
    sums = history_sums(prepared, hist, n_hist=n_hist, y=y)
    last = prepared.starts.size - 2
    live = cells.ref == 0
    k, t, b = cells.k, cells.t, cells.b
    share = sums.by_block[:last] / sums.w1[:, None]  # treated share of each history
    treated_h = sums.by_block[:last] > 0
    missing_k = (treated_h & (sums.w0h == 0)[None, :]).sum(axis=1)
    ybar = np.vstack([(y[lo:hi] * w[lo:hi, None]).sum(axis=0) for lo, hi in
                      zip(prepared.starts[:last], prepared.starts[1:last + 1])]) / sums.w1[:, None]
    pooled = share @ sums.mean  # blocks x times: the treated-weighted control mean path
    mu1 = np.where(live, ybar[k, t] - ybar[k, b], 0.0)
    mu0 = np.where(live, pooled[k, t] - pooled[k, b], 0.0)
    att = mu1 - mu0
    centred = (y[sums.order] - sums.mean[hist[sums.order]]) * w[sums.order, None]
    gram = np.zeros((n_hist, y.shape[1], y.shape[1]))
    for h in np.flatnonzero(sums.n0h):
        part = centred[sums.bounds[h]:sums.bounds[h + 1]]
        gram[h] = part.T @ part
    q = gram[:, t, t] + gram[:, b, b] - 2.0 * gram[:, t, b]  # histories x cells
    var_control = np.einsum("ch,hc->c", sums.a[k] ** 2, q)
    treated_var = np.zeros(cells.size)
    for j in range(last):
        lo, hi = prepared.starts[j], prepared.starts[j + 1]
        mine = np.flatnonzero(live & (k == j))
        d = y[lo:hi][:, t[mine]] - y[lo:hi][:, b[mine]]
        s0 = sums.mean[hist[lo:hi]][:, t[mine]] - sums.mean[hist[lo:hi]][:, b[mine]]
        psi = w[lo:hi, None] * (d - s0 - att[mine][None, :]) / sums.w1[j]
        treated_var[mine] = np.einsum("ic,ic->c", psi, psi)
    var = np.where(live, treated_var + var_control, 0.0)
    w1 = np.where(live, sums.w1[k], 0.0)
    w0 = np.where(live, (treated_h[k] * sums.w0h[None, :]).sum(axis=1), 0.0)
    n_control = np.where(live, (treated_h[k] * sums.n0h[None, :]).sum(axis=1), 0)
    missing = np.where(live, missing_k[k], 0)
    att = np.where(missing > 0, np.nan, att)
    return att, mu1, mu0, w1, w0, n_control.astype(np.int64), missing, var, treated_var


def exposure_influence(prepared, cells, hist, n_hist: int) -> "ExposureInfluence":
    """The k-th exposure's cells on ``prepared`` with history codes ``hist``: from sums by
    history with never-treated controls, else from the cell kernel without storing ``psi``.
    Cells with a treated history without a control (``missing``) are the caller's to
    refuse."""
    if never_only(prepared, cells):  # sums by history: O(cells x histories), not x units
        att, mu1, mu0, w1, w0, n_control, missing, var, treated_var = grouped_cells(
            prepared, cells, hist, n_hist)
    else:
        (att, mu1, mu0, w1, w0, n_control, missing, var, treated_var), _ = exposure_cells(
            prepared, cells, hist, n_hist, store=False)
    return ExposureInfluence(prepared, cells, hist, n_hist, att, var, treated_var,
                             n_control=n_control, missing=missing,
                             stats={"mu1": mu1, "mu0": mu0, "w1": w1, "w0": w0})


@dataclass(frozen=True, eq=False)
class ExposureInfluence(PicklableProxies, CellInfluence):
    """The k-th exposure's cell influence functions: variances now, ``psi`` on demand.

    The :class:`~didmem.inference.influence.CellInfluence` of the k-th exposure: its own
    variances, small-sample groups (the history-matched controls) and bootstrap kernel
    (grouped sums with never-treated controls); the stored ``psi`` for the rest.

    Attributes
    ----------
    design, cells
        The prepared panel (units in block order) and the cell layout.
    hist : ndarray of int
        History code of every design row.
    n_hist : int
    att, var, treated_var : ndarray
        The cells' estimates, ``sum_i psi_i**2`` (unclustered) and its treated part.
    n_control, missing : ndarray
        Each cell's history-matched control units, and its treated histories without one.
    stats : mapping
        ``mu1, mu0, w1, w0`` of the cells.
    """

    prepared: Any
    cells: Any
    hist: np.ndarray
    n_hist: int
    att: np.ndarray
    var: np.ndarray
    treated_var: np.ndarray
    n_control: np.ndarray | None = field(default=None, repr=False)
    missing: np.ndarray | None = field(default=None, repr=False)
    stats: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def estimates(self) -> np.ndarray:
        return self.att

    # ------------------------------------------------------------ stored psi, on demand
    def stored(self) -> StoredInfluence:
        """The per-unit influence functions (computed once, on first use)."""
        return self._memo("psi", lambda: exposure_cells(
            self.prepared, self.cells, self.hist, self.n_hist, store=True)[1])

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

    def welch_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """The treated cohort and its history-matched controls, with their units."""
        treated = self.treated_variance()
        n_treated = np.diff(self.prepared.starts)[self.cells.k]
        return (np.stack([treated, self.variance() - treated]),
                np.stack([n_treated, self.n_control]))

    def draws(self, weights: np.ndarray) -> np.ndarray:
        return self.stored().draws(weights)

    def combine(self, matrix) -> np.ndarray:
        return self.stored().combine(matrix)

    def cluster_psi(self, clusters, n_clusters: int) -> np.ndarray:
        return self.stored().cluster_psi(clusters, n_clusters)

    def covariance(self, which: np.ndarray) -> np.ndarray:
        return self.stored().covariance(which)

    def dense(self) -> np.ndarray:
        return self.stored().dense()

    # ------------------------------------------------------------ bootstrap
    @property
    def grouped(self) -> bool:
        """Whether every live cell's controls are the last block alone (never-treated)."""
        return never_only(self.prepared, self.cells)

    def chunk_drawer(self, multipliers, clusters, n_clusters: int) -> Callable:
        """Grouped sums with never-treated controls (see the module notes), else products
        with the stored influence functions. Both read the same multipliers in the same
        chunks, so they agree to rounding."""
        if not self.grouped:
            return unit_weight_drawer(self, self.prepared, clusters)
        return self._grouped_drawer(clusters)

    def _grouped_drawer(self, clusters) -> Callable:
        prepared, cells = self.prepared, self.cells
        starts = prepared.starts
        n_blocks = starts.size - 1
        last = n_blocks - 1
        h_count = self.n_hist
        sums = history_sums(prepared, self.hist, n_hist=h_count)
        weight, w1, mean, a = sums.weight, sums.w1, sums.mean, sums.a
        order, bounds = sums.order, sums.bounds
        wy = prepared.y * prepared.w[:, None]
        centred = wy[order] - prepared.w[order, None] * mean[self.hist[order]]
        live = np.flatnonzero(cells.ref == 0)
        k, t, b = cells.k[live], cells.t[live], cells.b[live]
        slope = self.att[live] / w1[k]
        not_live = np.flatnonzero(cells.ref != 0)

        def draw(row0, u, out):
            m = u.shape[0]
            if clusters is not None:
                u = u[:, clusters]
            sw_h = np.asarray(weight @ u.T).T.reshape(m, n_blocks, h_count)
            sy = np.empty((m, last, prepared.y.shape[1]))
            for j in range(last):
                np.matmul(u[:, starts[j]:starts[j + 1]], wy[starts[j]:starts[j + 1]],
                          out=sy[:, j])
            u_c = u[:, order]
            e = np.zeros((m, h_count, prepared.y.shape[1]))
            for h in np.flatnonzero(bounds[1:] > bounds[:-1]):
                e[:, h] = u_c[:, bounds[h]:bounds[h + 1]] @ centred[bounds[h]:bounds[h + 1]]
            g = sy / w1[None, :, None] - np.matmul(sw_h[:, :last] / w1[None, :, None], mean)
            g -= np.matmul(a, e)
            sw = sw_h.sum(axis=2)
            out.cells[row0:row0 + m, live] = g[:, k, t] - g[:, k, b] - sw[:, k] * slope[None, :]
            out.cells[row0:row0 + m, not_live] = 0.0
            out.block_weights[row0:row0 + m] = sw
            out.total[row0:row0 + m] = u.sum(axis=1)

        return draw


def check_matched(influence, prepared, cells) -> None:
    """Refuse cells with a treated history without a control of the same history."""
    from ..prepared import _fmt

    missing = influence.missing
    if missing.any():  # guarded by the dropping of histories; a layout error if reached
        c = int(np.flatnonzero(missing)[0])
        raise EstimationError(
            f"{int((missing > 0).sum())} cells have a treated history without a control of "
            f"the same history, e.g. cohort {_fmt(prepared.cohorts[cells.k[c]])} at time "
            f"{_fmt(prepared.times[cells.t[c]])}.")
