"""``[design] kind = "olmo"``: cohorts from OLMo's ``global_indices.npy``.

::

    [design]
    kind = "olmo"
    global_indices = "train_data/global_indices.npy"   # raw uint32, no .npy header; or a
                                                       # list, one file per epoch, in order
    batch_size = 2048                                  # global_train_batch_size
    # instances from OLMo's token files (optional; otherwise from [instances], whose unit
    # ids are OLMo instance indices, negative for validation instances):
    data = ["part-0-00000.npy", "part-0-00001.npy"]   # in the order of data.paths
    sequence_length = 2048                             # max_sequence_length
    dtype = "uint16"                                   # uint32 for OLMo 2
    units = [17, 4242, 90210]                          # instance indices to score
    validation = "validation.npy"                      # optional 2-D token ids, units -1-j

Step ``s`` (1-based) trains positions ``(s-1)·B .. s·B-1`` of the order, up to its last full
batch (OLMo never trains the short one); a later epoch's steps follow the earlier epochs'
full batches, as OLMo's trainer counts them. Every trained position of an instance is an
exposure (those after the last checkpoint have not happened yet within the
panel; a unit whose first one is there is refused), so the panel gets ``cohort``,
``cohort_2``, ... and ``exposures`` (see :mod:`didmem.orders.olmo`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ..._validation import Constraint, Instance, Integral, OneOf
from ...errors import ConfigError
from .._tables import read_token_ids
from ._base import ExposureDesign

__all__ = ["OlmoDesign"]


class _Strings(Constraint):
    description = "a non-empty list of paths (strings)"

    def __call__(self, value) -> bool:
        return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


class _PathOrPaths(Constraint):
    description = "a path (a string) or a non-empty list of paths, one per epoch"

    def __call__(self, value) -> bool:
        return isinstance(value, str) or _Strings()(value)


class _Indices(Constraint):
    description = "a non-empty list of OLMo instance indices (non-negative integers)"

    def __call__(self, value) -> bool:
        return isinstance(value, list) and bool(value) and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)


_PATH = Instance(str, description="a path (a string)")


@dataclass(frozen=True)
class OlmoDesign(ExposureDesign):
    """``kind = "olmo"``: the order of OLMo's ``global_indices.npy``.

    Parameters
    ----------
    where : str
        Where the table is; every message starts with it.
    global_indices : tuple of Path
        OLMo's ``train_data/global_indices.npy`` (raw ``uint32``), one per epoch in the
        order trained (a single path in the study file is one epoch).
    batch_size : int
        Instances per optimizer step (``global_train_batch_size``).
    data : tuple of Path, optional
        OLMo's token files, in the order of the training configuration; with it the design
        reads the instances ``units`` (and ``validation``) itself.
    sequence_length : int, optional
        Tokens per instance (``max_sequence_length``), with ``data``.
    dtype : {"uint16", "uint32", "uint64"}
        The token files' type, with ``data``.
    units : tuple of int, optional
        The instance indices to score, with ``data``.
    validation : Path, optional
        A 2-D ``.npy`` of held-out token ids (units ``-1 - j``), with ``data``.
    """

    global_indices: tuple
    batch_size: int
    data: tuple | None = None
    sequence_length: int | None = None
    dtype: str = "uint16"
    units: tuple | None = None
    validation: Path | None = None

    kind: ClassVar[str] = "olmo"
    _paths: ClassVar[tuple] = ("validation",)
    _constraints: ClassVar[dict] = {
        "global_indices": _PathOrPaths(), "batch_size": Integral(1), "data": _Strings(),
        "sequence_length": Integral(1), "dtype": OneOf("uint16", "uint32", "uint64"),
        "units": _Indices(), "validation": _PATH,
    }

    @classmethod
    def from_table(cls, table: dict, where: str, base: Path) -> OlmoDesign:
        """As :meth:`Design.from_table`, with ``data`` and ``global_indices`` read from the
        study's directory."""
        design = super().from_table(table, where, base)
        order = design.global_indices
        order = (order,) if isinstance(order, str) else order
        design = dataclasses.replace(design, global_indices=tuple(Path(base) / o for o in order))
        if design.data is None:
            return design
        return dataclasses.replace(design, data=tuple(Path(base) / d for d in design.data))

    def check_table(self) -> None:
        """``data`` goes with ``sequence_length`` and ``units``; without it, none of them."""
        with_data = ("sequence_length", "units", "validation")
        if self.data is None:
            given = [k for k in with_data if getattr(self, k) is not None]
            if given:
                raise ConfigError(f"{self.where} {given[0]} goes with data (OLMo's token "
                                  "files); without data the instances come from [instances].")
        elif self.sequence_length is None or self.units is None:
            raise ConfigError(f"{self.where} data needs sequence_length and units (the "
                              "instance indices to score).")

    @property
    def draws_instances(self) -> bool:
        """Whether the instances come from the token files (no ``[instances]`` table)."""
        return self.data is not None

    def check_files(self, checkpoints) -> None:
        """The global indices' size fits ``batch_size``; the token files fit ``dtype``."""
        self._order()
        if self.data is not None:
            self._tokens()

    def _order(self) -> list:
        """Each epoch's order, memory-mapped."""
        from ...orders.olmo import read_global_indices

        with self.config_errors():
            return [read_global_indices(path, self.batch_size) for path in self.global_indices]

    def _tokens(self):
        from ...orders.olmo import OlmoTokens

        with self.config_errors("data"):
            return OlmoTokens(self.data, self.sequence_length, self.dtype)

    def instances(self, config, checkpoints, out):
        """The instances to score: read from the token files, or from ``[instances]``."""
        if self.data is None:
            tokens, units = config.load_instances()
            ids = np.arange(len(tokens)) if units is None else np.asarray(units)
        else:
            data = self._tokens()
            with self.config_errors("units"):
                tokens = [data[i] for i in self.units]
            ids = list(self.units)
            if self.validation is not None:
                held = read_token_ids(self.validation, f"{self.where} validation")
                tokens += [np.asarray(t, dtype=np.int64) for t in held]
                ids += [-1 - j for j in range(len(held))]
            ids = np.asarray(ids, dtype=np.int64)
            units = ids
        self.cohort_table(pd.unique(ids), checkpoints)  # a mistake shows before scoring
        return tokens, units

    def exposures(self, units, checkpoints) -> pd.DataFrame:
        """Every trained position of each training unit (index >= 0) in every epoch's order.

        The whole order is read, so that an instance first trained after the last
        checkpoint is refused rather than taken for a never-trained one.
        """
        from ...orders.olmo import olmo_exposures, trained_positions

        units = np.asarray(units)
        if units.dtype.kind not in "iu":
            raise ConfigError(
                f"{self.where} unit ids must be OLMo instance indices (integers, negative for "
                f"validation instances); got {units.dtype} ids such as {units[:1].tolist()}."
            )
        n = None if self.data is None else len(self._tokens())
        frames, first_step = [], 0
        for path, order in zip(self.global_indices, self._order()):
            with self.config_errors():
                frames.append(olmo_exposures(
                    order, units[units >= 0], self.batch_size, n_instances=n,
                    first_step=first_step,
                    where=f"{self.where} global_indices {str(path)!r}"))
            first_step += trained_positions(len(order), self.batch_size) // self.batch_size
        return pd.concat(frames, ignore_index=True).sort_values(
            ["unit", "step"], kind="stable").reset_index(drop=True)
