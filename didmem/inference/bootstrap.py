"""The multiplier bootstrap: its weights, drawn in chunks, and the one loop over them.

A draw of the multiplier bootstrap for a cell is ``sum_i U_i psi_i`` with i.i.d. weights
``U_i`` of mean 0 and variance 1 (one weight per cluster when clustering, shared by the
cluster's units: the bootstrap of cluster sums). :func:`multiplier_bootstrap` is the one
loop over the chunks of weights (:class:`MultiplierChunks`); each route of the fit turns a
chunk into the cells' draws with its own kernel
(:meth:`~didmem.inference.influence.CellInfluence.chunk_drawer`): on a balanced panel
without covariates, one pass of grouped sums per chunk gives every cell without forming the
dense units x cells matrix.
"""

from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ..errors import ParameterError

__all__ = ["MULTIPLIERS", "BootstrapDraws", "check_draws_fit", "MultiplierChunks", "draw_multipliers",
           "resolve_multiplier", "design_multipliers", "multiplier_bootstrap"]

from .choices import MULTIPLIERS  # noqa: E402  (declared where the estimators read it cheaply)
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


def draw_multipliers(rng: np.random.Generator, n_draws: int, n_units: int, multiplier: str) -> np.ndarray:
    """An ``n_draws x n_units`` matrix of multiplier weights.

    Rademacher weights take +-1 with probability 1/2 (one random bit each); Mammen's weights
    take ``(1 - sqrt 5)/2`` with probability ``(sqrt 5 + 1)/(2 sqrt 5)`` and ``(1 + sqrt 5)/2``
    otherwise, so that their third moment is 1 as well. Normal (Gaussian) weights make each
    draw exactly normal given the data, with the influence functions' covariance (the
    Gaussian multiplier bootstrap of Chernozhukov, Chetverikov & Kato 2013), and do not
    bound the draws' tails as a few units' sign flips do.
    """
    return _weights_from_raw(_raw_multipliers(rng, n_draws, n_units, multiplier), n_draws, n_units,
                             multiplier)


def _raw_multipliers(rng, n_draws: int, n_units: int, multiplier: str) -> np.ndarray:
    """The generator's part of :func:`draw_multipliers`: one array filled by ``rng`` (numpy
    fills it without holding the GIL)."""
    if multiplier == "rademacher":
        return rng.bit_generator.random_raw(n_draws * ((n_units + 63) // 64))
    if multiplier == "mammen":
        return rng.random((n_draws, n_units))
    if multiplier == "normal":
        return rng.standard_normal((n_draws, n_units))
    raise _unknown_multiplier(multiplier)


def _unknown_multiplier(multiplier) -> ParameterError:
    return ParameterError(f"The 'multiplier' must be one of {set(MULTIPLIERS)}. Got {multiplier!r}.")


def _weights_from_raw(raw: np.ndarray, n_draws: int, n_units: int, multiplier: str) -> np.ndarray:
    if multiplier == "normal":
        return raw
    from . import kernels  # numba: loaded by the fits that draw unit by unit only

    if multiplier == "rademacher":
        return kernels.rademacher_from_raw(np.asarray(raw, dtype=np.uint64), n_draws, n_units)
    if multiplier == "mammen":
        return kernels.mammen_from_uniform(raw)
    raise _unknown_multiplier(multiplier)


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
    multiplier : {"rademacher", "mammen", "normal"}
    chunk : int
        Draws per chunk.
    ahead : int
        Chunks drawn ahead by the helper thread (0: drawn in turn, no thread).
    source : callable, optional
        ``source(rng, m)`` draws a chunk of ``m`` draws in a route's own form (random words
        read by a fused kernel, Gaussian block sums), yielded as it is; by default the
        ``m x n_weights`` weights of :func:`draw_multipliers`.
    """

    def __init__(self, rng, n_draws: int, n_weights: int, multiplier: str, *, chunk: int,
                 ahead: int = 0, source=None):
        if multiplier not in MULTIPLIERS:  # before the helper starts
            raise _unknown_multiplier(multiplier)
        for name, value, low in (("n_draws", n_draws, 0), ("n_weights", n_weights, 1),
                                 ("chunk", chunk, 1), ("ahead", ahead, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ParameterError(f"The {name!r} parameter of MultiplierChunks must be an "
                                     f"integer >= {low}. Got {value!r}.")
        self.n_draws, self.n_weights, self.multiplier = int(n_draws), int(n_weights), multiplier
        self.chunk = int(chunk)
        self._rng = rng
        self._source = source
        self._sizes = [min(self.chunk, self.n_draws - r) for r in range(0, self.n_draws,
                                                                         self.chunk)]
        self._queue = self._thread = None
        self._stop = threading.Event()
        if ahead > 0 and len(self._sizes) > 1:
            self._queue = queue.Queue(maxsize=int(ahead))
            self._thread = threading.Thread(target=self._produce, name="didmem-multipliers",
                                            daemon=True)
            self._thread.start()

    @property
    def from_source(self) -> bool:
        """Whether the chunks are a route's own form (``source``), not weights per unit."""
        return self._source is not None

    def _produce(self) -> None:
        try:
            for m in self._sizes:
                if not self._put(self._draw(m)):
                    return
        except BaseException as error:  # noqa: BLE001 - handed to the consumer
            self._put(_Failure(error))

    def _draw(self, m: int):
        if self._source is not None:
            return self._source(self._rng, m)
        return _raw_multipliers(self._rng, m, self.n_weights, self.multiplier)

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
                raw = self._draw(m)
            else:
                raw = self._queue.get()
                if isinstance(raw, _Failure):
                    raise raw.error
            yield row0, (raw if self._source is not None
                         else _weights_from_raw(raw, m, self.n_weights, self.multiplier))
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


def design_multipliers(prepared, n_draws: int, multiplier: str, rng, *,
                       ahead: int | None = None) -> MultiplierChunks:
    """The multipliers of a bootstrap on ``prepared`` (one per unit, or per cluster), in chunks
    of about ``_CHUNK_ELEMENTS``, drawn ``ahead`` chunks ahead (default
    ``PREFETCH_CHUNKS``; see :class:`MultiplierChunks`)."""
    n_weights = prepared.n_clusters if prepared.clusters is not None else prepared.n_units
    return MultiplierChunks(rng, n_draws, n_weights, multiplier,
                            chunk=max(1, _CHUNK_ELEMENTS // max(prepared.n_units, 1)),
                            ahead=PREFETCH_CHUNKS if ahead is None else ahead)


def multiplier_bootstrap(drawer, multipliers: MultiplierChunks, n_cells: int,
                         n_blocks: int) -> BootstrapDraws:
    """The multiplier bootstrap of every cell: the one loop over the chunks of weights.

    ``drawer()`` returns a route's kernel of one chunk
    (:meth:`~didmem.inference.influence.CellInfluence.chunk_drawer`), which writes the
    chunk's draws of the cells and the grouped weight sums that the aggregations need.
    The grouped sums are many small matrix products: a single BLAS thread runs them
    fastest, and leaves the cores to the numba kernels instead of spinning against them.
    ``multipliers`` is closed at the end (its helper thread stopped), also on an error.
    """
    n_draws = multipliers.n_draws
    out = BootstrapDraws(np.empty((n_draws, n_cells)), np.empty((n_draws, n_blocks)),
                         np.empty(n_draws), multipliers.multiplier)
    with multipliers, threadpool_limits(limits=1, user_api="blas"):
        draw = drawer()
        for row0, chunk in multipliers:
            draw(row0, chunk, out)
    return out


def check_draws_fit(n_draws: int, n_cells: int, owner: str) -> None:
    """Refuse a bootstrap whose draws cannot fit in this machine's memory.

    The draws of every cell (``n_draws`` x ``n_cells`` float64) are kept for the band and the
    aggregations, so ``n_bootstrap=10**10`` must be refused at once, naming the parameter,
    not fail inside numpy (or, where memory is overcommitted, exhaust the machine).
    """
    need = 8 * int(n_draws) * (int(n_cells) + 1)
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # not a POSIX system: numpy will say
        return
    if need > total:
        raise ParameterError(
            f"The 'n_bootstrap' parameter of {owner} must leave room for its draws: "
            f"{int(n_draws):,} draws of {int(n_cells):,} cells need {need / 2**30:,.1f} GiB, more "
            f"than this machine's {total / 2**30:,.1f} GiB. Got {int(n_draws)}; a few thousand "
            "draws are plenty for a band.")
