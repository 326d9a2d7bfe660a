"""The multiplier bootstrap on grouped sums.

A draw of the multiplier bootstrap for a cell is ``sum_i U_i psi_i`` with i.i.d. weights
``U_i`` of mean 0 and variance 1 (one weight per cluster when clustering, shared by the
cluster's units: the bootstrap of cluster sums). Because every influence function here is
linear in block-wise sums of ``U_i w_i y_i`` and ``U_i w_i``, one pass over the data per
batch of draws gives every cell, and every aggregation of cells, without forming the dense
units x cells matrix: O(draws x units x times) work in matrix products.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ..errors import ParameterError
from . import kernels

__all__ = ["MULTIPLIERS", "BootstrapDraws", "draw_multipliers", "bootstrap_cells",
           "bootstrap_influence"]

from ._choices import MULTIPLIERS  # noqa: E402  (declared where the estimators read it cheaply)
_CHUNK_ELEMENTS = 2_000_000  # multipliers held at once (16 MB)


@dataclass(frozen=True)
class BootstrapDraws:
    """Bootstrap draws of the cells and the sums that aggregations need.

    Attributes
    ----------
    cells : ndarray (n_draws, n_cells)
        ``sum_i U_i psi_i`` for every cell: the estimate's deviation in that draw.
    block_weights : ndarray (n_draws, n_blocks)
        ``sum_{i in block} U_i w_i``.
    total : ndarray (n_draws,)
        ``sum_i U_i``.
    multiplier : str
    """

    cells: np.ndarray
    block_weights: np.ndarray
    total: np.ndarray
    multiplier: str

    @property
    def n_draws(self) -> int:
        return self.cells.shape[0]

    @functools.cached_property
    def cells_by_cell(self) -> np.ndarray:
        """``cells.T`` in C order (cells x draws), made once: a sparse matrix of combination
        weights multiplies it without copying it again for every aggregation."""
        return np.ascontiguousarray(self.cells.T)

    def __getstate__(self) -> dict:  # a pickle carries the draws once, not their copy
        state = dict(self.__dict__)
        state.pop("cells_by_cell", None)
        return state


def draw_multipliers(rng: np.random.Generator, n_draws: int, n_units: int, kind: str) -> np.ndarray:
    """An ``n_draws x n_units`` matrix of multiplier weights.

    Rademacher weights take +-1 with probability 1/2 (one random bit each); Mammen's weights
    take ``(1 - sqrt 5)/2`` with probability ``(sqrt 5 + 1)/(2 sqrt 5)`` and ``(1 + sqrt 5)/2``
    otherwise, so that their third moment is 1 as well. Normal (Gaussian) weights make each
    draw exactly normal given the data, with the influence functions' covariance (the
    Gaussian multiplier bootstrap of Chernozhukov, Chetverikov & Kato 2013), and do not
    bound the draws' tails as a few units' sign flips do.
    """
    if kind == "rademacher":
        words = (n_units + 63) // 64
        raw = rng.bit_generator.random_raw(n_draws * words)
        return kernels.rademacher_from_raw(np.asarray(raw, dtype=np.uint64), n_draws, n_units)
    if kind == "mammen":
        return kernels.mammen_from_uniform(rng.random((n_draws, n_units)))
    if kind == "normal":
        return rng.standard_normal((n_draws, n_units))
    raise ParameterError(f"The 'multiplier' must be one of {set(MULTIPLIERS)}. Got {kind!r}.")


def bootstrap_cells(design, cells, stats, *, n_draws: int, multiplier: str, rng) -> BootstrapDraws:
    """Draw the multiplier bootstrap of every cell (see :func:`_bootstrap_cells`).

    The grouped sums are many small matrix products: a single BLAS thread runs them
    fastest, and leaves the cores to the numba kernels instead of spinning against them.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _bootstrap_cells(design, cells, stats, n_draws=n_draws, multiplier=multiplier,
                                rng=rng)


def _bootstrap_cells(design, cells, stats, *, n_draws, multiplier, rng) -> BootstrapDraws:
    """Draw the multiplier bootstrap of every cell.

    Parameters
    ----------
    design : didmem.inference._prepared.PreparedDesign
    cells : didmem.inference._prepared.Cells
    stats : mapping with arrays ``mu1, mu0, w1, w0`` from the cell statistics kernel.
    n_draws : int
    multiplier : {"rademacher", "mammen", "normal"}
    rng : numpy.random.Generator
    """
    n, n_t = design.y.shape
    n_blocks = design.starts.size - 1
    clustered = design.clusters is not None
    n_weights = design.n_clusters if clustered else n
    # columns: w*y (times), w, 1 -> one matrix product per block gives every grouped sum
    features = np.empty((n, n_t + 2))
    features[:, :n_t] = design.y * design.w[:, None]
    features[:, n_t] = design.w
    features[:, n_t + 1] = 1.0
    out = np.empty((n_draws, cells.size))
    block_weights = np.empty((n_draws, n_blocks))
    total = np.empty(n_draws)
    chunk = max(1, min(n_draws, _CHUNK_ELEMENTS // max(n, 1)))
    never_only = bool(np.all(cells.cs == n_blocks - 1))
    sums = np.empty((n_blocks, chunk, n_t + 2))
    for row0 in range(0, n_draws, chunk):
        m = min(chunk, n_draws - row0)
        weights = draw_multipliers(rng, m, n_weights, multiplier)
        if clustered:
            weights = weights[:, design.clusters]
        part = sums[:, :m]
        for k in range(n_blocks):
            lo, hi = design.starts[k], design.starts[k + 1]
            np.matmul(weights[:, lo:hi], features[lo:hi], out=part[k])
        by_draw = np.ascontiguousarray(part.transpose(1, 0, 2))
        if never_only:  # controls are the never-treated block alone: no suffix sums needed
            suffix = by_draw
        else:
            suffix = np.ascontiguousarray(np.cumsum(by_draw[:, ::-1], axis=1)[:, ::-1])
        kernels.cell_draws(
            by_draw, suffix, *cells.kernel_args(),
            stats["mu1"], stats["mu0"], stats["w1"], stats["w0"], out, row0,
        )
        block_weights[row0:row0 + m] = by_draw[:, :, n_t]
        total[row0:row0 + m] = by_draw[:, :, n_t + 1].sum(axis=1)
    return BootstrapDraws(out, block_weights, total, multiplier)


def bootstrap_influence(design, influence, *, n_draws: int, multiplier: str,
                        rng) -> BootstrapDraws:
    """Draw the multiplier bootstrap from explicit influence functions (the generic route).

    Draw ``r`` of every cell is ``sum_i U_ri psi_ic``: one matrix product per block of
    ``U`` (draws x units) with the block's stored ``psi`` (see
    :class:`~didmem.inference.influence.CellInfluence`); the grouped weight sums that the
    aggregations need come from the same ``U``.
    """
    n = design.n_units
    clustered = design.clusters is not None
    n_weights = design.n_clusters if clustered else n
    n_blocks = design.starts.size - 1
    out = np.empty((n_draws, influence.n_cells))
    block_weights = np.empty((n_draws, n_blocks))
    total = np.empty(n_draws)
    chunk = max(1, min(n_draws, _CHUNK_ELEMENTS // max(n, 1)))
    for row0 in range(0, n_draws, chunk):
        m = min(chunk, n_draws - row0)
        weights = draw_multipliers(rng, m, n_weights, multiplier)
        if clustered:
            weights = weights[:, design.clusters]
        out[row0:row0 + m] = influence.draws(weights)
        for k in range(n_blocks):
            lo, hi = design.starts[k], design.starts[k + 1]
            block_weights[row0:row0 + m, k] = weights[:, lo:hi] @ design.w[lo:hi]
        total[row0:row0 + m] = weights.sum(axis=1)
    return BootstrapDraws(out, block_weights, total, multiplier)
