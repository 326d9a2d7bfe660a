"""The multiplier bootstrap on grouped sums.

A draw of the multiplier bootstrap for a cell is ``sum_i U_i psi_i`` with i.i.d. weights
``U_i`` of mean 0 and variance 1 (one weight per cluster when clustering, shared by the
cluster's units: the bootstrap of cluster sums). Because every influence function here is
linear in block-wise sums of ``U_i w_i y_i`` and ``U_i w_i``, one pass over the data per
batch of draws gives every cell, and every aggregation of cells, without forming the dense
units x cells matrix: O(draws x units x times) work in matrix products.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ..errors import ParameterError
from . import kernels

__all__ = ["MULTIPLIERS", "BootstrapDraws", "MultiplierChunks", "draw_multipliers",
           "resolve_multiplier",
           "design_multipliers", "bootstrap_cells", "bootstrap_influence"]

from ._choices import MULTIPLIERS  # noqa: E402  (declared where the estimators read it cheaply)
_CHUNK_ELEMENTS = 1_000_000  # multipliers held at once (8 MB)
PREFETCH_CHUNKS = 3  # chunks drawn ahead by the helper thread (24 MB at most)


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



def resolve_multiplier(multiplier: str | None, small_sample: bool) -> str:
    """The multiplier a fit uses: ``multiplier``, or by default Gaussian weights with the
    small-sample correction (its t adjustment needs their sup-t value) and Rademacher
    weights (R's) without."""
    return multiplier or ("normal" if small_sample else "rademacher")


def draw_multipliers(rng: np.random.Generator, n_draws: int, n_units: int, kind: str) -> np.ndarray:
    """An ``n_draws x n_units`` matrix of multiplier weights.

    Rademacher weights take +-1 with probability 1/2 (one random bit each); Mammen's weights
    take ``(1 - sqrt 5)/2`` with probability ``(sqrt 5 + 1)/(2 sqrt 5)`` and ``(1 + sqrt 5)/2``
    otherwise, so that their third moment is 1 as well. Normal (Gaussian) weights make each
    draw exactly normal given the data, with the influence functions' covariance (the
    Gaussian multiplier bootstrap of Chernozhukov, Chetverikov & Kato 2013), and do not
    bound the draws' tails as a few units' sign flips do.
    """
    return _weights_from_raw(_raw_multipliers(rng, n_draws, n_units, kind), n_draws, n_units,
                             kind)


def _raw_multipliers(rng, n_draws: int, n_units: int, kind: str) -> np.ndarray:
    """The generator's part of :func:`draw_multipliers`: one array filled by ``rng`` (numpy
    fills it without holding the GIL)."""
    if kind == "rademacher":
        return rng.bit_generator.random_raw(n_draws * ((n_units + 63) // 64))
    if kind == "mammen":
        return rng.random((n_draws, n_units))
    if kind == "normal":
        return rng.standard_normal((n_draws, n_units))
    raise _unknown_kind(kind)


def _unknown_kind(kind) -> ParameterError:
    return ParameterError(f"The 'multiplier' must be one of {set(MULTIPLIERS)}. Got {kind!r}.")


def _weights_from_raw(raw: np.ndarray, n_draws: int, n_units: int, kind: str) -> np.ndarray:
    if kind == "rademacher":
        return kernels.rademacher_from_raw(np.asarray(raw, dtype=np.uint64), n_draws, n_units)
    if kind == "mammen":
        return kernels.mammen_from_uniform(raw)
    return raw


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class MultiplierChunks:
    """The multiplier weights of one bootstrap, ``chunk`` draws at a time.

    Iterating gives ``(row0, weights)`` with ``weights`` the ``m x n_weights`` multipliers of
    draws ``row0 .. row0 + m``, in the generator's order: the numbers of
    :func:`draw_multipliers` called chunk after chunk.

    With ``ahead > 0`` a helper thread, started at once, draws up to ``ahead`` chunks before
    they are used. numpy's generators fill arrays without holding the GIL, so the draws run on
    the other core beside the fit's work (numba's first-call set-up, the grouped sums, the
    cell kernel) instead of before it; the numbers are the same whatever the timing. Call
    :meth:`close` (or use it as a context manager) when done: a fit that fails before its
    bootstrap stops the helper that way.

    Parameters
    ----------
    rng : numpy.random.Generator
        Used by this object alone until it is closed.
    n_draws, n_weights : int
        Bootstrap draws, and multipliers per draw (units, or clusters).
    kind : {"rademacher", "mammen", "normal"}
    chunk : int
        Draws per chunk.
    ahead : int
        Chunks drawn ahead by the helper thread (0: drawn in turn, no thread).
    """

    def __init__(self, rng, n_draws: int, n_weights: int, kind: str, *, chunk: int,
                 ahead: int = 0):
        if kind not in MULTIPLIERS:  # before the helper starts
            raise _unknown_kind(kind)
        for name, value, low in (("n_draws", n_draws, 0), ("n_weights", n_weights, 1),
                                 ("chunk", chunk, 1), ("ahead", ahead, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ParameterError(f"The {name!r} parameter of MultiplierChunks must be an "
                                     f"integer >= {low}. Got {value!r}.")
        self.n_draws, self.n_weights, self.kind = int(n_draws), int(n_weights), kind
        self.chunk = int(chunk)
        self._rng = rng
        self._sizes = [min(self.chunk, self.n_draws - r) for r in range(0, self.n_draws,
                                                                         self.chunk)]
        self._queue = self._thread = None
        self._stop = threading.Event()
        if ahead > 0 and len(self._sizes) > 1:
            self._queue = queue.Queue(maxsize=int(ahead))
            self._thread = threading.Thread(target=self._produce, name="didmem-multipliers",
                                            daemon=True)
            self._thread.start()

    def _produce(self) -> None:
        try:
            for m in self._sizes:
                if not self._put(_raw_multipliers(self._rng, m, self.n_weights, self.kind)):
                    return
        except BaseException as error:  # noqa: BLE001 - handed to the consumer
            self._put(_Failure(error))

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self):
        row0 = 0
        for m in self._sizes:
            if self._queue is None:
                raw = _raw_multipliers(self._rng, m, self.n_weights, self.kind)
            else:
                raw = self._queue.get()
                if isinstance(raw, _Failure):
                    raise raw.error
            yield row0, _weights_from_raw(raw, m, self.n_weights, self.kind)
            row0 += m

    def close(self) -> None:
        """Stop the helper thread (if any) and drop the chunks it drew ahead."""
        self._stop.set()
        if self._thread is not None:
            while self._thread.is_alive():
                try:
                    self._queue.get(timeout=0.05)
                except queue.Empty:
                    pass
            self._thread = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def design_multipliers(design, n_draws: int, multiplier: str, rng, *,
                       ahead: int | None = None) -> MultiplierChunks:
    """The multipliers of a bootstrap on ``design`` (one per unit, or per cluster), in chunks
    of about ``_CHUNK_ELEMENTS``, drawn ``ahead`` chunks ahead (default
    ``PREFETCH_CHUNKS``; see :class:`MultiplierChunks`)."""
    n_weights = design.n_clusters if design.clusters is not None else design.n_units
    return MultiplierChunks(rng, n_draws, n_weights, multiplier,
                            chunk=max(1, _CHUNK_ELEMENTS // max(design.n_units, 1)),
                            ahead=PREFETCH_CHUNKS if ahead is None else ahead)


def bootstrap_cells(design, cells, stats, *, n_draws: int, multiplier: str, rng,
                    multipliers: MultiplierChunks | None = None) -> BootstrapDraws:
    """Draw the multiplier bootstrap of every cell (see :func:`_bootstrap_cells`).

    The grouped sums are many small matrix products: a single BLAS thread runs them
    fastest, and leaves the cores to the numba kernels instead of spinning against them.
    The multipliers are drawn a few chunks ahead on the other core (:class:`MultiplierChunks`;
    ``multipliers`` gives ones already started, e.g. before the fit's first numba call).
    """
    if multipliers is None:
        multipliers = design_multipliers(design, n_draws, multiplier, rng)
    with multipliers, threadpool_limits(limits=1, user_api="blas"):
        return _bootstrap_cells(design, cells, stats, multipliers)


def _bootstrap_cells(design, cells, stats, multipliers: MultiplierChunks) -> BootstrapDraws:
    """Draw the multiplier bootstrap of every cell.

    Parameters
    ----------
    design : didmem.inference._prepared.PreparedDesign
    cells : didmem.inference._prepared.Cells
    stats : mapping with arrays ``mu1, mu0, w1, w0`` from the cell statistics kernel.
    multipliers : MultiplierChunks
        The bootstrap's weights (:func:`design_multipliers` on ``design``): its draws and kind.
    """
    n, n_t = design.y.shape
    n_blocks = design.starts.size - 1
    clustered = design.clusters is not None
    # columns: w*y (times), w, 1 -> one matrix product per block gives every grouped sum
    features = np.empty((n, n_t + 2))
    features[:, :n_t] = design.y * design.w[:, None]
    features[:, n_t] = design.w
    features[:, n_t + 1] = 1.0
    n_draws = multipliers.n_draws
    out = np.empty((n_draws, cells.size))
    block_weights = np.empty((n_draws, n_blocks))
    total = np.empty(n_draws)
    never_only = bool(np.all(cells.cs == n_blocks - 1))
    sums = np.empty((n_blocks, multipliers.chunk, n_t + 2))
    for row0, weights in multipliers:
        m = weights.shape[0]
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
    return BootstrapDraws(out, block_weights, total, multipliers.kind)


def bootstrap_influence(design, influence, *, n_draws: int, multiplier: str,
                        rng) -> BootstrapDraws:
    """Draw the multiplier bootstrap from explicit influence functions (the generic route).

    Draw ``r`` of every cell is ``sum_i U_ri psi_ic``: one matrix product per block of
    ``U`` (draws x units) with the block's stored ``psi`` (see
    :class:`~didmem.inference.influence.CellInfluence`); the grouped weight sums that the
    aggregations need come from the same ``U``.
    """
    clustered = design.clusters is not None
    n_blocks = design.starts.size - 1
    out = np.empty((n_draws, influence.n_cells))
    block_weights = np.empty((n_draws, n_blocks))
    total = np.empty(n_draws)
    with design_multipliers(design, n_draws, multiplier, rng) as multipliers:
        for row0, weights in multipliers:
            m = weights.shape[0]
            if clustered:
                weights = weights[:, design.clusters]
            out[row0:row0 + m] = influence.draws(weights)
            for k in range(n_blocks):
                lo, hi = design.starts[k], design.starts[k + 1]
                block_weights[row0:row0 + m, k] = weights[:, lo:hi] @ design.w[lo:hi]
            total[row0:row0 + m] = weights.sum(axis=1)
    return BootstrapDraws(out, block_weights, total, multiplier)
