"""Windowed search: a sampled instance's content anywhere inside the rows of a data order.

Whole-row hashing (:func:`~didmem.orders.find_repeats`) finds a repeat only
when it was packed into an identical row. A document repeated in Pythia's standard Pile, or
the second copy of a document in the deduplicated suite's second pass, is re-packed with other
neighbours at another offset, so the row that trains it again differs from the sampled one.
:func:`find_windows` finds such copies by their ``k``-token windows (``k = 50`` by default,
the length of Carlini et al.'s extraction test):

1. Every ``k``-token window of every sampled instance (each offset) is hashed with a
   polynomial rolling hash modulo 2^64 and indexed (sorted keys plus a bitmap prefilter).
2. One pass over the rows ``start .. stop-1`` of the order hashes, in each row, the windows
   that start at multiples of ``stride`` and looks each up in the index (numba, parallel over
   rows; the rows that hit are hashed again to list their hits).
3. Each hit is checked token by token and extended along its diagonal (row offset minus
   instance offset) to the maximal run of equal tokens; runs shorter than ``k`` are dropped.

**How far it reaches.** In the rows searched, every run of at least ``k + stride - 1``
consecutive tokens shared with a sampled instance is found, at its full length (with
``stride = 1``: every run of at least ``k``); a run of ``k .. k + stride - 2`` tokens is found
when one of the row's stride positions falls in the right place. Copies outside the rows
searched are not found, nor copies changed inside every window (a different tokenisation of
the same text). Its cost is one pass over the data, about as fast as whole-row hashing
(``benchmarks/pythia_windows.py``; rows per second in ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numba import njit, prange

from ..errors import ParameterError
from .exposures import exposure_steps
from .pythia_repeats import _check_range

__all__ = ["window_hashes", "find_windows", "window_exposures"]

_BASE = np.uint64(0x100000001B3)
_ROWS_PER_CHUNK = 1 << 15


@njit(cache=True)
def _power(base, k):  # pragma: no cover - compiled
    out = np.uint64(1)
    for _ in range(k):
        out = out * base
    return out


@njit(cache=True)
def _windows_kernel(seq, k, out):  # pragma: no cover - compiled
    """Hash of every ``k``-window of ``seq`` (``out[i]``: tokens ``i .. i+k-1``)."""
    base = np.uint64(0x100000001B3)
    top = _power(base, k)
    h = np.uint64(0)
    for j in range(seq.size):
        h = h * base + np.uint64(seq[j]) + np.uint64(1)
        if j >= k:
            h = h - (np.uint64(seq[j - k]) + np.uint64(1)) * top
        if j >= k - 1:
            out[j - k + 1] = h


def _windows_numpy(seq, k):
    """The plain-numpy twin of the kernel (test oracle): each window's sum of
    ``(t_i + 1) · B^(k-1-i)`` modulo 2^64."""
    seq = np.asarray(seq, dtype=np.uint64) + np.uint64(1)
    powers = np.ones(k, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i in range(k - 2, -1, -1):
            powers[i] = powers[i + 1] * _BASE
        return np.array([(seq[i:i + k] * powers).sum(dtype=np.uint64)
                         for i in range(seq.size - k + 1)], dtype=np.uint64)


def window_hashes(tokens, window: int) -> np.ndarray:
    """The rolling hash of every ``window``-token window of ``tokens`` (uint64).

    Examples
    --------
    >>> h = window_hashes([5, 6, 7, 5, 6, 7], 3)
    >>> bool(h[0] == h[3]), bool(h[0] == h[1])
    (True, False)
    """
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ParameterError(f"window_hashes: the window must be a positive integer (tokens "
                             f"per window); got {window!r}.")
    values = np.asarray(tokens)
    if values.ndim != 1 or (values.size and values.dtype.kind not in "iu"):
        raise ParameterError(f"window_hashes: the tokens must be a 1-D sequence of integer token "
                             f"ids; got {values.dtype} of shape {values.shape}.")
    window = int(window)
    seq = np.ascontiguousarray(values.astype(np.int64))
    out = np.empty(max(seq.size - window + 1, 0), np.uint64)
    if out.size:
        _windows_kernel(seq, int(window), out)
    return out


@njit(cache=True)
def _lookup(keys, bitmap, shift, h):  # pragma: no cover - compiled
    slot = h >> shift
    if not (bitmap[slot >> np.uint64(3)] >> (slot & np.uint64(7))) & 1:
        return -1
    lo, hi = 0, keys.size
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid] < h:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < keys.size and keys[lo] == h else -1


@njit(cache=True)
def _row_hits(buf, s, n, k, stride, keys, bitmap, shift, out_pos, out_key):  # pragma: no cover
    """Hits of one row: stride positions whose window hash is a key; returns how many
    (writing at most ``out_pos.size``)."""
    base = np.uint64(0x100000001B3)
    top = _power(base, k)
    h = np.uint64(0)
    hits = 0
    for j in range(min(k, n)):
        h = h * base + np.uint64(buf[s + j]) + np.uint64(1)
    wait = 0  # windows until the next stride position
    for p in range(n - k + 1):
        if p:
            h = (h * base + np.uint64(buf[s + p + k - 1]) + np.uint64(1)
                 - (np.uint64(buf[s + p - 1]) + np.uint64(1)) * top)
        if wait == 0:
            wait = stride
            found = _lookup(keys, bitmap, shift, h)
            if found >= 0:
                if hits < out_pos.size:
                    out_pos[hits] = p
                    out_key[hits] = found
                hits += 1
        wait -= 1
    return hits


@njit(parallel=True, cache=True)
def _count_hits(buf, starts, lengths, k, stride, keys, bitmap, shift, counts):  # pragma: no cover
    empty_pos = np.empty(0, np.int64)
    empty_key = np.empty(0, np.int64)
    for r in prange(starts.size):
        counts[r] = _row_hits(buf, starts[r], lengths[r], k, stride, keys, bitmap, shift,
                              empty_pos, empty_key)


class _Index:
    """Every window of the sampled instances: sorted hashes, their owners and a bitmap."""

    def __init__(self, tokens, window: int):
        hashes, owner, offset = [], [], []
        for i, seq in enumerate(tokens):
            h = window_hashes(seq, window)
            hashes.append(h)
            owner.append(np.full(h.size, i, np.int64))
            offset.append(np.arange(h.size, dtype=np.int64))
        hashes = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
        order = np.argsort(hashes, kind="stable")
        self.all_hashes = hashes[order]
        self.owner = np.concatenate(owner)[order] if owner else np.zeros(0, np.int64)
        self.offset = np.concatenate(offset)[order] if offset else np.zeros(0, np.int64)
        self.keys, self.first = np.unique(self.all_hashes, return_index=True)
        self.count = np.diff(np.append(self.first, self.all_hashes.size))
        bits = int(max(10, np.ceil(np.log2(max(self.keys.size, 1))) + 4))
        self.shift = np.uint64(64 - bits)
        self.bitmap = np.zeros((1 << bits) // 8, np.uint8)
        slots = self.keys >> self.shift
        np.bitwise_or.at(self.bitmap, (slots >> np.uint64(3)).astype(np.int64),
                         (np.uint8(1) << (slots & np.uint64(7)).astype(np.uint8)))


def _runs(row, seq, diagonal, window):
    """Maximal runs of equal tokens, at least ``window`` long, where ``row[p] == seq[p - d]``."""
    lo, hi = max(0, diagonal), min(row.size, seq.size + diagonal)
    if hi - lo < window:
        return []
    equal = np.concatenate([[False], row[lo:hi] == seq[lo - diagonal:hi - diagonal], [False]])
    edges = np.flatnonzero(np.diff(equal.astype(np.int8)))
    return [(lo + a, b - a) for a, b in zip(edges[::2], edges[1::2]) if b - a >= window]


def find_windows(dataset, units, tokens, *, batch_size: int, window: int = 50,
                 stride: int | None = None, start: int = 0, stop: int | None = None,
                 where: str = "pythia") -> pd.DataFrame:
    """Every run of at least ``window`` tokens of a sampled instance inside rows of the order.

    Parameters
    ----------
    dataset : MMapIndexedDataset
        The data order.
    units : array_like
        The sampled instances' unit ids.
    tokens : sequence of array_like of int
        Their token ids.
    batch_size : int
        Sequences per optimisation step.
    window : int
        ``k``: tokens per window (50, the length of Carlini et al.'s extraction test).
    stride : int, optional
        Row positions looked up: every ``stride``-th (default ``window``). Every shared
        run of at least ``window + stride - 1`` tokens is found.
    start, stop : int
        The rows searched (default: the whole file). Say this range in the report.
    where : str
        How errors name the design.

    Returns
    -------
    pandas.DataFrame
        One row per run: ``unit``, ``position`` (the row), ``step`` (``position //
        batch_size + 1``), ``offset`` (where the run starts in the row),
        ``instance_offset`` (where it starts in the instance) and ``tokens`` (its length),
        sorted by unit, position and offset. An instance's own row is among them (one run
        of its whole length) when it lies in the range.
    """
    stop = len(dataset) if stop is None else int(stop)
    _check_range(dataset, start, stop, where)
    for name, value in (("window", window), ("stride", stride)):
        integral = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if (value is not None or name == "window") and (not integral or value < 1):
            raise ParameterError(f"{where}: {name} must be a positive integer; got {value!r}.")
    stride = int(window if stride is None else stride)
    units = np.asarray(units)
    seqs = [np.asarray(t) for t in tokens]
    for i, seq in enumerate(seqs):  # float ids would be truncated to other tokens
        if seq.ndim != 1 or (seq.size and seq.dtype.kind not in "iu"):
            raise ParameterError(f"{where}: the token ids of instance {i} must be a 1-D sequence "
                                 f"of integers; got {seq.dtype} of shape {seq.shape}.")
    seqs = [seq.astype(np.int64) for seq in seqs]
    if len(seqs) != units.size:
        raise ParameterError(f"{where}: {units.size} units but {len(seqs)} token sequences.")
    index = _Index(seqs, int(window))
    found = {}
    itemsize = dataset.dtype.itemsize
    for lo in range(start, stop, _ROWS_PER_CHUNK):
        hi = min(lo + _ROWS_PER_CHUNK, stop)
        pointers = np.asarray(dataset.pointers[lo:hi], dtype=np.int64)
        sizes = np.asarray(dataset.sizes[lo:hi], dtype=np.int64)
        first = int(pointers.min())  # rows need not be stored in order: no negative start
        last = int((pointers + sizes * itemsize).max())
        buf = np.asarray(dataset._bin[first:last]).view(dataset.dtype)
        starts = (pointers - first) // itemsize
        counts = np.zeros(hi - lo, np.int64)
        if index.keys.size:
            _count_hits(buf, starts, sizes, int(window), stride, index.keys, index.bitmap,
                        index.shift, counts)
        for r in np.flatnonzero(counts):
            pos = np.empty(counts[r], np.int64)
            key = np.empty(counts[r], np.int64)
            _row_hits(buf, starts[r], sizes[r], int(window), stride, index.keys, index.bitmap,
                      index.shift, pos, key)
            row = buf[starts[r]:starts[r] + sizes[r]].astype(np.int64)
            for p, kk in zip(pos, key):
                first_entry = index.first[kk]
                for e in range(first_entry, first_entry + index.count[kk]):
                    owner, off = int(index.owner[e]), int(index.offset[e])
                    diag = int(p) - off
                    if (owner, lo + int(r), diag) in found:
                        continue
                    found[(owner, lo + int(r), diag)] = _runs(row, seqs[owner], diag,
                                                              int(window))
    rows = [(units[o], pos, start_, start_ - d, n)
            for (o, pos, d), runs in found.items() for start_, n in runs]
    frame = pd.DataFrame(rows, columns=["unit", "position", "offset", "instance_offset",
                                        "tokens"])
    if not rows:
        frame = frame.astype({"unit": units.dtype if units.size else np.int64,
                              "position": np.int64, "offset": np.int64,
                              "instance_offset": np.int64, "tokens": np.int64})
    frame = frame.drop_duplicates().astype({"position": np.int64, "offset": np.int64,
                                            "instance_offset": np.int64, "tokens": np.int64})
    frame.insert(2, "step", exposure_steps(frame["position"], batch_size))
    return frame.sort_values(["unit", "position", "offset"], kind="stable").reset_index(drop=True)


def window_exposures(runs: pd.DataFrame, min_tokens: int) -> pd.DataFrame:
    """Exposures from :func:`find_windows`: rows holding ``min_tokens`` tokens of an instance.

    Parameters
    ----------
    runs : pandas.DataFrame
        The runs found.
    min_tokens : int
        Tokens of the instance a row must hold (summed over its runs) to count as an
        exposure of it; the instance's length counts only whole-row repeats.

    Returns
    -------
    pandas.DataFrame
        ``unit``, ``position``, ``step`` and ``tokens`` (held in the row), one row per
        exposure, sorted by unit and position.
    """
    held = runs.groupby(["unit", "position", "step"], as_index=False, sort=True)["tokens"].sum()
    return held[held["tokens"] >= int(min_tokens)].reset_index(drop=True)
