"""Instances to score, their validation, and the errors that backends raise."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._messages import listing, python_scalar
from ..errors import CheckpointError, DidmemError, InstanceError

__all__ = ["Instances", "InstanceBatch", "InstanceError", "CheckpointError", "DeviceMemoryError",
           "listing", "check_scorable", "min_tokens"]


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


def min_tokens(metrics, prefix_length: int, suffix_length: int) -> int:
    """The fewest tokens an instance needs for ``metrics``: 2 for a next-token loss, and the
    prefix and the suffix for extraction (Carlini et al. 2023)."""
    return max(2, prefix_length + suffix_length) if "extractable" in metrics else 2


def check_scorable(instances: "Instances", *, min_tokens: int, max_positions, vocab_size: int,
                   where: str, noun: str = "sequences") -> None:
    """Refuse instances that a causal language model cannot score, before any is scored.

    The one check of lengths and token ids for every scorer (the backends, before loading
    weights; the training tracker, before its first evaluation).

    Parameters
    ----------
    instances : Instances
        The instances, with their token ids.
    min_tokens : int
        The fewest tokens an instance needs (2 for a next-token loss; the prefix and suffix
        for extraction).
    max_positions : int or None
        The model's ``max_position_embeddings``: an instance of ``n`` tokens needs ``n - 1``
        positions (its last token is only predicted). ``None``: no limit known.
    vocab_size : int
        Token ids must lie in ``[0, vocab_size)``.
    where : str
        The model, as the messages name it (``"the model of checkpoint 1000 (...)"``).
    noun : str
        What the instances are called in the messages.

    Raises
    ------
    InstanceError
        Naming how many instances fail, which (their units) and why.
    """
    lengths = instances.lengths
    short = lengths < min_tokens
    if short.any():
        raise InstanceError(
            f"{int(short.sum())} {noun} have fewer than {min_tokens} tokens, e.g. units "
            f"{listing(instances.units[short])} with lengths {listing(lengths[short])}.")
    if max_positions is not None:
        long = lengths - 1 > max_positions
        if long.any():
            raise InstanceError(
                f"{int(long.sum())} {noun} are longer than {where} can score: it has "
                f"{max_positions} positions, so at most {max_positions + 1} tokens (the last is "
                f"only predicted); units {listing(instances.units[long])} have lengths "
                f"{listing(lengths[long])}.")
    bad = [((t < 0) | (t >= vocab_size)) for t in instances.token_ids]
    rows = [i for i, b in enumerate(bad) if b.any()]
    if rows:
        first = rows[0]
        pos = int(np.flatnonzero(bad[first])[0])
        raise InstanceError(
            f"Token ids outside the vocabulary of {where} (size {vocab_size}): unit "
            f"{python_scalar(instances.units[first])!r} has token "
            f"{int(instances.token_ids[first][pos])} at position {pos}; {len(rows)} {noun} "
            "have such tokens.")
