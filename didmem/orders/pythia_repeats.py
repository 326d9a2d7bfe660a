"""Later exposures in Pythia's data order: repeated sequences, and the deduplicated suite's second pass.

Pythia's pre-shuffled data (``.bin``/``.idx``, read by
:class:`~didmem.orders.MMapIndexedDataset`) holds the training sequences in
training order: step ``s`` (1-based) trains rows ``(s-1)·1024 .. s·1024-1``, for all 143,000
steps (EleutherAI/pythia's ``utils/batch_viewer.py`` reads ``dataset[start·1024:(end+1)·1024]``
for steps up to 143,000). Where the same sequence of tokens is trained on again, that is a
later exposure of the same instance. Two routes find them:

- :func:`find_repeats` (``"search"``): hash every row of a range of the order and keep the
  rows whose tokens equal a sampled instance's (hash collisions are checked token by token).
  It assumes nothing about how repeats are ordered, and it is the route for the standard
  (non-deduplicated) Pile's duplicates.
- :func:`offset_repeats` (``"offset"``): the second exposure of row ``i`` is row
  ``i + epoch_sequences``, as if the second pass replayed the first pass's order; every
  sampled row is checked against its supposed repeat, and a mismatch is refused.

**How the deduplicated suite's second pass is ordered.** The Pythia README states that every
model saw 299,892,736,000 tokens (143,000 steps of 1,024 sequences of 2,048 tokens), "~= 1.5
epochs on the deduped Pile (which contains 207B tokens in 1 epoch)": one pass is about
207e9 / (1,024 · 2,048) ≈ 98,700 steps. GPT-NeoX, at the commit Pythia's repository pins as
its ``utils/gpt-neox`` submodule (bcd6ec20, branch ``inspect_idxmap``) and on its ``Pythia``
branch (e15d923d), builds the training order in ``megatron/data/gpt2_dataset.py``: it
computes the number of epochs needed (2 here), concatenates that many copies of the document
list and shuffles them *together* in one permutation (``_build_doc_idx``), packs the result
into 2,049-token samples across document boundaries (``_build_sample_idx``) and shuffles all
samples together (``_build_shuffle_idx``). Read that way, a document's two copies lie at
independent random places in the order, re-packed with other neighbours, and training stops
after about 72% of the two epochs; there is no boundary at step ~98,700 after which the first
pass repeats in the same order, as users assumed in EleutherAI/pythia issue #144. So
``"search"`` is the default, and ``"offset"`` is offered only with its check: on data built
as that code builds it, the check refuses it. A re-packed repeat is not an identical
sequence, so whole-sequence hashing finds only repeats packed at the same offset; the
sequence-level search says how many it found, and the report should say so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numba import njit, prange

from ..errors import ParameterError
from .exposures import exposure_frame

__all__ = ["row_hashes", "find_repeats", "offset_repeats", "PYTHIA_DEDUP_EPOCH_TOKENS",
           "PYTHIA_SEQUENCE_TOKENS"]

PYTHIA_SEQUENCE_TOKENS = 2049
"""Tokens per row of Pythia's pre-shuffled data (2,048 trained positions plus one)."""

PYTHIA_DEDUP_EPOCH_TOKENS = 207_000_000_000
"""Tokens in one epoch of the deduplicated Pile, as the Pythia README rounds it."""

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_ROWS_PER_CHUNK = 1 << 16


@njit(parallel=True, cache=True)
def _row_hashes_kernel(buf, starts, lengths, out):  # pragma: no cover - compiled
    for r in prange(starts.size):
        h = np.uint64(0xCBF29CE484222325)
        s = starts[r]
        for j in range(lengths[r]):
            h = (h ^ np.uint64(buf[s + j])) * np.uint64(0x100000001B3)
        out[r] = h ^ np.uint64(lengths[r])


def _row_hashes_numpy(buf, starts, lengths):
    """The plain-numpy twin of the kernel (test oracle)."""
    out = np.empty(starts.size, np.uint64)
    with np.errstate(over="ignore"):
        for r in range(starts.size):
            h = _FNV_OFFSET
            for byte in buf[starts[r]:starts[r] + lengths[r]]:
                h = (h ^ np.uint64(byte)) * _FNV_PRIME
            out[r] = h ^ np.uint64(lengths[r])
    return out


def _sequence_hashes(tokens, dtype) -> np.ndarray:
    """The row hash of each token sequence, as stored with ``dtype``."""
    raws = [np.ascontiguousarray(np.asarray(t).astype(dtype)).view(np.uint8) for t in tokens]
    lengths = np.array([r.size for r in raws], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    out = np.empty(len(raws), np.uint64)
    if raws:
        _row_hashes_kernel(np.concatenate(raws), starts, lengths, out)
    return out


def row_hashes(dataset, start: int = 0, stop: int | None = None) -> np.ndarray:
    """A 64-bit FNV-1a hash of the bytes of each row ``start`` to ``stop - 1`` of a dataset.

    The dataset is an indexed dataset (:class:`MMapIndexedDataset`).

    Parameters
    ----------
    dataset : MMapIndexedDataset
        The data order.
    start, stop : int
        The rows to hash (default: all).

    Returns
    -------
    numpy.ndarray of uint64
    """
    stop = len(dataset) if stop is None else int(stop)
    _check_range(dataset, start, stop, "row_hashes")
    out = np.empty(max(stop - start, 0), np.uint64)
    itemsize = dataset.dtype.itemsize
    for lo in range(start, stop, _ROWS_PER_CHUNK):
        hi = min(lo + _ROWS_PER_CHUNK, stop)
        pointers = np.asarray(dataset.pointers[lo:hi], dtype=np.int64)
        first = int(pointers.min())  # rows need not be stored in order: no negative start
        lengths = np.asarray(dataset.sizes[lo:hi], dtype=np.int64) * itemsize
        last = int((pointers + lengths).max())
        buf = np.asarray(dataset._bin[first:last])
        _row_hashes_kernel(buf, pointers - first, lengths, out[lo - start:hi - start])
    return out


def _check_range(dataset, start, stop, where):
    if not 0 <= start <= stop <= len(dataset):
        raise ParameterError(
            f"{where}: the search range {start} .. {stop} is not within the {len(dataset)} "
            f"sequences of {str(dataset.path)!r}."
        )


def find_repeats(dataset, units, tokens, *, batch_size: int, start: int = 0,
                 stop: int | None = None, where: str = "pythia") -> pd.DataFrame:
    """Every row of ``dataset[start:stop]`` whose tokens equal a sampled instance's.

    Parameters
    ----------
    dataset : MMapIndexedDataset
        The data order.
    units : array_like
        The sampled instances' unit ids.
    tokens : sequence of array_like of int
        Their token ids (from the same data, or from elsewhere).
    batch_size : int
        Sequences per optimisation step.
    start, stop : int
        The rows searched (default: the whole file). Say this range in the report: a
        repeat outside it is not found.
    where : str
        How errors name the design.

    Returns
    -------
    pandas.DataFrame
        ``unit``, ``position`` and ``step`` (``position // batch_size + 1``), one row per
        occurrence, sorted by unit and position. An instance's own row is among them when it
        lies in the range.
    """
    stop = len(dataset) if stop is None else int(stop)
    _check_range(dataset, start, stop, where)
    units = np.asarray(units)
    wanted = {}
    for u, t, h in zip(units, tokens, _sequence_hashes(tokens, dataset.dtype)):
        wanted.setdefault(int(h), []).append((u, np.asarray(t, dtype=np.int64)))
    keys = np.array(sorted(wanted), dtype=np.uint64)
    rows_unit, rows_pos = [], []
    for lo in range(start, stop, 1 << 22):
        hi = min(lo + (1 << 22), stop)
        hashes = row_hashes(dataset, lo, hi)
        slot = np.searchsorted(keys, hashes)
        hit = slot < keys.size
        hit[hit] = keys[slot[hit]] == hashes[hit]
        for r in np.flatnonzero(hit):
            row = dataset[lo + int(r)]
            for unit, seq in wanted[int(hashes[r])]:
                if row.size == seq.size and np.array_equal(row, seq):
                    rows_unit.append(unit)
                    rows_pos.append(lo + int(r))
    unit = pd.Series(rows_unit, dtype=units.dtype if rows_unit else np.int64)
    return exposure_frame(unit, rows_pos, batch_size)


def offset_repeats(dataset, positions, *, epoch_sequences: int, batch_size: int,
                   where: str = "pythia") -> pd.DataFrame:
    """First and second exposures of rows ``positions``, the second at ``+ epoch_sequences``.

    Every sampled row whose supposed repeat lies in the data is compared with it token by
    token; any mismatch is refused, since the second pass then does not replay the first
    pass's order (use :func:`find_repeats`).

    Returns
    -------
    pandas.DataFrame
        ``unit`` (the sampled row), ``position`` and ``step``: its first-pass row and, where
        it is in the data, the second-pass row.
    """
    positions = np.asarray(positions, dtype=np.int64)
    if epoch_sequences < 1:
        raise ParameterError(f"{where} epoch_sequences must be positive; got {epoch_sequences}.")
    if (positions < 0).any() or (positions >= 2 * epoch_sequences).any():
        raise ParameterError(
            f"{where} second_epoch = 'offset': sampled rows must lie within two passes of "
            f"epoch_sequences = {epoch_sequences} rows; got e.g. row "
            f"{int(positions[(positions < 0) | (positions >= 2 * epoch_sequences)][0])}."
        )
    base = np.where(positions < epoch_sequences, positions, positions - epoch_sequences)
    second = base + epoch_sequences
    inside = second < len(dataset)
    differ = [int(p) for p, q in zip(base[inside], second[inside])
              if not np.array_equal(dataset[int(p)], dataset[int(q)])]
    if differ:
        raise ParameterError(
            f"{where} second_epoch = 'offset': {len(differ)} of {int(inside.sum())} sampled rows "
            f"differ from the row epoch_sequences = {epoch_sequences} later (e.g. row "
            f"{differ[0]}), so the second pass does not replay the first in the same order; use "
            "second_epoch = 'search'."
        )
    return exposure_frame(np.concatenate([positions, positions[inside]]),
                          np.concatenate([base, second[inside]]), batch_size)
