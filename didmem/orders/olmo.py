"""OLMo's published training order: ``global_indices.npy``, token memmaps and checkpoint names.

The layout, as OLMo's trainer writes and reads it (allenai/OLMo, ``olmo/data``):

- ``train_data/global_indices.npy`` is a raw ``uint32`` memmap with no ``.npy`` header
  (written with ``np.memmap(..., dtype=np.uint32, mode="w+")``) holding one epoch's order:
  entry ``p`` is the instance trained at position ``p``, and optimizer step ``s`` (1-based)
  trains positions ``(s-1)·B .. s·B-1`` for a global batch of ``B`` instances (each of the
  ``W`` ranks takes every ``W``-th position of the batch). An instance index that appears
  again is a later exposure of the same instance.
- Its length is OLMo's ``total_size``: the number of instances rounded to a multiple of the
  world size (down with ``drop_last``, as in the official configurations; up, by repeating
  the first entries, without it), so it is in general *not* a multiple of ``B``. The
  positions after the last full batch are never trained in that epoch: the data loader drops
  the short batch (``drop_last``) or the trainer stops at it (it asserts full batches).
  OLMo's trainer runs ``total_size // B`` steps per epoch and counts steps on across epochs;
  each epoch reshuffles (seed plus epoch) and writes its own ``global_indices.npy``.
- The instances are fixed-length sequences of ``sequence_length`` tokens cut from raw numpy
  token files (``.npy`` memmaps without header, ``uint16`` for OLMo 1's tokenizer, ``uint32``
  for OLMo 2's), concatenated in the order of the configured paths; each file holds
  ``size // (itemsize * sequence_length)`` instances and its tail is dropped.
- Checkpoint revisions are named ``stepN-tokensMB`` (OLMo 1) and ``stage1-stepN-tokensMB``
  or ``stage2-ingredientI-stepN-tokensMB`` (OLMo 2); stage 2 counts its steps afresh. OLMo's
  trainer saves its own checkpoints as ``stepN`` and ``stepN-unsharded`` (the directories
  its published checkpoint lists name), ``N`` being its global step.

``tests/data/reference/olmo_order/`` holds a small dataset, its global indices and the
instance OLMo's own code (ai2-olmo 0.6.0) trains at each step, against which this module is
tested.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ParameterError
from .exposures import exposure_frame

__all__ = ["read_global_indices", "trained_positions", "olmo_exposures", "OlmoTokens",
           "OlmoCheckpoint", "parse_olmo_checkpoint"]

_NPY_MAGIC = b"\x93NUMPY"
_TOKEN_DTYPES = {"uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64}
_CHUNK = 1 << 24


def read_global_indices(path, batch_size: int) -> np.ndarray:
    """Memory-map OLMo's ``global_indices.npy`` (raw ``uint32``) and check its format.

    Parameters
    ----------
    path : path
        The file.
    batch_size : int
        Instances per optimizer step (OLMo's ``global_train_batch_size``).

    Returns
    -------
    numpy.memmap
        The data order: entry ``p`` is the instance index trained at position ``p``. Only
        the first ``len // batch_size`` batches are trained (see :func:`trained_positions`).

    Raises
    ------
    ParameterError
        One line naming the file: it is missing, has a ``.npy`` header (OLMo writes none),
        its size is not a whole number of ``uint32``, or it holds less than one batch.
    """
    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"global_indices {str(path)!r} does not exist.")
    with open(path, "rb") as handle:
        head = handle.read(6)
    if head == _NPY_MAGIC:
        raise ParameterError(
            f"global_indices {str(path)!r} has a .npy header; OLMo writes its global indices "
            "as a raw uint32 memmap without one (np.memmap, not np.save)."
        )
    size = path.stat().st_size
    if size == 0 or size % 4:
        raise ParameterError(
            f"global_indices {str(path)!r} has {size} bytes, not a positive multiple of 4: it "
            "is not a raw uint32 array."
        )
    n = size // 4
    if n < batch_size:
        raise ParameterError(
            f"global_indices {str(path)!r} has {n} entries, fewer than one batch of "
            f"batch_size = {batch_size}: wrong batch_size or wrong file."
        )
    return np.memmap(path, dtype=np.uint32, mode="r")


def trained_positions(n_positions: int, batch_size: int) -> int:
    """How many positions of an epoch's order OLMo trains: its full batches.

    OLMo's order holds ``total_size`` entries, a multiple of the world size but not in
    general of the global batch; the short last batch is never trained (the data loader drops
    it, or the trainer stops at it), so an epoch runs ``n_positions // batch_size`` steps.

    Examples
    --------
    >>> trained_positions(22, 4)
    20
    """
    return (int(n_positions) // int(batch_size)) * int(batch_size)


def olmo_exposures(indices: np.ndarray, instances, batch_size: int, *,
                   n_instances: int | None = None, first_step: int = 0,
                   where: str = "global_indices") -> pd.DataFrame:
    """Every position of an epoch's data order at which each wanted instance is trained.

    Parameters
    ----------
    indices : numpy.ndarray
        One epoch's data order (:func:`read_global_indices`).
    instances : array_like of int
        The instance indices whose exposures are wanted.
    batch_size : int
        Instances per optimizer step.
    n_instances : int, optional
        How many instances the token data holds; an entry of the order at or past it is an
        error (the order does not belong to the data).
    first_step : int
        Optimizer steps trained before this epoch (OLMo counts steps on across epochs:
        ``total_size // batch_size`` per earlier epoch).
    where : str
        How errors name the file.

    Returns
    -------
    pandas.DataFrame
        ``unit`` (the instance index), ``position`` and ``step`` (``first_step + position //
        B + 1``), one row per exposure, sorted by unit and step. Instances never trained on
        have no row; nor do positions after the last full batch, which OLMo never trains
        (:func:`trained_positions`).
    """
    wanted = np.unique(np.asarray(instances, dtype=np.int64))
    trained = trained_positions(len(indices), batch_size)
    units, positions = [], []
    for start in range(0, len(indices), _CHUNK):
        chunk = np.asarray(indices[start:start + _CHUNK])
        if n_instances is not None and chunk.size and int(chunk.max()) >= n_instances:
            bad = int(np.argmax(chunk >= n_instances))
            raise ParameterError(
                f"{where}: position {start + bad} holds instance {int(chunk[bad])}, past the "
                f"{n_instances} instances of the token data."
            )
        if not wanted.size or start >= trained:
            continue
        chunk = chunk[:trained - start]
        slot = np.searchsorted(wanted, chunk)
        hit = slot < wanted.size
        hit[hit] = wanted[slot[hit]] == chunk[hit]
        where_hit = np.flatnonzero(hit)
        units.append(chunk[where_hit].astype(np.int64))
        positions.append(where_hit.astype(np.int64) + start)
    unit = np.concatenate(units) if units else np.zeros(0, np.int64)
    position = np.concatenate(positions) if positions else np.zeros(0, np.int64)
    return exposure_frame(unit, position, batch_size, first_step)


class OlmoTokens:
    """OLMo's instances: fixed-length sequences cut from raw numpy token files.

    Parameters
    ----------
    paths : sequence of path
        The token files, in the order of the training configuration's ``data.paths``.
    sequence_length : int
        Tokens per instance (``max_sequence_length``).
    dtype : {"uint16", "uint32", "uint64"}
        The files' token type (OLMo 1: ``uint16``; OLMo 2: ``uint32``).
    """

    def __init__(self, paths, sequence_length: int, dtype: str = "uint16") -> None:
        if dtype not in _TOKEN_DTYPES:
            raise ParameterError(
                f"OLMo token dtype must be one of {', '.join(_TOKEN_DTYPES)}; got {dtype!r}."
            )
        self.dtype = np.dtype(_TOKEN_DTYPES[dtype])
        self.sequence_length = int(sequence_length)
        self.paths = [Path(p) for p in paths]
        if not self.paths:
            raise ParameterError("OLMo token data needs at least one file.")
        counts = []
        for path in self.paths:
            if not path.is_file():
                raise ParameterError(f"OLMo token file {str(path)!r} does not exist.")
            with open(path, "rb") as handle:
                if handle.read(6) == _NPY_MAGIC:
                    raise ParameterError(
                        f"OLMo token file {str(path)!r} has a .npy header; OLMo's token files "
                        "are raw memmaps without one."
                    )
            size = path.stat().st_size
            if size % self.dtype.itemsize:
                raise ParameterError(
                    f"OLMo token file {str(path)!r} has {size} bytes, not a multiple of "
                    f"{self.dtype.itemsize} ({dtype}): wrong dtype."
                )
            counts.append(size // (self.dtype.itemsize * self.sequence_length))
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, index) -> np.ndarray:
        index = int(index)
        if not 0 <= index < len(self):
            raise ParameterError(
                f"OLMo instance {index} is past the data: the token files hold {len(self)} "
                f"instances of {self.sequence_length} tokens."
            )
        file = int(np.searchsorted(self.offsets, index, side="right") - 1)
        local = index - int(self.offsets[file])
        data = np.memmap(self.paths[file], dtype=self.dtype, mode="r")
        start = local * self.sequence_length
        return np.asarray(data[start:start + self.sequence_length], dtype=np.int64)


@dataclass(frozen=True)
class OlmoCheckpoint:
    """A parsed OLMo revision or checkpoint directory name.

    ``tokens_billions`` is the token count a Hub revision names (OLMo rounds it up), and
    ``None`` for a directory of OLMo's trainer (``stepN``, ``stepN-unsharded``).
    """

    name: str
    stage: int
    ingredient: int | None
    step: int
    tokens_billions: int | None


_CHECKPOINT = re.compile(
    r"^(?:stage(?P<stage>[12])-)?(?:ingredient(?P<ingredient>\d+)-)?"
    r"step(?P<step>\d+)(?:-tokens(?P<tokens>\d+)B|(?P<unsharded>-unsharded)?)$"
)


def parse_olmo_checkpoint(name: str) -> OlmoCheckpoint:
    """Parse an OLMo checkpoint's name into its stage, ingredient and step.

    Hub revisions are ``stepN-tokensMB`` (OLMo 1), ``stage1-stepN-tokensMB`` and
    ``stage2-ingredientI-stepN-tokensMB`` (OLMo 2; stage 2 counts its steps afresh). OLMo's
    trainer saves ``stepN`` and ``stepN-unsharded`` (``f"step{global_step}{suffix}"`` in
    ``olmo/train.py``), the directories its published checkpoint lists give; a URL or path
    is read by its last part.

    Examples
    --------
    >>> parse_olmo_checkpoint("stage1-step1000-tokens5B").step
    1000
    >>> parse_olmo_checkpoint("stage2-ingredient3-step11931-tokens50B").ingredient
    3
    >>> url = "https://olmo-checkpoints.org/ai2-llm/peteish7/step600-unsharded/"
    >>> parse_olmo_checkpoint(url).step
    600
    """
    text = str(name)
    found = _CHECKPOINT.match(text.rstrip("/").rsplit("/", 1)[-1])
    if not found or (found["ingredient"] and found["stage"] != "2"):
        raise ParameterError(
            f"{name!r} is not an OLMo checkpoint name such as 'step1000-tokens4B', "
            "'stage1-step1000-tokens4B', 'stage2-ingredient1-step1000-tokens4B' or OLMo's "
            "checkpoint directory 'step1000-unsharded'."
        )
    return OlmoCheckpoint(
        name=text,
        stage=int(found["stage"] or 1),
        ingredient=None if found["ingredient"] is None else int(found["ingredient"]),
        step=int(found["step"]),
        tokens_billions=None if found["tokens"] is None else int(found["tokens"]),
    )
