"""Reader and writer of the Megatron / GPT-NeoX ``MMapIndexedDataset`` (``.bin`` + ``.idx``).

Pythia's pre-shuffled Pile ships in this format. The ``.idx`` file holds

====================  =====================  ==========================================
field                 layout                 meaning
====================  =====================  ==========================================
magic                 ``b"MMIDIDX\\x00\\x00"``  format tag
version               ``<Q``                 must be 1
dtype code            ``<B``                 token dtype: 1 uint8, 2 int8, 3 int16,
                                             4 int32, 5 int64, 8 uint16, 9 uint32,
                                             10 uint64
len                   ``<Q``                 number of sequences
doc_count             ``<Q``                 number of entries of ``doc_idx``
sizes                 int32[len]             tokens of each sequence
pointers              int64[len]             byte offset of each sequence in ``.bin``
doc_idx               int64[doc_count]       first sequence of each document
====================  =====================  ==========================================

and the ``.bin`` file the tokens. Sequence ``i`` is ``sizes[i]`` tokens at byte offset
``pointers[i]``. Unlike the reader in Pythia's repository, indices may be numpy integers.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from ..errors import ParameterError

__all__ = ["MMapIndexedDataset", "write_indexed_dataset"]

_MAGIC = b"MMIDIDX\x00\x00"
_HEADER = struct.Struct("<QBQQ")
_CODES = {
    1: np.uint8,
    2: np.int8,
    3: np.int16,
    4: np.int32,
    5: np.int64,
    8: np.uint16,
    9: np.uint32,
    10: np.uint64,
}


def _prefix(path) -> Path:
    path = Path(os.fspath(path))
    return path.with_suffix("") if path.suffix in (".bin", ".idx") else path


class MMapIndexedDataset:
    """Memory-mapped token sequences in the ``.bin`` / ``.idx`` format.

    Parameters
    ----------
    path : str or os.PathLike
        The common prefix of the two files, or either file.

    Attributes
    ----------
    sizes : numpy.ndarray of int32
        Tokens per sequence.
    pointers : numpy.ndarray of int64
        Byte offset of each sequence in the ``.bin`` file.
    doc_idx : numpy.ndarray of int64
        First sequence of each document.
    dtype : numpy.dtype
        Dtype of the stored tokens.

    Raises
    ------
    ParameterError
        Missing files, a wrong magic or version, an unknown or floating-point dtype code,
        files too short for their header, a negative size or pointer, or a sequence that
        ends past the end of the ``.bin`` file.

    Examples
    --------
    >>> ds = MMapIndexedDataset("pile/document")  # doctest: +SKIP
    >>> ds[np.int64(1_024_000)][:5]  # tokens of the first sequence of batch 1000
    ... # doctest: +SKIP
    """

    def __init__(self, path) -> None:
        prefix = _prefix(path)
        idx, bin_ = prefix.with_suffix(".idx"), prefix.with_suffix(".bin")
        for f in (idx, bin_):
            if not f.is_file():
                raise ParameterError(f"MMapIndexedDataset: {str(f)!r} does not exist.")
        self.path = prefix
        with open(idx, "rb") as stream:
            magic = stream.read(len(_MAGIC))
            if magic != _MAGIC:
                raise ParameterError(
                    f"{str(idx)!r} is not an MMapIndexedDataset index: it starts with {magic!r}, "
                    f"not {_MAGIC!r}."
                )
            raw = stream.read(_HEADER.size)
        if len(raw) < _HEADER.size:
            raise ParameterError(f"{str(idx)!r} is truncated: its header is incomplete.")
        version, code, length, doc_count = _HEADER.unpack(raw)
        if version != 1:
            raise ParameterError(f"{str(idx)!r} has format version {version}; only 1 is known.")
        if code not in _CODES:
            raise ParameterError(
                f"{str(idx)!r} has dtype code {code}; token ids need an integer code, one of "
                f"{sorted(_CODES)}."
            )
        self.dtype = np.dtype(_CODES[code])
        offset = len(_MAGIC) + _HEADER.size
        need = offset + 4 * length + 8 * length + 8 * doc_count
        if idx.stat().st_size < need:
            raise ParameterError(
                f"{str(idx)!r} is truncated: {length} sequences and {doc_count} documents need "
                f"{need} bytes, the file has {idx.stat().st_size}."
            )
        index = np.memmap(idx, dtype=np.uint8, mode="r")
        self.sizes = np.frombuffer(index, dtype=np.int32, count=length, offset=offset)
        offset += 4 * length
        self.pointers = np.frombuffer(index, dtype=np.int64, count=length, offset=offset)
        offset += 8 * length
        self.doc_idx = np.frombuffer(index, dtype=np.int64, count=doc_count, offset=offset)
        for name, values in (("size", self.sizes), ("pointer", self.pointers)):
            if length and int(values.min()) < 0:
                at = int(np.argmin(values))
                raise ParameterError(
                    f"{str(idx)!r} is corrupt: sequence {at} has a negative {name}, "
                    f"{int(values[at])}.")
        n_bytes = bin_.stat().st_size
        ends = self.pointers + self.sizes.astype(np.int64) * self.dtype.itemsize
        if length and int(ends.max()) > n_bytes:
            raise ParameterError(
                f"{str(bin_)!r} is truncated: sequence {int(ends.argmax())} ends at byte "
                f"{int(ends.max())}, the file has {n_bytes} bytes."
            )
        self._bin = np.memmap(bin_, dtype=np.uint8, mode="r") if n_bytes else np.zeros(0, np.uint8)

    def __len__(self) -> int:
        return int(self.sizes.size)

    def __getitem__(self, index):
        """Sequence ``index`` as an int64 array; a slice or an integer array gives a list."""
        if isinstance(index, slice):
            return [self._get(i) for i in range(*index.indices(len(self)))]
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            return self._get(int(index))
        arr = np.asarray(index)
        if arr.ndim == 1 and arr.dtype.kind in "iu":
            return [self._get(int(i)) for i in arr]
        raise ParameterError(
            f"MMapIndexedDataset indices must be integers, slices or 1-D integer arrays; got "
            f"{type(index).__name__}."
        )

    def _get(self, i: int) -> np.ndarray:
        if not 0 <= i < len(self):
            raise IndexError(
                f"Sequence {i} is out of range: the dataset has {len(self)} sequences."
            )
        start = int(self.pointers[i])
        stop = start + int(self.sizes[i]) * self.dtype.itemsize
        return self._bin[start:stop].view(self.dtype).astype(np.int64)

    def __repr__(self) -> str:
        return f"MMapIndexedDataset({str(self.path)!r}: {len(self)} sequences of {self.dtype})"


def write_indexed_dataset(path, sequences, dtype=np.uint16) -> MMapIndexedDataset:
    """Write token sequences in the ``.bin`` / ``.idx`` format, one document per sequence.

    Parameters
    ----------
    path : str or os.PathLike
        Prefix of the two files to write.
    sequences : iterable of 1-D array_like of int
        The token ids.
    dtype : numpy dtype
        Integer dtype the tokens are stored as (uint16 for Pythia's 50k vocabulary).

    Returns
    -------
    MMapIndexedDataset
        The written dataset, opened.
    """
    dtype = np.dtype(dtype)
    codes = {np.dtype(v): k for k, v in _CODES.items()}
    if dtype not in codes:
        known = sorted(str(np.dtype(v)) for v in _CODES.values())
        raise ParameterError(f"dtype must be one of {known}; got {dtype}.")
    prefix = _prefix(path)
    sizes, pointers, position = [], [], 0
    with open(prefix.with_suffix(".bin"), "wb") as stream:
        for seq in sequences:
            arr = np.asarray(seq)
            info = np.iinfo(dtype)
            if arr.size and (arr.min() < info.min or arr.max() > info.max):
                raise ParameterError(f"Token ids of sequence {len(sizes)} do not fit in {dtype}.")
            data = arr.astype(dtype).tobytes()
            stream.write(data)
            sizes.append(arr.size)
            pointers.append(position)
            position += len(data)
    with open(prefix.with_suffix(".idx"), "wb") as stream:
        stream.write(_MAGIC)
        stream.write(_HEADER.pack(1, codes[dtype], len(sizes), len(sizes) + 1))
        stream.write(np.asarray(sizes, dtype=np.int32).tobytes())
        stream.write(np.asarray(pointers, dtype=np.int64).tobytes())
        stream.write(np.arange(len(sizes) + 1, dtype=np.int64).tobytes())
    return MMapIndexedDataset(prefix)
