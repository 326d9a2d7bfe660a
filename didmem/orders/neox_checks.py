"""Checks of GPT-NeoX index maps against each other and against the dataset's sizes.

The compiled passes of :mod:`didmem.orders.neox_kernels` index one map with another's
entries (``sizes[doc_idx[p]]``, ``doc_idx[sample_idx[i, 0]]``) without a bounds check, so
every entry they follow is checked here first, at the public functions of
:mod:`didmem.orders.neox`, with one vectorised or compiled pass; a message names the map,
the entry's position and its value.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .neox_kernels import map_bounds, mark_seen, sample_rows_bounds

__all__ = ["checked_sizes", "check_map_values", "check_sample_rows", "check_within",
           "map_label", "map_range", "too_many_documents"]

_CHUNK = 1 << 22
"""Entries of a map read at once (memory stays ~ 100 MB whatever the maps' size)."""


def checked_sizes(maps, doc_sizes) -> np.ndarray:
    """``doc_sizes`` as an array, checked to be the sizes of the documents ``maps`` names:
    1-D, integer, non-negative, and covering every document of ``doc_idx`` (the compiled
    passes gather ``sizes[doc_idx[p]]`` without a bounds check). One pass over ``doc_idx``."""
    sizes = np.asarray(doc_sizes)
    if sizes.ndim != 1 or sizes.dtype.kind not in "iu":
        raise ParameterError("doc_sizes must be the indexed dataset's sizes, a 1-D array of "
                             f"integers; got an array of {sizes.dtype} of shape {sizes.shape}.")
    if sizes.size and int(sizes.min()) < 0:
        at = int(np.argmin(sizes))
        raise ParameterError(f"doc_sizes holds a negative size, {int(sizes[at])} at "
                             f"document {at}.")
    doc_idx = maps.doc_idx
    if doc_idx.shape[0]:
        low, high = map_range(doc_idx)
        if low < 0 or high >= sizes.size:
            at, value = _first_outside(doc_idx, 0, sizes.size)
            raise ParameterError(
                f"doc_idx ({map_label(maps.files, 'doc_idx')!r}) names document "
                f"{value} at position {at}, but doc_sizes has {sizes.size} entries "
                f"(documents 0 .. {sizes.size - 1}): the sizes are of another or a cut "
                "indexed dataset.")
    return sizes


def _first_outside(values, low: int, high: int) -> tuple:
    """``(position, value)`` of the first entry of a map outside ``low .. high - 1``."""
    for lo in range(0, values.shape[0], _CHUNK):
        chunk = np.asarray(values[lo:lo + _CHUNK])
        bad = (chunk < low) | (chunk >= high)
        if bad.any():
            i = int(np.argmax(bad))
            return lo + i, int(chunk[i])
    raise AssertionError("no entry outside the range")  # pragma: no cover - callers check


def too_many_documents(files, doc_idx, n_documents) -> None:
    raise ParameterError(
        f"{str(files['doc_idx'])!r} names document {map_range(doc_idx)[1]}, but the indexed "
        f"dataset has {n_documents} documents: the maps belong to another dataset.")


def map_range(values) -> tuple:
    """``(min, max)`` of a map, one compiled pass in chunks."""
    low, high = None, None
    for lo in range(0, values.shape[0], _CHUNK):
        a, b = map_bounds(values[lo:lo + _CHUNK])
        low, high = (a, b) if low is None else (min(low, a), max(high, b))
    return int(low), int(high)


def check_map_values(files, doc_idx, sample_idx, shuffle_idx, n_documents) -> None:
    n_samples = sample_idx.shape[0] - 1
    low, high = map_range(shuffle_idx)
    if low < 0 or high >= n_samples:
        at, bad = _first_outside(shuffle_idx, 0, n_samples)
        raise ParameterError(f"{str(files['shuffle_idx'])!r} holds sample {bad} at position "
                             f"{at}, outside the {n_samples} samples of "
                             f"{str(files['sample_idx'])!r}.")
    _check_permutation(files, shuffle_idx, n_samples)
    if doc_idx.size:
        low, high = map_range(doc_idx)
        if low < 0:
            at, bad = _first_outside(doc_idx, 0, max(high + 1, 1))
            raise ParameterError(f"{str(files['doc_idx'])!r} holds a negative document id, "
                                 f"{bad} at position {at}.")
        if n_documents is not None and high >= n_documents:
            too_many_documents(files, doc_idx, n_documents)
    check_sample_rows(files, sample_idx, doc_idx.shape[0])


def _check_permutation(files, shuffle_idx, n_samples: int) -> None:
    """``shuffle_idx`` (its entries within ``0 .. n_samples - 1``, one per sample) must be a
    permutation: a repeated sample is trained twice and another never (its exposure lost).
    One compiled pass with a bit set of the samples (``n_samples / 8`` bytes)."""
    seen = np.zeros((n_samples + 7) // 8, dtype=np.uint8)
    for lo in range(0, shuffle_idx.shape[0], _CHUNK):
        repeat = mark_seen(shuffle_idx[lo:lo + _CHUNK], lo, seen)
        if repeat >= 0:
            value = int(shuffle_idx[repeat])
            first = _first_equal(shuffle_idx, value)
            missing = _first_unseen(shuffle_idx, n_samples)
            raise ParameterError(
                f"{map_label(files, 'shuffle_idx')!r} is not a permutation of the {n_samples} "
                f"samples: sample {value} is at positions {first} and {repeat}, and sample "
                f"{missing} is at none (GPT-NeoX shuffles every sample once); the file is "
                "corrupt or of another run.")


def _first_equal(values, value: int) -> int:
    """The first position of ``value`` in a map (which holds it)."""
    for lo in range(0, values.shape[0], _CHUNK):
        hit = np.flatnonzero(np.asarray(values[lo:lo + _CHUNK]) == value)
        if hit.size:
            return lo + int(hit[0])
    raise AssertionError("value not in the map")  # pragma: no cover - callers check


def map_label(files, map_name: str) -> str:
    """How messages name one map: its file, or its name for maps built in memory."""
    return str(files.get(map_name, map_name))


def _first_unseen(shuffle_idx, n_samples: int) -> int:
    """The lowest sample that no entry of ``shuffle_idx`` holds."""
    seen = np.zeros(n_samples, dtype=bool)
    for lo in range(0, shuffle_idx.shape[0], _CHUNK):
        seen[np.asarray(shuffle_idx[lo:lo + _CHUNK])] = True
    return int(np.argmin(seen))


def check_sample_rows(files, sample_idx, n_positions: int) -> None:
    """``sample_idx``'s rows within ``doc_idx`` (``n_positions`` entries), offsets
    non-negative, positions in stream order; one compiled pass in chunks."""
    previous = 0
    for lo in range(0, sample_idx.shape[0], _CHUNK):
        block = sample_idx[lo:lo + _CHUNK]
        low_pos, high_pos, low_off, back = sample_rows_bounds(block, previous)
        if high_pos >= n_positions or low_pos < 0:
            column = np.asarray(block[:, 0])
            i = int(np.argmax((column < 0) | (column >= n_positions)))
            raise ParameterError(
                f"{map_label(files, 'sample_idx')!r} points at position {int(column[i])} of "
                f"doc_idx at row {lo + i}, but doc_idx has {n_positions} entries: the maps "
                "are of different runs or sizes.")
        if low_off < 0:
            column = np.asarray(block[:, 1])
            i = int(np.argmax(column < 0))
            raise ParameterError(f"{map_label(files, 'sample_idx')!r} holds a negative offset, "
                                 f"{int(column[i])} at row {lo + i}.")
        if back >= 0:
            raise ParameterError(f"{map_label(files, 'sample_idx')!r} goes back in doc_idx at row "
                                 f"{lo + back}: its rows must follow the token stream.")
        previous = int(block[-1, 0])


def check_within(values, n: int, where, map_name: str, maps, what: str,
            unit: str = "position") -> None:
    """Refuse an entry of ``values`` (read from ``map_name`` at ``where``) outside
    ``0 .. n - 1``, naming the map, the entry's place and its value."""
    bad = (values < 0) | (values >= n)
    if bad.any():
        i = int(np.argmax(bad))
        raise ParameterError(
            f"{map_name} ({map_label(maps.files, map_name)!r}) holds {int(values[i])} at {unit} "
            f"{int(np.asarray(where)[i])}, which is not {what} (0 .. {n - 1}): the maps "
            "do not fit together or belong to another dataset.")
