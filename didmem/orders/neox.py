"""GPT-NeoX / Megatron index maps: which documents and token spans each training sequence holds.

PolyPythias (van der Wal et al. 2025) trained Pythia models with several seeds; each data
seed's order is a set of GPT-NeoX index maps over the (unshuffled) indexed dataset's
``.idx`` / ``.bin`` (:class:`~didmem.orders.MMapIndexedDataset`), three ``.npy`` files named
``{prefix}_{name}_indexmap_{num_samples}ns_{seq_length}sl_{seed}s_{doc,sample,shuffle}_idx.npy``
(``name`` is ``train_0`` for the first training path). Their meaning, as GPT-NeoX v1.0
(commit ``d36f623``, the one Pythia was trained with) builds and reads them in
``megatron/data/gpt2_dataset.py``:

``doc_idx`` (int32, ``E * D``)
    The ``D`` documents (entries of the indexed dataset) repeated for the ``E`` epochs
    needed, the whole array shuffled once with ``numpy.random.RandomState(seed)``.
``sample_idx`` (int32, ``(N + 1) x 2``)
    Row ``i``: a position in ``doc_idx`` and a token offset in that document. Reading the
    documents of ``doc_idx`` one after the other as one token stream, sample ``i`` is the
    ``L + 1`` tokens from row ``i`` to row ``i + 1``, both ends included (``L`` the
    sequence length): consecutive samples share one token, and sample ``i`` starts at
    token ``i * L`` of the stream. ``N = (E * T - 1) // L`` with ``T`` the tokens of one
    epoch.
``shuffle_idx`` (uint32, int64 from ``2**32 - 1`` entries; ``N``)
    A permutation of ``0 .. N-1`` drawn after ``doc_idx`` from the same generator: the
    ``j``-th training sequence is sample ``shuffle_idx[j]``.

With one training dataset, the ``j``-th training sequence is trained at step
``j // B + 1`` (``B`` the global batch size: 1,024 for Pythia), as
:func:`~didmem.orders.exposure_steps` counts. Training asks for ``num_samples`` sequences
(``train_iters * B``, the ``{num_samples}ns`` of the names) and the maps hold every sample of
the whole epochs built for them, so the positions from ``num_samples`` on are never trained
(:attr:`IndexMaps.trained`).

Instances are defined by content, so that the same instance is found in every run
although the packing differs: a *span* ``(document, start, end)`` (tokens ``start ..
end - 1`` of a document) is trained by a training sequence that holds all of its tokens;
a *document* ``d`` is the span of all its tokens. Each time a span is trained is an
exposure (a document seen in another epoch, or a span falling whole into two samples
of different epochs). :func:`span_exposures` gives them for one run,
:func:`run_exposures` for several runs, with a ``run`` column.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ParameterError
from .exposures import exposure_cohorts, exposure_frame
from .neox_checks import (check_map_values, check_sample_rows, check_within, checked_sizes,
                          map_label, map_range, too_many_documents)
from .neox_kernels import (gather_sizes, lookup_filter, positions_of_samples,
                           sample_starts_chunk, span_hits)

__all__ = ["IndexMaps", "index_map_files", "read_index_maps", "write_index_maps",
           "build_index_maps", "span_exposures", "run_exposures", "run_cohorts",
           "sequence_spans", "sample_starts", "MAP_NAMES"]

MAP_NAMES = ("doc_idx", "sample_idx", "shuffle_idx")
"""The three files of one run's index maps, by the suffix of their names."""

_NAME = re.compile(r"_(?P<samples>\d+)ns_(?P<length>\d+)sl_(?P<seed>\d+)s$")


def index_map_files(path, seed: int | None = None) -> dict:
    """The three ``.npy`` files of one run's index maps.

    Parameters
    ----------
    path : str or os.PathLike
        The maps' common prefix (``..._indexmap_146432000ns_2048sl_1234s``), any one of
        the three files, or a directory that holds one run's maps (or several runs', with
        ``seed``).
    seed : int, optional
        The run's seed, to pick its maps in a directory of several runs' maps.

    Returns
    -------
    dict
        ``{"doc_idx": Path, "sample_idx": Path, "shuffle_idx": Path}``.

    Raises
    ------
    ParameterError
        No maps, several candidates, or a file of the three missing.
    """
    path = Path(os.fspath(path))
    if path.is_dir():
        pattern = f"*_{int(seed)}s_doc_idx.npy" if seed is not None else "*_doc_idx.npy"
        found = sorted(path.glob(pattern))
        if not found:
            what = f" of seed {seed}" if seed is not None else ""
            raise ParameterError(f"{str(path)!r} holds no GPT-NeoX index maps{what} (no file "
                                 f"matching {pattern!r}).")
        if len(found) > 1:
            raise ParameterError(
                f"{str(path)!r} holds the index maps of several runs ({len(found)}, e.g. "
                f"{found[0].name!r} and {found[1].name!r}); name the run's seed or its files' "
                "prefix.")
        prefix = str(found[0])[: -len("_doc_idx.npy")]
    else:
        prefix = str(path)
        for map_name in MAP_NAMES:
            if prefix.endswith(f"_{map_name}.npy"):
                prefix = prefix[: -len(f"_{map_name}.npy")]
    files = {map_name: Path(f"{prefix}_{map_name}.npy") for map_name in MAP_NAMES}
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        raise ParameterError(f"GPT-NeoX index maps {prefix!r}: {missing[0]!r} does not exist "
                             f"(a run's maps are the three files *_{{{','.join(MAP_NAMES)}}}"
                             ".npy).")
    return files


@dataclass(frozen=True)
class IndexMaps:
    """One run's GPT-NeoX index maps, memory-mapped and checked.

    Attributes
    ----------
    doc_idx : numpy.ndarray
        Document of each position of the epochs' shuffled document order.
    sample_idx : numpy.ndarray
        ``(N + 1) x 2``: position in ``doc_idx`` and offset where each sample starts.
    shuffle_idx : numpy.ndarray
        Sample of each training sequence.
    files : dict
        Where each map was read from.
    seq_length : int or None
        ``L`` from the files' names (``..._2048sl_...``), when they follow GPT-NeoX's naming.
    seed : int or None
        The seed in the files' names.
    trained : int or None
        The training sequences the run asked for (``num_samples``, ``..._146432000ns_...``
        in the names): positions from it on are never trained. ``None``: every position.
    """

    doc_idx: np.ndarray
    sample_idx: np.ndarray
    shuffle_idx: np.ndarray
    files: dict
    seq_length: int | None = None
    seed: int | None = None
    trained: int | None = None

    @property
    def n_samples(self) -> int:
        """Samples ``N`` (rows of ``sample_idx`` less one)."""
        return int(self.sample_idx.shape[0]) - 1

    def __len__(self) -> int:
        """Training sequences (entries of ``shuffle_idx``)."""
        return int(self.shuffle_idx.shape[0])

    @property
    def label(self) -> str:
        """How messages name these maps (their common prefix)."""
        first = str(self.files.get("doc_idx", "index maps"))
        return first[: -len("_doc_idx.npy")] if first.endswith("_doc_idx.npy") else first

    def training_positions(self) -> np.ndarray:
        """The inverse of ``shuffle_idx``: the training position of each sample (-1 for a
        sample that no position holds); int32 where it fits, filled in chunks."""
        n = self.n_samples
        dtype = np.int32 if len(self) < np.iinfo(np.int32).max else np.int64
        inverse = np.full(n, -1, dtype=dtype)
        for lo in range(0, len(self), _CHUNK):
            hi = min(lo + _CHUNK, len(self))
            inverse[np.asarray(self.shuffle_idx[lo:hi])] = np.arange(lo, hi, dtype=dtype)
        return inverse


_CHUNK = 1 << 22
"""Entries of a map read at once (memory stays ~ 100 MB whatever the maps' size)."""


def _sample_starts(maps: IndexMaps, sizes: np.ndarray):
    """Yield ``(i0, F)``: the token-stream starts ``F`` of samples ``i0 .. i0 + len(F) - 1``,
    in chunks that overlap by one sample (so that sample ``i``'s end ``F[i + 1]`` is in the
    chunk of ``i``); one compiled pass over ``doc_idx`` (:func:`~didmem.orders.neox_kernels.
    sample_starts_chunk`)."""
    rows = maps.sample_idx
    n = maps.n_samples
    position, stream = 0, 0
    for i0 in range(0, n, _CHUNK):
        block = rows[i0:min(i0 + _CHUNK, n) + 1]
        high = max(int(block[-1, 0]), position)
        lengths = np.empty(high - position, dtype=np.int64)
        gather_sizes(maps.doc_idx[position:high], sizes, lengths)
        out = np.empty(block.shape[0], dtype=np.int64)
        position, stream = sample_starts_chunk(lengths, block, position, stream, out)
        yield i0, out


def sample_starts(maps: IndexMaps, doc_sizes) -> np.ndarray:
    """Token-stream position where each sample starts, and where the last one ends.

    An int64 array ``F`` of ``N + 1`` entries: sample ``i`` is the tokens from ``F[i]`` to
    ``F[i + 1]``, both included. It holds all of them in memory (8 bytes a sample);
    :func:`span_exposures` reads them in chunks instead.

    Raises
    ------
    ParameterError
        ``doc_sizes`` not the sizes of the maps' dataset (``doc_idx`` names a document past
        its end), or ``sample_idx`` not within ``doc_idx`` or not in stream order (maps
        read with ``check_values=False``); the message names the array, the position and
        the value."""
    sizes = checked_sizes(maps, doc_sizes)
    check_sample_rows(maps.files, maps.sample_idx, maps.doc_idx.shape[0])
    out = np.empty(maps.n_samples + 1, dtype=np.int64)
    for i0, starts in _sample_starts(maps, sizes):
        out[i0:i0 + starts.size] = starts
    return out


def _load(path: Path, map_name: str, ndim: int) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ParameterError(f"{str(path)!r} ({map_name}) cannot be read as a .npy array: "
                             f"{reason}") from None
    if array.dtype.kind not in "iu":
        raise ParameterError(f"{str(path)!r} ({map_name}) must hold integers; it holds "
                             f"{array.dtype}.")
    if array.ndim != ndim or (map_name == "sample_idx" and array.shape[1] != 2):
        shape = "N + 1 rows of 2" if map_name == "sample_idx" else "one dimension"
        raise ParameterError(f"{str(path)!r} ({map_name}) must have {shape}; its shape is "
                             f"{array.shape}.")
    if array.dtype == np.uint64:  # the passes read entries as int64: refuse what wraps
        top = np.iinfo(np.int64).max
        for lo in range(0, array.shape[0], _CHUNK):
            chunk = np.asarray(array[lo:lo + _CHUNK]).reshape(-1)
            if chunk.size and chunk.max() > top:
                i = int(np.argmax(chunk > top))
                where = (f"row {lo + i // 2}" if map_name == "sample_idx"
                         else f"position {lo + i}")
                raise ParameterError(
                    f"{str(path)!r} ({map_name}) holds {int(chunk[i])} at {where}, beyond "
                    "any index of a map (at most 2**63 - 1): the file is corrupt or not "
                    "an index map.")
    return array


def read_index_maps(path, seed: int | None = None, *, n_documents: int | None = None,
                    check_values: bool = True) -> IndexMaps:
    """Open one run's index maps (memory-mapped) and check that they fit together.

    Parameters
    ----------
    path : str or os.PathLike
        See :func:`index_map_files`.
    seed : int, optional
        The run's seed, to pick its maps in a directory.
    n_documents : int, optional
        Entries of the indexed dataset (``len(MMapIndexedDataset)``): every document of
        ``doc_idx`` must be one of them.
    check_values : bool
        Also check the values (one pass over each map): ``shuffle_idx`` within the
        samples, ``sample_idx`` within ``doc_idx`` and in stream order, ``doc_idx``
        non-negative.

    Returns
    -------
    IndexMaps

    Raises
    ------
    ParameterError
        A file missing or unreadable, of floating type or the wrong shape, or maps that
        do not fit together; the message names the file.
    """
    files = index_map_files(path, seed)
    doc_idx = _load(files["doc_idx"], "doc_idx", 1)
    sample_idx = _load(files["sample_idx"], "sample_idx", 2)
    shuffle_idx = _load(files["shuffle_idx"], "shuffle_idx", 1)
    n_samples = sample_idx.shape[0] - 1
    if shuffle_idx.shape[0] != n_samples:
        raise ParameterError(
            f"{str(files['shuffle_idx'])!r} has {shuffle_idx.shape[0]} entries, but "
            f"{str(files['sample_idx'])!r} has {sample_idx.shape[0]} rows, i.e. {n_samples} "
            "samples: GPT-NeoX writes one shuffle entry per sample. The maps are of "
            "different runs or sizes.")
    if check_values and n_samples > 0:
        check_map_values(files, doc_idx, sample_idx, shuffle_idx, n_documents)
    elif n_documents is not None and doc_idx.size and map_range(doc_idx)[1] >= n_documents:
        too_many_documents(files, doc_idx, n_documents)
    match = _NAME.search(str(files["doc_idx"])[: -len("_doc_idx.npy")])
    return IndexMaps(doc_idx=doc_idx, sample_idx=sample_idx, shuffle_idx=shuffle_idx,
                     files=files,
                     seq_length=int(match["length"]) if match else None,
                     seed=int(match["seed"]) if match else None,
                     trained=min(int(match["samples"]), n_samples) if match else None)


# ------------------------------------------------------------------ building (as GPT-NeoX)
def build_index_maps(doc_sizes, num_samples: int, seq_length: int, seed: int,
                     documents=None) -> tuple:
    """The index maps GPT-NeoX builds for ``num_samples`` samples of ``seq_length`` tokens.

    As ``_build_index_mappings`` of GPT-NeoX v1.0: enough epochs ``E`` that
    ``(E * T - 1) // L >= num_samples``; ``doc_idx`` the documents repeated ``E`` times and
    shuffled by ``RandomState(seed)``; ``sample_idx`` the starts of the samples, token
    ``i * L`` of the stream each; ``shuffle_idx`` a permutation of every sample, drawn next
    from the same generator. Vectorised, in chunks (GPT-NeoX walks the documents in C++).

    Parameters
    ----------
    doc_sizes : array_like of int
        Tokens of each entry of the indexed dataset (its ``sizes``).
    num_samples : int
        Training sequences needed (``train_iters * train_batch_size``).
    seq_length : int
        ``L`` (2,048 for Pythia; each sample holds ``L + 1`` tokens).
    seed : int
        The run's seed.
    documents : array_like of int, optional
        The entries used (default: all).

    Returns
    -------
    tuple of numpy.ndarray
        ``doc_idx`` (int32), ``sample_idx`` (int32, ``(N + 1) x 2``), ``shuffle_idx``
        (uint32, or int64 from ``2**32 - 1`` samples).
    """
    maps = _IndexMapBuilder(doc_sizes, num_samples, seq_length, seed, documents)
    sample_idx = np.empty((maps.n_samples + 1, 2), dtype=np.int32)
    maps.fill_samples(sample_idx)
    return maps.doc_idx, sample_idx, maps.shuffle()


class _IndexMapBuilder:
    """GPT-NeoX's three maps, built in its order: ``doc_idx`` at once, ``sample_idx`` into
    any array (a ``.npy`` memmap for large maps), ``shuffle_idx`` last."""

    def __init__(self, doc_sizes, num_samples, seq_length, seed, documents=None):
        self.sizes = np.asarray(doc_sizes, dtype=np.int32)
        documents = (np.arange(self.sizes.size, dtype=np.int32) if documents is None
                     else np.asarray(documents, dtype=np.int32))
        if seq_length < 2 or num_samples < 1:
            raise ParameterError(f"seq_length must be at least 2 and num_samples at least 1; "
                                 f"got {seq_length} and {num_samples}.")
        per_epoch = int(self.sizes[documents].astype(np.int64).sum())
        if per_epoch < 2:
            raise ParameterError("The documents hold fewer than 2 tokens.")
        epochs = 1
        while (epochs * per_epoch - 1) // seq_length < num_samples:
            epochs += 1
        self.seq_length = int(seq_length)
        self.n_samples = (epochs * per_epoch - 1) // seq_length
        self.rng = np.random.RandomState(seed)
        self.doc_idx = np.tile(documents, epochs).astype(np.int32, copy=False)
        self.rng.shuffle(self.doc_idx)

    def fill_samples(self, out) -> None:
        """Write ``sample_idx`` into ``out`` (``(N + 1) x 2``), one chunk of documents at a
        time: sample ``i`` starts at token ``i * L`` of the stream."""
        total, n, step = 0, self.n_samples, self.seq_length
        for lo in range(0, self.doc_idx.size, _CHUNK):
            lengths = self.sizes[self.doc_idx[lo:lo + _CHUNK]].astype(np.int64)
            local = np.empty(lengths.size + 1, dtype=np.int64)
            local[0] = total
            np.cumsum(lengths, out=local[1:])
            local[1:] += total
            first = -(-total // step)
            last = min(n, (int(local[-1]) - 1) // step)  # samples starting in this chunk
            if last >= first:
                flat = np.arange(first, last + 1, dtype=np.int64) * step
                where = np.searchsorted(local, flat, side="right") - 1
                out[first:last + 1, 0] = where + lo
                out[first:last + 1, 1] = flat - local[where]
            total = int(local[-1])

    def shuffle(self) -> np.ndarray:
        """``shuffle_idx``, drawn after ``doc_idx`` from the same generator."""
        dtype = np.uint32 if self.n_samples < np.iinfo(np.uint32).max - 1 else np.int64
        shuffle_idx = np.arange(self.n_samples, dtype=dtype)
        self.rng.shuffle(shuffle_idx)
        return shuffle_idx


def write_index_maps(prefix, doc_sizes, num_samples: int, seq_length: int, seed: int,
                     name: str = "train_0") -> IndexMaps:
    """Build (as :func:`build_index_maps`) and write one run's maps with GPT-NeoX's file
    names, ``{prefix}_{name}_indexmap_{num_samples}ns_{seq_length}sl_{seed}s_*.npy``;
    ``sample_idx`` is written through a memory map, so large maps need little memory."""
    base = f"{os.fspath(prefix)}_{name}_indexmap_{num_samples}ns_{seq_length}sl_{seed}s"
    maps = _IndexMapBuilder(doc_sizes, num_samples, seq_length, seed)
    np.save(f"{base}_doc_idx.npy", maps.doc_idx, allow_pickle=False)
    rows = np.lib.format.open_memmap(f"{base}_sample_idx.npy", mode="w+", dtype=np.int32,
                                     shape=(maps.n_samples + 1, 2))
    maps.fill_samples(rows)
    rows.flush()
    del rows
    maps.doc_idx = None
    np.save(f"{base}_shuffle_idx.npy", maps.shuffle(), allow_pickle=False)
    return read_index_maps(base)


# ------------------------------------------------------------------ reading
def sequence_spans(maps: IndexMaps, doc_sizes, positions) -> pd.DataFrame:
    """The document pieces each training sequence holds.

    Parameters
    ----------
    maps : IndexMaps
    doc_sizes : array_like of int
        The indexed dataset's ``sizes``.
    positions : array_like of int
        Training positions ``j`` (the ``j``-th training sequence).

    Returns
    -------
    pandas.DataFrame
        One row per piece, in the sequence's order: ``position``, ``document``, ``start``,
        ``end`` (tokens ``start .. end - 1`` of the document); the pieces of one sequence
        hold ``L + 1`` tokens together.

    Raises
    ------
    ParameterError
        A position outside the training sequences, or a map entry these positions reach
        that is outside the next map (or a document past the end of ``doc_sizes``); the
        message names the map, the entry's position and its value.
    """
    positions = np.asarray(positions)
    if positions.dtype.kind not in "iu" and positions.size:
        whole = positions.dtype.kind == "f" and bool(np.all(np.mod(positions, 1) == 0))
        if not whole:
            raise ParameterError(f"Training positions must be integers; got {positions.dtype} "
                                 f"values such as {positions.flat[0]!r}.")
    if positions.dtype == np.uint64 and positions.size \
            and positions.max() > np.iinfo(np.int64).max:
        raise ParameterError(f"Training positions must be in 0 .. {len(maps) - 1}; got "
                             f"{int(positions.max())}.")
    positions = positions.astype(np.int64)
    if positions.size and (positions.min() < 0 or positions.max() >= len(maps)):
        raise ParameterError(f"Training positions must be in 0 .. {len(maps) - 1}; got "
                             f"{int(positions.min())} .. {int(positions.max())}.")
    sizes = np.asarray(doc_sizes)
    if sizes.ndim != 1 or sizes.dtype.kind not in "iu":
        raise ParameterError("doc_sizes must be the indexed dataset's sizes, a 1-D array of "
                             f"integers; got an array of {sizes.dtype} of shape {sizes.shape}.")
    sample = np.asarray(maps.shuffle_idx[positions], dtype=np.int64)
    check_within(sample, maps.n_samples, positions, "shuffle_idx", maps,
            "a sample of sample_idx")
    rows = np.asarray(maps.sample_idx[np.concatenate([sample, sample + 1])]).reshape(
        2, -1, 2).astype(np.int64)
    first, last = rows[0, :, 0], rows[1, :, 0]
    check_within(rows[:, :, 0].ravel(), maps.doc_idx.shape[0],
            np.concatenate([sample, sample + 1]), "sample_idx", maps,
            "a position of doc_idx", unit="row")
    back = (last < first) | (rows[:, :, 1] < 0).any(axis=0)
    if back.any():
        i = int(np.argmax(back))
        raise ParameterError(
            f"sample_idx ({map_label(maps.files, 'sample_idx')!r}) rows {int(sample[i])} and "
            f"{int(sample[i]) + 1} ({tuple(rows[0, i])}, {tuple(rows[1, i])}) go back in "
            "doc_idx or hold a negative offset: its rows must follow the token stream.")
    count = last - first + 1
    which = np.repeat(np.arange(positions.size), count)
    doc_pos = np.repeat(first, count) + (np.arange(count.sum()) - np.repeat(
        np.cumsum(count) - count, count))
    documents = np.asarray(maps.doc_idx[doc_pos], dtype=np.int64)
    check_within(documents, sizes.size, doc_pos, "doc_idx", maps,
            "a document of doc_sizes (the indexed dataset's sizes)")
    begin = np.where(doc_pos == first[which], rows[0, :, 1][which], 0)
    stop = np.where(doc_pos == last[which], rows[1, :, 1][which] + 1, sizes[documents])
    pieces = pd.DataFrame({"position": positions[which],
                           "document": documents,
                           "start": begin.astype(np.int64), "end": stop.astype(np.int64)})
    return pieces[pieces["end"] > pieces["start"]].reset_index(drop=True)  # no empty documents


def _spans(instances, doc_sizes) -> pd.DataFrame:
    """``document, start, end`` of each instance: document ids, or (document, start, end)."""
    sizes = np.asarray(doc_sizes)
    if isinstance(instances, pd.DataFrame):
        missing = {"document", "start", "end"} - set(instances.columns)
        if "document" not in instances.columns or missing - {"start", "end"} or \
                len(missing) == 1:
            raise ParameterError("Span instances need the columns document, start and end "
                                 f"(or document alone); got {list(instances.columns)}.")
        doc = instances["document"].to_numpy()
        start = (instances["start"].to_numpy() if "start" in instances
                 else np.zeros(len(doc), dtype=np.int64))
        end = instances["end"].to_numpy() if "end" in instances else None
    else:
        arr = np.asarray(instances)
        if arr.ndim == 1:
            doc, start, end = arr, np.zeros(arr.size, dtype=np.int64), None
        elif arr.ndim == 2 and arr.shape[1] == 3:
            doc, start, end = arr[:, 0], arr[:, 1], arr[:, 2]
        else:
            raise ParameterError("instances must be document ids (1-D) or rows (document, "
                                 f"start, end); got an array of shape {arr.shape}.")
    if np.asarray(doc).dtype.kind not in "iu":
        raise ParameterError(f"Document ids must be integers; got {np.asarray(doc).dtype}.")
    doc = np.asarray(doc, dtype=np.int64)
    bad = (doc < 0) | (doc >= sizes.size)
    if bad.any():
        raise ParameterError(f"Document {int(doc[bad][0])} is not in the indexed dataset, "
                             f"which has {sizes.size} documents.")
    start = np.asarray(start, dtype=np.int64)
    end = sizes[doc].astype(np.int64) if end is None else np.asarray(end, dtype=np.int64)
    bad = (start < 0) | (end > sizes[doc]) | (end - start < 2)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ParameterError(
            f"Span ({int(doc[i])}, {int(start[i])}, {int(end[i])}) is not within document "
            f"{int(doc[i])} ({int(sizes[doc[i]])} tokens) or holds fewer than 2 tokens.")
    return pd.DataFrame({"document": doc, "start": start, "end": end})


def span_exposures(maps: IndexMaps, doc_sizes, instances, batch_size: int,
                   positions: np.ndarray | None = None) -> pd.DataFrame:
    """Every time one run's training trained each instance whole.

    Parameters
    ----------
    maps : IndexMaps
    doc_sizes : array_like of int
        The indexed dataset's ``sizes``.
    instances : array_like or pandas.DataFrame
        Document ids (the whole document is the instance), rows ``(document, start,
        end)``, or a frame with those columns; the instance's ``unit`` is its row number.
    batch_size : int
        Sequences per optimisation step (the global batch size).
    positions : numpy.ndarray, optional
        :meth:`IndexMaps.training_positions`, when already computed.

    Returns
    -------
    pandas.DataFrame
        ``unit, position, step``, one row per exposure (the training sequence that holds
        all of the instance's tokens; a span split between two sequences is not trained
        whole there), sorted by unit and position; positions from
        :attr:`IndexMaps.trained` on are never trained. An instance trained nowhere whole
        has no row.

    Raises
    ------
    ParameterError
        Instances outside the dataset, or ``doc_sizes`` that do not cover every document
        of ``doc_idx`` (the message names the first such position and document).
    """
    sizes = checked_sizes(maps, doc_sizes)
    check_sample_rows(maps.files, maps.sample_idx, maps.doc_idx.shape[0])
    spans = _spans(instances, sizes)
    unit, sample = _whole_spans(maps, sizes, spans)
    if positions is None:
        position = _positions_of(maps, sample)
    else:
        positions = np.asarray(positions)
        if positions.ndim != 1 or positions.shape[0] != maps.n_samples \
                or positions.dtype.kind not in "iu":
            raise ParameterError(
                f"positions must be maps.training_positions() of these maps: integers, one per "
                f"sample ({maps.n_samples}); got {positions.dtype} of shape {positions.shape}.")
        position = positions[sample].astype(np.int64)
    _refuse_untrained(maps, sample, position)
    limit = len(maps) if maps.trained is None else maps.trained
    trained = (position >= 0) & (position < limit)
    return exposure_frame(unit[trained], position[trained], batch_size)


def _whole_spans(maps: IndexMaps, sizes: np.ndarray, spans: pd.DataFrame) -> tuple:
    """``(unit, sample)``: every sample that holds a unit's span whole, in one compiled pass
    over ``doc_idx`` and ``sample_idx`` (:func:`~didmem.orders.neox_kernels.span_hits`),
    ``_CHUNK`` document positions at a time."""
    documents = spans["document"].to_numpy(np.int64)
    units = np.argsort(documents, kind="stable")
    wanted, first_unit = np.unique(documents[units], return_index=True)
    first_unit = np.append(first_unit, units.size).astype(np.int64)
    table, mask = lookup_filter(wanted, sizes.size)
    starts = spans["start"].to_numpy(np.int64)
    ends = spans["end"].to_numpy(np.int64)
    capacity = max(16, 2 * units.size)
    out_unit = np.empty(capacity, dtype=np.int64)
    out_sample = np.empty(capacity, dtype=np.int64)
    n_out, row, stream = 0, 0, 0
    n = maps.doc_idx.shape[0]
    lengths = np.empty(min(_CHUNK, n), dtype=np.int64)
    lo = 0
    units = units.astype(np.int64)
    while lo < n and units.size:
        hi = min(lo + _CHUNK, n)
        chunk = maps.doc_idx[lo:hi]
        gather_sizes(chunk, sizes, lengths[:hi - lo])
        done, row_after, stream_after = span_hits(
            chunk, lo, lengths[:hi - lo], maps.sample_idx, row, stream, table, mask, wanted,
            first_unit, units, starts, ends, out_unit, out_sample, n_out)
        if done < 0:  # full: grow, and do the chunk again
            out_unit = np.concatenate([out_unit, np.empty_like(out_unit)])
            out_sample = np.concatenate([out_sample, np.empty_like(out_sample)])
            continue
        n_out, row, stream, lo = done, row_after, stream_after, hi
    order = np.lexsort((out_sample[:n_out], out_unit[:n_out]))
    return out_unit[:n_out][order], out_sample[:n_out][order]


def _positions_of(maps: IndexMaps, samples: np.ndarray) -> np.ndarray:
    """The training position of each sample (-1: never trained), one compiled pass over
    ``shuffle_idx`` in chunks (:func:`~didmem.orders.neox_kernels.positions_of_samples`)."""
    out = np.full(samples.size, -1, dtype=np.int64)
    if not samples.size:
        return out
    unique, inverse = np.unique(samples, return_inverse=True)
    found = np.full(unique.size, -1, dtype=np.int64)
    table, mask = lookup_filter(unique, maps.n_samples)
    for lo in range(0, len(maps), _CHUNK):
        repeat = positions_of_samples(maps.shuffle_idx[lo:lo + _CHUNK], lo, table, mask,
                                      unique, found)
        if repeat >= 0:
            value = int(maps.shuffle_idx[repeat])
            first = int(found[np.searchsorted(unique, value)])
            raise ParameterError(
                f"shuffle_idx ({map_label(maps.files, 'shuffle_idx')!r}) is not a permutation of "
                f"the {maps.n_samples} samples: sample {value} is at positions {first} and "
                f"{repeat} (GPT-NeoX shuffles every sample once); the file is corrupt or of "
                "another run (read_index_maps(check_values=True) checks every entry).")
    return found[inverse]


def _refuse_untrained(maps: IndexMaps, sample: np.ndarray, position: np.ndarray) -> None:
    """Every sample is at some position of a permutation: one at none (-1) marks a
    ``shuffle_idx`` that is not one, and an instance's exposure would be lost silently."""
    lost = position < 0
    if lost.any():
        i = int(np.argmax(lost))
        raise ParameterError(
            f"shuffle_idx ({map_label(maps.files, 'shuffle_idx')!r}) holds sample "
            f"{int(sample[i])} at no position, so it is not a permutation of the "
            f"{maps.n_samples} samples (GPT-NeoX shuffles every sample once); the file is "
            "corrupt or of another run (read_index_maps(check_values=True) checks every entry).")


def run_exposures(runs: dict, doc_sizes, instances, batch_size: int) -> pd.DataFrame:
    """Every exposure of each instance in each run.

    Parameters
    ----------
    runs : dict
        Run name -> its :class:`IndexMaps` (or a path / prefix :func:`read_index_maps`
        opens).
    doc_sizes : array_like of int
        The indexed dataset's ``sizes`` (the same data in every run).
    instances : array_like or pandas.DataFrame
        As :func:`span_exposures`; the same instances in every run.
    batch_size : int
        Sequences per optimisation step.

    Returns
    -------
    pandas.DataFrame
        ``run, unit, position, step``.

    Raises
    ------
    ParameterError
        No runs; maps of different dtypes or of different numbers of training sequences
        (the message names both runs' files).
    """
    if not runs:
        raise ParameterError("run_exposures needs at least one run's index maps.")
    opened = {name: m if isinstance(m, IndexMaps) else read_index_maps(m)
              for name, m in runs.items()}
    _check_alike(opened)
    parts = [span_exposures(maps, doc_sizes, instances, batch_size).assign(run=name)
             for name, maps in opened.items()]
    out = pd.concat(parts, ignore_index=True)
    return out[["run", "unit", "position", "step"]]


def _check_alike(runs: dict) -> None:
    names = list(runs)
    first = runs[names[0]]
    for name in names[1:]:
        other = runs[name]
        for map_name in MAP_NAMES:
            a, b = getattr(first, map_name), getattr(other, map_name)
            if a.dtype != b.dtype:
                raise ParameterError(
                    f"Runs {names[0]!r} and {name!r} have {map_name} of different dtypes "
                    f"({a.dtype} in {str(first.files[map_name])!r}, {b.dtype} in "
                    f"{str(other.files[map_name])!r}): index maps of one GPT-NeoX setup share their dtypes.")
        if len(first) != len(other) or first.doc_idx.shape != other.doc_idx.shape \
                or first.trained != other.trained:
            raise ParameterError(
                f"Runs {names[0]!r} and {name!r} have index maps of different lengths "
                f"({len(first)} samples, {first.trained} trained, and "
                f"{first.doc_idx.shape[0]} document positions in {first.label!r}; "
                f"{len(other)}, {other.trained} and {other.doc_idx.shape[0]} in "
                f"{other.label!r}): they do not train the same data for as long.")


def run_cohorts(exposures: pd.DataFrame, n_units: int, checkpoints, *, runs=None,
                require_all: bool = True, where: str = "") -> pd.DataFrame:
    """Each instance's cohorts in each run: ``run, unit, cohort, cohort_2, ..., exposures``.

    Parameters
    ----------
    exposures : pandas.DataFrame
        :func:`run_exposures`' table (``run, unit, step``).
    n_units : int
        Instances (units ``0 .. n_units - 1``).
    checkpoints : sequence of int
        The runs' checkpoint steps (the same in every run).
    runs : sequence, optional
        Every run's name, so that a run in which no instance is trained still gets its
        rows (default: the runs of ``exposures``).
    require_all : bool
        Refuse an instance that some run never trains whole within the checkpoints: with
        the same data in every run, it marks a span that falls across a sequence boundary
        there (or is longer than a sequence). ``False`` keeps it, never treated in that run.
    where : str
        How messages name the source.

    Raises
    ------
    ParameterError
        As :func:`~didmem.orders.exposure_cohorts`, and with ``require_all`` an instance
        absent from one run's order (the message names the run and the instance).
    """
    units = np.arange(int(n_units))
    names = list(pd.unique(exposures["run"])) if runs is None else list(runs)
    unknown = set(pd.unique(exposures["run"])) - set(names)
    if unknown:
        raise ParameterError(f"{where + ': ' if where else ''}the exposures name run "
                             f"{sorted(map(repr, unknown))[0]}, which is not among the runs "
                             f"{names}.")
    parts = []
    for run in names:
        table = exposures[exposures["run"] == run]
        part = exposure_cohorts(table, units, checkpoints,
                                where=f"{where} run {run!r}" if where else f"run {run!r}")
        parts.append(part.assign(run=run))
    out = pd.concat(parts, ignore_index=True)
    if require_all:
        trained = out.pivot(index="unit", columns="run", values="exposures") > 0
        absent_somewhere = ~trained.all(axis=1)
        if absent_somewhere.any():
            unit = int(absent_somewhere.index[np.flatnonzero(absent_somewhere.to_numpy())[0]])
            absent = [r for r in trained.columns if not trained.loc[unit, r]]
            raise ParameterError(
                f"{where + ': ' if where else ''}instance {unit} is absent from run "
                f"{absent[0]!r}'s order ({int(absent_somewhere.sum())} instances are absent "
                "from some run's): no training sequence there, within the checkpoints, holds "
                "all of its tokens (a span split across two sequences, or longer than one). "
                "Choose spans within one sequence, or pass require_all=False to keep them as "
                "never trained there.")
    columns = ["run"] + [c for c in out.columns if c != "run"]
    return out[columns]
