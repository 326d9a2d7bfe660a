"""Compiled passes over GPT-NeoX index maps (numba), each beside its plain-numpy oracle.

The maps of a Pythia-sized run hold hundreds of millions of entries. Locating a document in
the token stream needs the running sum of ``sizes[doc_idx]`` (a gather at random places of
the indexed dataset's ``sizes``); a compiled loop does that gather, the sample rows and the
instances' documents in one pass, where numpy needed several passes and temporaries. The
kernels take one chunk at a time and carry their state from chunk to chunk, so the caller
reads the memory-mapped maps in pieces of ``_CHUNK`` entries. The gather itself
(:func:`gather_sizes`) is a tight loop of its own, run on every core: apart from the pass's
branches, many of its reads are in flight at once.

The oracles (``*_numpy``) compute the same thing with numpy, for the tests.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["lookup_filter", "in_filter", "gather_sizes", "span_hits", "span_hits_numpy",
           "positions_of_samples", "sample_starts_chunk", "sample_starts_chunk_numpy",
           "map_bounds", "sample_rows_bounds", "mark_seen"]


def lookup_filter(values: np.ndarray, n_values: int) -> tuple:
    """``(bits, mask)``: a small bit set where bit ``v & mask`` is set for every ``v`` of
    ``values`` (a few others share a bit), so that a pass asks the exact question (a binary
    search) only for a few entries (:func:`in_filter`). ``mask + 1`` is a power of two,
    about 64 bits per value, from 2**12 to 2**26 bits (8 MB) and at most the next power of
    two above ``n_values``: 10,000 values take 128 KB, which stays in the core's cache."""
    want = max(1, 64 * int(np.asarray(values).size))
    bits = int(np.clip(int(np.ceil(np.log2(want))), 12, 26))
    bits = max(6, min(bits, int(np.ceil(np.log2(max(int(n_values), 2))))))
    mask = (1 << bits) - 1
    table = np.zeros(1 << (bits - 6), dtype=np.uint64)
    slots = np.asarray(values, dtype=np.int64) & mask
    np.bitwise_or.at(table, slots >> 6, np.left_shift(np.uint64(1), (slots & 63).astype(np.uint64)))
    return table, mask


@njit(cache=True, nogil=True)
def in_filter(table, mask, value):  # pragma: no cover - compiled
    """Whether ``value``'s bit is set in :func:`lookup_filter`'s ``table``."""
    slot = value & mask
    return (table[slot >> 6] >> np.uint64(slot & 63)) & np.uint64(1) != 0


@njit(parallel=True, cache=True)
def gather_sizes(doc_idx, sizes, out):  # pragma: no cover - compiled
    """``out[i] = sizes[doc_idx[i]]``: the random reads of a pass over ``doc_idx`` in one
    tight loop (on every core), apart from the pass's logic, so that many are in flight."""
    for i in prange(doc_idx.size):
        out[i] = sizes[doc_idx[i]]


@njit(cache=True, nogil=True)
def _find(sorted_values, value):  # pragma: no cover - compiled
    """Index of ``value`` in ``sorted_values``, or -1."""
    lo, hi = 0, sorted_values.size
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_values[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    if lo < sorted_values.size and sorted_values[lo] == value:
        return lo
    return -1


@njit(cache=True, nogil=True)
def span_hits(doc_idx, lo, lengths, rows, row, stream, table, mask, documents, first_unit,
              units, starts, ends, out_unit, out_sample, n_out):  # pragma: no cover - compiled
    """One chunk of ``doc_idx`` (positions ``lo ..``, the documents' ``lengths`` from
    :func:`gather_sizes`): the sample that holds each instance whole.

    Walks the documents in stream order (``stream``: where document position ``lo`` starts
    in the token stream; ``row``: the first row of ``sample_idx`` whose position is ``lo``
    or later). For every position whose document is one of ``documents`` (sorted; the units
    of ``documents[k]`` are ``units[first_unit[k]:first_unit[k + 1]]``, each the span
    ``starts[u] .. ends[u] - 1`` of its document), the sample ``i`` that holds the span's
    first token at its start or after (the last row with ``F[i] <= first``, ``F[i]`` the
    stream position of row ``i``) holds it whole if ``last <= F[i + 1]``; then ``(u, i)`` is
    appended to ``out_unit``/``out_sample`` from ``n_out`` on.

    Returns ``(n_out, row, stream)`` after the chunk, or ``(-1, row, stream)`` as they were
    before it when the output arrays are full (the caller grows them and calls again).
    """
    n_rows = rows.shape[0]
    row0, stream0 = row, stream
    capacity = out_unit.size
    for i in range(doc_idx.size):
        p = lo + i
        d = np.int64(doc_idx[i])
        first_row = row
        while row < n_rows and rows[row, 0] == p:
            row += 1
        if in_filter(table, mask, d):
            k = _find(documents, d)
            if k >= 0:
                for q in range(first_unit[k], first_unit[k + 1]):
                    u = units[q]
                    first = stream + starts[u]
                    last = stream + ends[u] - 1
                    holder = first_row - 1  # the last row before this document
                    for r in range(first_row, row):
                        if stream + rows[r, 1] <= first:
                            holder = r
                    if holder < 0 or holder >= n_rows - 1:
                        continue  # before the first sample, or after the last one's end
                    nxt = holder + 1
                    if nxt < row and last > stream + rows[nxt, 1]:
                        continue  # the span goes on into the next sample
                    if n_out >= capacity:
                        return -1, row0, stream0
                    out_unit[n_out] = u
                    out_sample[n_out] = holder
                    n_out += 1
        stream += lengths[i]
    return n_out, row, stream


def span_hits_numpy(doc_idx, sizes, rows, spans) -> tuple:
    """Oracle of :func:`span_hits` over whole maps: ``(unit, sample)`` of every whole span,
    from the stream start of every document and every row (numpy, all in memory)."""
    lengths = np.asarray(sizes)[np.asarray(doc_idx)].astype(np.int64)
    doc_start = np.concatenate([[0], np.cumsum(lengths)])
    rows = np.asarray(rows).astype(np.int64)
    F = doc_start[rows[:, 0]] + rows[:, 1]
    out_unit, out_sample = [], []
    for u, (d, start, end) in enumerate(spans):
        for p in np.flatnonzero(np.asarray(doc_idx) == d):
            first, last = doc_start[p] + start, doc_start[p] + end - 1
            i = int(np.searchsorted(F, first, side="right")) - 1
            if 0 <= i < F.size - 1 and last <= F[i + 1]:
                out_unit.append(u)
                out_sample.append(i)
    return np.asarray(out_unit, dtype=np.int64), np.asarray(out_sample, dtype=np.int64)


@njit(cache=True, nogil=True)
def positions_of_samples(shuffle_idx, lo, table, mask, samples, out):  # pragma: no cover
    """One chunk of ``shuffle_idx`` (its entries ``lo ..``): ``out[k] = j`` where
    ``shuffle_idx[j]`` is ``samples[k]`` (``samples`` sorted and unique; ``out`` -1 where
    not found yet). Returns -1, or the position ``j`` of an entry whose sample an earlier
    position already holds (``shuffle_idx`` is then not a permutation)."""
    for i in range(shuffle_idx.size):
        s = np.int64(shuffle_idx[i])
        if in_filter(table, mask, s):
            k = _find(samples, s)
            if k >= 0:
                if out[k] >= 0:
                    return lo + i
                out[k] = lo + i
    return -1


@njit(cache=True, nogil=True)
def sample_starts_chunk(lengths, rows, position, stream, out):  # pragma: no cover
    """Stream position of each row of a chunk of ``sample_idx``: ``position`` is a document
    position at or before the chunk's first row, ``stream`` where it starts, ``lengths`` the
    lengths of the documents from ``position`` to the chunk's last row's (:func:`gather_sizes`).
    Returns the position and stream start reached (the chunk's last row's document)."""
    base = position
    for i in range(rows.shape[0]):
        target = rows[i, 0]
        while position < target:
            stream += lengths[position - base]
            position += 1
        out[i] = stream + rows[i, 1]
    return position, stream


def sample_starts_chunk_numpy(doc_idx, sizes, rows, position, stream) -> np.ndarray:
    """Oracle of :func:`sample_starts_chunk` (numpy)."""
    rows = np.asarray(rows).astype(np.int64)
    high = int(rows[-1, 0])
    lengths = np.asarray(sizes)[np.asarray(doc_idx[position:high])].astype(np.int64)
    local = np.concatenate([[stream], stream + np.cumsum(lengths)])
    return local[rows[:, 0] - position] + rows[:, 1]


@njit(cache=True, nogil=True)
def map_bounds(values):  # pragma: no cover - compiled
    """``(min, max)`` of a non-empty chunk in one pass."""
    low = np.int64(values[0])
    high = low
    for i in range(values.size):
        v = np.int64(values[i])
        if v < low:
            low = v
        elif v > high:
            high = v
    return low, high


@njit(cache=True, nogil=True)
def sample_rows_bounds(rows, previous):  # pragma: no cover - compiled
    """One chunk of ``sample_idx``: ``(lowest position, highest position, lowest offset,
    index of the first row that goes back, or -1)``; ``previous`` is the position of the
    row before the chunk."""
    low_pos = np.int64(rows[0, 0])
    high_pos = low_pos
    low_off = np.int64(rows[0, 1])
    back = -1
    for i in range(rows.shape[0]):
        p = np.int64(rows[i, 0])
        o = np.int64(rows[i, 1])
        if p < low_pos:
            low_pos = p
        if p > high_pos:
            high_pos = p
        if o < low_off:
            low_off = o
        if back < 0 and p < previous:
            back = i
        previous = p
    return low_pos, high_pos, low_off, back


@njit(cache=True, nogil=True)
def mark_seen(values, lo, seen):  # pragma: no cover - compiled
    """One chunk of a map whose entries ``lo ..`` are in ``0 .. 8 * seen.size - 1``: set
    bit ``v`` of ``seen`` (a bit set, one bit a value) for each entry ``v``; returns the
    position of the first entry whose bit was already set (a value seen before), or -1."""
    for i in range(values.size):
        v = np.int64(values[i])
        byte = v >> 3
        bit = np.uint8(1) << np.uint8(v & 7)
        if seen[byte] & bit:
            return lo + i
        seen[byte] |= bit
    return -1
