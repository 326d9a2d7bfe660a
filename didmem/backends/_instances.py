"""Instances to score, their validation, and the errors that backends raise."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._messages import listing
from ..errors import CheckpointError, DidmemError, InstanceError

__all__ = ["Instances", "InstanceBatch", "InstanceError", "CheckpointError", "DeviceMemoryError",
           "listing"]


class DeviceMemoryError(DidmemError, MemoryError):
    """The device ran out of memory on a batch of a single instance.

    Not a fault of the input: the sequence is legal, and scoring it needs more memory than the
    device has free. A smaller ``chunk_tokens``, another dtype or a larger device helps.
    """



@dataclass(frozen=True)
class InstanceBatch:
    """A contiguous slice of the instances, as handed to a backend's ``score_batch``.

    Attributes
    ----------
    units : numpy.ndarray
        Unit identifiers of the batch, in order.
    token_ids : list of numpy.ndarray
        One 1-D int64 array of token ids per unit.
    """

    units: np.ndarray
    token_ids: list

    def __len__(self) -> int:
        return len(self.units)

    @property
    def lengths(self) -> np.ndarray:
        """Number of tokens of each instance."""
        return np.fromiter((t.size for t in self.token_ids), dtype=np.int64, count=len(self))


class Instances:
    """Validated instances: unique unit ids, each with a 1-D array of token ids.

    Parameters
    ----------
    token_ids : 2-D array_like of int, or sequence of 1-D array_like of int, optional
        The token ids of each instance. May be ``None`` for backends whose outcomes are
        already computed (:class:`~didmem.backends.FrameBackend`); then ``unit_ids`` is needed.
    unit_ids : array_like, optional
        One identifier per instance (ints or strings). Defaults to ``0 .. n-1``.

    Raises
    ------
    InstanceError
        No instances, duplicate unit ids, a number of unit ids that differs from the number of
        sequences, a sequence that is not 1-D, or token ids that are not integers.
    """

    def __init__(self, token_ids=None, unit_ids=None) -> None:
        if token_ids is None:
            if unit_ids is None:
                raise InstanceError("Pass token_ids, unit_ids or both; got neither.")
            self.token_ids = None
            n = len(unit_ids)
        else:
            self.token_ids = _as_sequences(token_ids)
            n = len(self.token_ids)
        if n == 0:
            raise InstanceError("The instance list is empty: there is nothing to score.")
        units = np.arange(n, dtype=np.int64) if unit_ids is None else _as_units(unit_ids)
        if units.ndim != 1:
            raise InstanceError(f"unit_ids must be 1-D; got an array of shape {units.shape}.")
        if units.size != n:
            raise InstanceError(
                f"Got {units.size} unit ids for {n} sequences; pass exactly one id per sequence."
            )
        uniq, counts = np.unique(units, return_counts=True)
        if uniq.size != units.size:
            dup = uniq[counts > 1]
            raise InstanceError(
                f"Duplicate unit ids: {dup.size} ids appear more than once, e.g. {listing(dup)}. "
                "Each instance needs its own unit id."
            )
        units.flags.writeable = False
        self.units = units

    def __len__(self) -> int:
        return int(self.units.size)

    def batch(self, start: int, stop: int) -> InstanceBatch:
        """The instances ``start`` to ``stop - 1`` as an :class:`InstanceBatch`."""
        tokens = None if self.token_ids is None else self.token_ids[start:stop]
        return InstanceBatch(units=self.units[start:stop], token_ids=tokens)

    @property
    def lengths(self) -> np.ndarray:
        """Number of tokens of each instance."""
        return np.fromiter((t.size for t in self.token_ids), dtype=np.int64, count=len(self))

    def fingerprint(self) -> str:
        """A SHA-256 digest of the unit ids and token ids, used to guard resumed runs."""
        digest = hashlib.sha256()
        digest.update(repr(self.units.dtype.str).encode())
        digest.update(repr(self.units.tolist()).encode())
        if self.token_ids is not None:
            for tokens in self.token_ids:
                digest.update(np.int64(tokens.size).tobytes())
                digest.update(tokens.tobytes())
        return digest.hexdigest()


def _as_units(unit_ids) -> np.ndarray:
    units = np.asarray(unit_ids)
    if units.dtype.kind in "iu":
        return units.astype(np.int64, copy=True)
    if units.dtype.kind in "OUS":
        if all(isinstance(u, (int, np.integer)) for u in units.ravel()):
            return units.astype(np.int64)
        return np.array([str(u) for u in units.ravel()], dtype=object).reshape(units.shape)
    raise InstanceError(
        f"unit_ids must be integers or strings; got dtype {units.dtype} "
        f"(values such as {listing(units.ravel()[:3], 3)})."
    )


def _as_sequences(token_ids) -> list:
    if isinstance(token_ids, np.ndarray) and token_ids.ndim == 2:
        rows = list(token_ids)
    elif isinstance(token_ids, np.ndarray) and token_ids.ndim != 2 and token_ids.dtype != object:
        raise InstanceError(
            f"token_ids must be a 2-D array or a list of 1-D arrays; got an array of shape "
            f"{token_ids.shape}."
        )
    elif isinstance(token_ids, (Sequence, np.ndarray)) and not isinstance(token_ids, (str, bytes)):
        rows = list(token_ids)
    else:
        try:  # torch tensors and other array-likes
            rows = list(np.asarray(token_ids))
        except Exception as exc:
            raise InstanceError(
                f"token_ids must be a 2-D array or a list of 1-D arrays; got "
                f"{type(token_ids).__name__}."
            ) from exc
    out = []
    for i, row in enumerate(rows):
        arr = np.asarray(row)
        if arr.ndim != 1:
            raise InstanceError(
                f"Sequence {i} of token_ids is not 1-D (shape {arr.shape}); each instance is one "
                "sequence of token ids."
            )
        if arr.size and arr.dtype.kind not in "iu":
            raise InstanceError(
                f"Sequence {i} of token_ids has dtype {arr.dtype}; token ids must be integers."
            )
        out.append(np.ascontiguousarray(arr, dtype=np.int64))
    return out
