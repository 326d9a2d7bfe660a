"""The balanced route without covariates: the moments route with the units' paths beside it.

On a balanced panel without covariates the influence function of a cell is linear in the
units' outcome paths: ``w_i (d_i - mu_1) / W_1`` on the cell's cohort and
``-w_i (d_i - mu_0) / W_0`` on its controls, ``d_i`` the outcome change from the base
period (see :mod:`didmem.inference.kernels`). So the cells' estimates, variances, Welch
parts, covariances and aggregations follow from per-block moments of the paths
(:class:`~didmem.inference.moments.cells.MomentsInfluence`, the same code that fits a
parquet folder out of core, on Ray, or from pattern counts), and so does the Gaussian
multiplier bootstrap, drawn from its exact law given the data. :class:`GroupedInfluence`
holds that route (:attr:`GroupedInfluence.by_moments`) with the paths for what needs each unit: Rademacher and Mammen
multipliers and clustered variances (per-block sums of ``U_i w_i y_i`` and ``U_i w_i``, one
matrix product per block and chunk of draws, :func:`~didmem.inference.kernels.cell_draws`),
and the units x cells matrix. No units x cells matrix is formed otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping

import numpy as np

from .influence import CellInfluence
from .moments.cells import MomentsInfluence, cell_estimates
from .moments.cohort import CohortMoments

__all__ = ["GroupedInfluence", "grouped_influence", "bootstrap_cells", "prepared_moments"]


def prepared_moments(prepared) -> CohortMoments:
    """The moments of a prepared balanced panel's blocks (treated cohorts, never-treated)."""
    counts = np.diff(prepared.starts)
    values = np.append(np.asarray(prepared.cohorts, dtype=np.float64), np.inf)
    cohorts = np.repeat(values[: counts.size], counts)
    weights = None if np.all(prepared.w == 1.0) else prepared.w
    moments = CohortMoments.from_paths(prepared.times, cohorts, prepared.y, weights)
    if moments.cohorts.size < counts.size:  # an empty never-treated block (not-yet-treated)
        moments = moments + CohortMoments.empty(prepared.times).relabel(np.array([np.inf]))
    return moments


def grouped_influence(prepared, cells) -> "GroupedInfluence":
    """The cells of a balanced design without covariates, from its blocks' moments."""
    moments = prepared_moments(prepared)
    att, stats = cell_estimates(moments, cells, np.zeros(prepared.times.size))
    return GroupedInfluence(prepared, cells, stats, att=att, moments=moments)


def bootstrap_cells(prepared, cells, stats, *, n_draws: int, multiplier: str, rng,
                    multipliers=None):
    """The bootstrap of a balanced design's cells from their grouped statistics."""
    return GroupedInfluence(prepared, cells, stats).bootstrap(
        n_draws, multiplier, rng, prepared.clusters, prepared.n_clusters, multipliers=multipliers)


@dataclass(frozen=True, eq=False)
class GroupedInfluence(CellInfluence):
    """The cells' influence functions on a balanced design without covariates: the units'
    paths, and the same cells held as their blocks' moments (:attr:`by_moments`, a
    :class:`~didmem.inference.moments.cells.MomentsInfluence`) for what follows from them
    (see the module notes).

    Attributes
    ----------
    prepared, cells
        The prepared panel (``y`` a dense units x times matrix) and the cell layout.
    stats : mapping
        ``mu1, mu0, w1, w0``: each cell's treated and control mean change and weight.
    att : ndarray, optional
        The estimates (from :func:`grouped_influence`); None when only the bootstrap or the
        combinations are asked for.
    moments : CohortMoments, optional
        The blocks' moments (computed from the paths when not given).
    """

    prepared: Any
    cells: Any
    stats: Mapping[str, np.ndarray]
    att: np.ndarray | None = field(default=None, repr=False)
    moments: CohortMoments | None = field(default=None, repr=False)

    #: ``stats`` and :meth:`z_gram` give the structured Wald pre-test
    #: (:mod:`~didmem.inference.pretrend.wald`)
    cohort_moments = True

    @cached_property
    def by_moments(self) -> MomentsInfluence:
        """The cells as their blocks' moments, about zero: ``stats`` are in the prepared
        panel's own (centred) outcome, as the per-unit kernels read it."""
        moments = prepared_moments(self.prepared) if self.moments is None else self.moments
        return MomentsInfluence(self.prepared, self.cells, self.stats, att=self.att,
                                moments=moments, centred_at=np.zeros(self.prepared.times.size))

    @property
    def n_cells(self) -> int:
        return int(self.cells.size)

    @property
    def estimates(self) -> np.ndarray:
        return self.att

    @property
    def gram(self) -> np.ndarray:
        """Per-block Gram matrices of the features ``(w_i y_i, w_i, 1)``."""
        return self.by_moments.gram

    def z_gram(self, block: int) -> np.ndarray:
        return self.by_moments.z_gram(block)

    def treated_variance(self) -> np.ndarray:
        return self.by_moments.treated_variance()

    def variance(self, clusters=None, n_clusters: int = 0) -> np.ndarray:
        """From the moments; of cluster sums, unit by unit."""
        if not n_clusters:
            return self.by_moments.variance()
        from . import kernels

        return kernels.cell_statistics(self.prepared.y, self.prepared.w, self.prepared.starts,
                                       *self.cells.kernel_args(), clusters, n_clusters)[1]

    def covariance(self, which: np.ndarray) -> np.ndarray:
        """``sum_i psi_ci psi_di`` of the cells ``which``, from the moments."""
        return self.by_moments.covariance(which)

    def bootstrap(self, n_draws: int, multiplier: str, rng, clusters=None, n_clusters: int = 0,
                  *, multipliers=None):
        """Gaussian multipliers without clusters: the block sums drawn from the moments'
        exact law (:meth:`MomentsInfluence.multiplier_chunks`); otherwise unit by unit
        (:meth:`chunk_drawer`), as are draws whose ``multipliers`` are already drawn. Both
        run the one loop of :func:`~didmem.inference.bootstrap.multiplier_bootstrap`."""
        if self._by_moments_law(multiplier, n_clusters, multipliers):
            return self.by_moments.bootstrap(n_draws, multiplier, rng, multipliers=multipliers)
        return super().bootstrap(n_draws, multiplier, rng, clusters, n_clusters,
                                 multipliers=multipliers)

    def bootstrap_chunks(self, n_draws: int, multiplier: str, rng, n_clusters: int = 0):
        """Gaussian multipliers without clusters: the moments' chunks of block sums
        (:meth:`MomentsInfluence.multiplier_chunks`); otherwise one weight per unit."""
        if self._by_moments_law(multiplier, n_clusters, None):
            return self.by_moments.multiplier_chunks(n_draws, multiplier, rng)
        return self.multiplier_chunks(n_draws, multiplier, rng, n_clusters)

    @staticmethod
    def _by_moments_law(multiplier: str, n_clusters: int, multipliers) -> bool:
        """Whether the draws come from the moments' exact law: Gaussian multipliers without
        clusters, unless ``multipliers`` are weights drawn unit by unit already."""
        return (multiplier == "normal" and not n_clusters
                and (multipliers is None or multipliers.from_source))

    def combination_moments(self, weights, omega, *, blocks: bool = True):
        """From the moments; of cluster sums, from the units' influence functions."""
        if self.prepared.clusters is None:
            return self.by_moments.combination_moments(weights, omega, blocks=blocks)
        return super().combination_moments(weights, omega, blocks=blocks)

    # ------------------------------------------------------------------ bootstrap
    def chunk_drawer(self, multipliers, clusters, n_clusters: int) -> Callable:
        """Per chunk: the grouped sums of ``U_i (w_i y_i, w_i, 1)`` per block (one matrix
        product each), then every cell's draw from them in the numba kernel."""
        from . import kernels

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
    def combination_psi(self, weights, omega=None) -> np.ndarray:
        """From per-block coefficients of ``y_i`` and ``1`` and one matrix product per
        block, formed only for the rows whose cells use the block."""
        from scipy import sparse

        prepared, cells, stats = self.prepared, self.cells, self.stats
        csc = sparse.csc_matrix(weights)
        if omega is None:
            omega = np.zeros((csc.shape[0], prepared.n_cohorts))
        n, n_time = prepared.y.shape
        n_keys, k = csc.shape[0], prepared.n_cohorts
        from .combination_sums import aggregate_coefficients

        coef, beta = aggregate_coefficients(
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

        return self.combination_psi(sparse.csr_matrix(matrix))

    def cluster_psi(self, clusters, n_clusters: int) -> np.ndarray:
        sums = np.zeros((n_clusters, self.n_cells))
        np.add.at(sums, clusters, self.dense())
        return sums

    def dense(self) -> np.ndarray:
        from scipy import sparse

        return self.combine(sparse.identity(self.n_cells, format="csr"))
