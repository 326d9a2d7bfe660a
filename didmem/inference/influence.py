"""The influence protocol: what every route of a group-time fit hands to its inference.

Every route of a fit (a balanced panel without covariates, a panel with holes or repeated
cross-sections, covariates on either, the k-th exposure with history-matched controls,
never- or not-yet-treated controls) ends in one :class:`CellInfluence`: the cells' estimates
and their per-unit influence functions ``psi`` (units x cells), held in whatever form the
route computes them fastest. :class:`~didmem.inference.cell_inference.CellInference` asks
it, and nothing else, for

* the cells' estimates (:attr:`CellInfluence.estimates`);
* their analytic variances ``sum_i psi_ic**2``, or of cluster sums
  (:meth:`CellInfluence.variance`);
* the small-sample correction's parts: each independent group's plug-in variance and its
  number of contributing units (:meth:`CellInfluence.welch_groups`);
* the bootstrap draws ``sum_i U_i psi_i`` (:meth:`CellInfluence.bootstrap`: the one chunked
  loop of :func:`~didmem.inference.bootstrap.multiplier_bootstrap` over the route's own
  kernel, :meth:`CellInfluence.chunk_drawer`);
* the covariances of linear combinations of cells, for aggregations and pre-tests
  (:meth:`CellInfluence.combination_moments`, :meth:`CellInfluence.covariance`).

The routes:

============================  ===============================================  ============
route                         form of ``psi``                                  class
============================  ===============================================  ============
balanced, no covariates       per-cohort moments (linear in outcome paths)     :class:`~didmem.inference.grouped.GroupedInfluence`
holes, cross-sections         coefficients on per-row features                 :class:`~didmem.inference.holes.HolesInfluence`
covariates (any panel)        stored per unit, block by block                  :class:`StoredInfluence`
k-th exposure                 sums by history; stored on demand                :class:`~.exposure.cells.ExposureInfluence`
============================  ===============================================  ============

A route that computes moments elsewhere (out of core, on a cluster) plugs in as one more
subclass: the fit, its bootstrap, bands and aggregations are then shared unchanged.

:class:`StoredInfluence` holds ``psi`` explicitly, but only where it can be non-zero: the
units of a block (cohort) enter a cell only as its treated cohort or among its controls.
For every block ``j`` it keeps the cells that involve the block and a dense ``m_j x n_j``
matrix of their influence values (one contiguous row per cell, so that the per-cell kernel
writes each cell's values in one run). Memory: 8 bytes per (unit, cell) pair in which the
unit is treated or a control: at the paper's scale (95 cohorts x 150 units, 2,000
never-treated, 96 periods, 9,025 cells) about 155 MB with never-treated controls, up to
about 0.7 GB with not-yet-treated ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from scipy import sparse

from .bootstrap import BootstrapDraws, design_multipliers, multiplier_bootstrap

__all__ = ["CellInfluence", "StoredInfluence", "cell_layout", "cell_counts",
           "bootstrap_influence"]


def cell_counts(prepared, cells) -> tuple[np.ndarray, np.ndarray]:
    """``(n_treated, n_control)`` of every cell: its cohort's units, and the units of its
    control blocks (from block ``cs`` on) less its own cohort's when that is among them."""
    counts = np.diff(prepared.starts)
    tail = np.cumsum(counts[::-1])[::-1]
    n_treated = counts[cells.k]
    return n_treated, tail[cells.cs] - np.where(cells.k >= cells.cs, n_treated, 0)


class CellInfluence(ABC):
    """The influence functions ``psi`` (units x cells) of a fit's cells, and their estimates.

    Subclasses hold ``psi`` in the form their route computes (see the module notes) and
    have ``prepared`` (the prepared panel, or None for a bare container built in a test) and
    ``n_cells``.
    """

    prepared: Any
    #: the cells' grouped statistics (means and weights of the treated and the controls)
    stats: Mapping[str, np.ndarray]
    #: whether ``psi`` is the balanced route's: linear in the outcome paths with the
    #: coefficients of ``stats`` (what the structured Wald pre-test reads)
    cohort_moments = False

    # ------------------------------------------------------------------ what the fit reads
    @property
    @abstractmethod
    def estimates(self) -> np.ndarray:
        """The cells' estimates (0 at reference cells)."""

    @abstractmethod
    def variance(self, clusters=None, n_clusters: int = 0) -> np.ndarray:
        """``sum_i psi_ic**2`` per cell, or of cluster sums when ``n_clusters > 0``."""

    @abstractmethod
    def treated_variance(self) -> np.ndarray:
        """The treated cohort's part ``sum_{i in g} psi_i**2`` of every cell's variance."""

    def welch_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """The independent groups of every cell's variance, for Welch's correction.

        Returns ``(parts, counts)``, both groups x cells: each group's plug-in part of
        ``sum_i psi_i**2`` and its number of contributing units. By default two groups, the
        treated cohort and the controls, with every unit of their blocks.
        """
        treated = self.treated_variance()
        n_treated, n_control = cell_counts(self.prepared, self.cells)
        return (np.stack([treated, self.variance() - treated]),
                np.stack([n_treated, n_control]))

    # ------------------------------------------------------------------ the bootstrap
    def multiplier_chunks(self, n_draws: int, multiplier: str, rng, n_clusters: int = 0):
        """The multipliers of this route's bootstrap, in its chunks
        (:class:`~didmem.inference.bootstrap.MultiplierChunks`): one weight per unit (per
        cluster with clusters), about a million at a time, a few chunks drawn ahead."""
        return design_multipliers(self.prepared, n_draws, multiplier, rng)

    def bootstrap_chunks(self, n_draws: int, multiplier: str, rng, n_clusters: int = 0):
        """The chunks :meth:`bootstrap` draws from, to start them before it is called (and
        pass them as its ``multipliers``): :meth:`multiplier_chunks` here."""
        return self.multiplier_chunks(n_draws, multiplier, rng, n_clusters)

    @abstractmethod
    def chunk_drawer(self, multipliers, clusters, n_clusters: int) -> Callable:
        """This route's kernel of one chunk of the bootstrap.

        Returns ``draw(row0, chunk, out)``: from one chunk of ``multipliers`` (this route's
        :meth:`multiplier_chunks`; draws ``row0 .. row0 + m``) it writes rows
        ``row0 .. row0 + m`` of ``out.cells`` (``sum_i U_i psi_i``), ``out.block_weights``
        (``sum_{i in block} U_i w_i``) and ``out.total`` (``sum_i U_i``).
        """

    def bootstrap(self, n_draws: int, multiplier: str, rng, clusters=None, n_clusters: int = 0,
                  *, multipliers=None):
        """The multiplier bootstrap of every cell (see
        :func:`~didmem.inference.bootstrap.multiplier_bootstrap`); ``multipliers`` are this
        route's chunks already being drawn (:meth:`multiplier_chunks`)."""
        if multipliers is None:
            multipliers = self.multiplier_chunks(n_draws, multiplier, rng, n_clusters)
        return multiplier_bootstrap(
            lambda: self.chunk_drawer(multipliers, clusters, n_clusters), multipliers,
            self.n_cells, self.n_blocks)

    @property
    def n_blocks(self) -> int:
        """Blocks of units: the treated cohorts, then the never-treated."""
        return int(self.prepared.starts.size - 1)

    # ------------------------------------------------------------------ linear combinations
    def combination_psi(self, weights, omega=None) -> np.ndarray:
        """The units x rows influence functions of the linear combinations ``weights``
        (rows x cells) plus, with ``omega``, the estimated-weights term
        (:func:`add_estimated_weights`).

        Every route answers: through its ``combine`` where it has one, else through its dense
        matrix (holes, cross-sections)."""
        try:
            psi = np.asarray(self.combine(weights), dtype=float)
        except NotImplementedError:
            from scipy import sparse

            matrix = weights.T.toarray() if sparse.issparse(weights) else np.asarray(weights).T
            psi = self.dense() @ matrix
        return add_estimated_weights(psi, self.prepared, omega)

    def combination_moments(self, weights, omega, *, blocks: bool = True):
        """``psi' psi`` (rows x rows; of cluster sums with the design's clusters) of the
        linear combinations, and each block's part of its diagonal (blocks x rows; None
        without ``blocks`` or with clusters)."""
        prepared = self.prepared
        psi = self.combination_psi(weights, omega)
        parts = None
        if blocks and prepared.clusters is None:
            parts = np.add.reduceat(psi * psi, prepared.starts[:-1], axis=0)
        if prepared.clusters is not None:
            sums = np.zeros((prepared.n_clusters, psi.shape[1]))
            np.add.at(sums, prepared.clusters, psi)
            psi = sums
        return psi.T @ psi, parts

    def pretest_covariance(self, which: np.ndarray) -> np.ndarray:
        """The cells' covariance as R ``did``'s Wald pre-test forms it without clusters:
        ``psi[:, which]' psi[:, which]``; on panels with holes with clusters, of cluster
        sums (R clusters its ``V`` there, as its standard errors)."""
        prepared = self.prepared
        if prepared.n_clusters and prepared.holes is not None:
            sums = self.cluster_psi(prepared.clusters, prepared.n_clusters)[:, which]
            return sums.T @ sums
        return self.covariance(which)

    # ------------------------------------------------------------------ per-unit views
    @abstractmethod
    def covariance(self, which: np.ndarray) -> np.ndarray:
        """``psi[:, which].T @ psi[:, which]`` (unclustered)."""

    def combine(self, matrix) -> np.ndarray:
        """``psi @ matrix.T`` (units x keys) for a keys x cells matrix."""
        raise NotImplementedError

    def cluster_psi(self, clusters, n_clusters: int) -> np.ndarray:  # pragma: no cover
        """``sum_{i in cluster} psi_ic`` (clusters x cells)."""
        raise NotImplementedError

    @abstractmethod
    def dense(self) -> np.ndarray:
        """The full units x cells matrix (for tests and small panels)."""


def add_estimated_weights(psi: np.ndarray, prepared, omega) -> np.ndarray:
    """Add R ``did``'s estimated-weights term of aggregations to ``psi`` (units x rows, in
    place) and return it.

    An aggregation weights its cells by the cohorts' estimated shares; their estimation adds
    ``(w_i omega[row, g(i)] - Omega[row]) / n`` to unit ``i``'s influence, with ``omega``
    (rows x cohorts) the derivative of the row's weights in the shares and
    ``Omega = omega @ pg`` (Callaway & Sant'Anna 2021, the aggregations' influence functions).
    Nothing is added where ``omega`` is None or zero.
    """
    if omega is None or not np.any(omega):
        return psi
    n = prepared.n_units
    for j in range(prepared.n_cohorts):  # on cohort j's units
        lo, hi = prepared.starts[j], prepared.starts[j + 1]
        psi[lo:hi] += prepared.w[lo:hi, None] * omega[:, j][None, :] / n
    psi -= (omega @ prepared.cohort_shares)[None, :] / n
    return psi


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


@dataclass(frozen=True, eq=False)
class StoredInfluence(CellInfluence):
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
    design, cells : optional
        The prepared panel and the cell layout (what the fit's inference needs besides
        ``psi``); None for a bare container.
    att : ndarray, optional
        The cells' estimates.
    stats : mapping, optional
        The cells' grouped statistics.
    """

    starts: np.ndarray
    cols: tuple
    values: tuple
    n_cells: int
    prepared: Any = field(default=None, repr=False)
    cells: Any = field(default=None, repr=False)
    att: np.ndarray | None = field(default=None, repr=False)
    stats: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def estimates(self) -> np.ndarray:
        return self.att

    @property
    def nbytes(self) -> int:
        return int(sum(v.nbytes for v in self.values))

    def _blocks(self):
        for j, (cols, vals) in enumerate(zip(self.cols, self.values)):
            if cols.size:
                yield self.starts[j], self.starts[j + 1], cols, vals

    def dense(self) -> np.ndarray:
        out = np.zeros((int(self.starts[-1]), self.n_cells))
        for lo, hi, cols, vals in self._blocks():
            out[lo:hi, cols] = vals.T
        return out

    def cluster_psi(self, clusters, n_clusters: int) -> np.ndarray:
        sums = np.zeros((n_clusters, self.n_cells))
        for lo, hi, cols, vals in self._blocks():
            part = np.zeros((n_clusters, cols.size))
            np.add.at(part, clusters[lo:hi], vals.T)
            sums[:, cols] += part
        return sums

    def variance(self, clusters=None, n_clusters: int = 0) -> np.ndarray:
        if n_clusters:
            sums = self.cluster_psi(clusters, n_clusters)
            return np.einsum("ij,ij->j", sums, sums)
        var = np.zeros(self.n_cells)
        for _, _, cols, vals in self._blocks():
            var[cols] += np.einsum("ij,ij->i", vals, vals)
        return var

    def treated_variance(self) -> np.ndarray:
        out = np.zeros(self.n_cells)
        for j, (cols, vals) in enumerate(zip(self.cols, self.values)):
            mine = self.cells.k[cols] == j
            if mine.any():
                out[cols[mine]] = np.einsum("ij,ij->i", vals[mine], vals[mine])
        return out

    def draws(self, weights: np.ndarray) -> np.ndarray:
        """``weights @ psi`` (draws x cells) for a multiplier matrix (draws x units)."""
        out = np.zeros((weights.shape[0], self.n_cells))
        for lo, hi, cols, vals in self._blocks():
            out[:, cols] += weights[:, lo:hi] @ vals.T
        return out

    @property
    def n_blocks(self) -> int:
        return int(self.starts.size - 1)

    def chunk_drawer(self, multipliers, clusters, n_clusters: int) -> Callable:
        return unit_weight_drawer(self, self.prepared, clusters)

    def combine(self, matrix) -> np.ndarray:
        matrix = sparse.csc_matrix(matrix)
        out = np.zeros((int(self.starts[-1]), matrix.shape[0]))
        for lo, hi, cols, vals in self._blocks():
            out[lo:hi] = (matrix[:, cols] @ vals).T
        return out

    def covariance(self, which: np.ndarray) -> np.ndarray:
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


def unit_weight_drawer(influence, prepared, clusters) -> Callable:
    """The chunk kernel of a route whose draws are ``influence.draws(U)`` for per-unit
    multipliers ``U`` (stored influence functions, and the k-th exposure's with
    not-yet-treated controls); per-cluster weights are first spread to their units."""
    n_blocks = prepared.starts.size - 1

    def draw(row0, weights, out):
        m = weights.shape[0]
        if clusters is not None:
            weights = weights[:, clusters]
        rows = slice(row0, row0 + m)
        out.cells[rows] = influence.draws(weights)
        for k in range(n_blocks):
            lo, hi = prepared.starts[k], prepared.starts[k + 1]
            out.block_weights[rows, k] = weights[:, lo:hi] @ prepared.w[lo:hi]
        out.total[rows] = weights.sum(axis=1)

    return draw


def bootstrap_influence(prepared, influence, *, n_draws: int, multiplier: str,
                        rng) -> BootstrapDraws:
    """The bootstrap from the per-unit draws ``influence.draws(U)`` of an influence that
    has them: the stored route's own, and a check of the other routes' kernels."""
    return multiplier_bootstrap(lambda: unit_weight_drawer(influence, prepared, prepared.clusters),
                                design_multipliers(prepared, n_draws, multiplier, rng),
                                influence.n_cells, prepared.starts.size - 1)
