"""``[design] kind = "hubble"``: cohorts and doses from Hubble's insertion metadata.

::

    [design]
    kind = "hubble"
    perturbation_info = "standard_text_document_perturbation_info.json"
    batch_size = 1024
    [design.examples]               # each tokenized perturbation dataset: its JSON files
    copyright = ["gutenberg_popular_dup.jsonl", "gutenberg_unpopular_dup.jsonl"]

The instances come from ``[instances]``; a unit id is an example's identifier (its
``meta.id``, ``uuid``, ``question_id`` or ``idx``). Every inserted copy is an exposure, so
the panel gets ``cohort``, ``cohort_2``, ... and ``exposures`` (the dose, assigned at random
by Hubble's insertion; see :mod:`didmem.orders.hubble`). A unit that is no inserted example
is never trained on (a held-out instance); at least one unit must be an inserted example.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ..._validation import Constraint, Instance, Integral
from ...errors import ConfigError
from ._base import ExposureDesign

__all__ = ["HubbleDesign"]


class _Examples(Constraint):
    description = "a table of perturbation dataset name = [JSON-lines files]"

    def __call__(self, value) -> bool:
        return isinstance(value, dict) and bool(value) and all(
            isinstance(v, list) and v and all(isinstance(f, str) for f in v)
            for v in value.values())


@dataclass(frozen=True)
class HubbleDesign(ExposureDesign):
    """``kind = "hubble"``: inserted examples and their positions.

    Parameters
    ----------
    where : str
        Where the table is; every message starts with it.
    perturbation_info : Path
        The run's ``*_perturbation_info.json`` (JSON lines, one per inserted copy).
    batch_size : int
        Sequences per optimisation step.
    examples : tuple
        ``(dataset name, JSON-lines files)`` pairs: the examples tokenized into each
        perturbation dataset.
    """

    perturbation_info: Path
    batch_size: int
    examples: tuple = ()

    kind: ClassVar[str] = "hubble"
    _paths: ClassVar[tuple] = ("perturbation_info",)
    _constraints: ClassVar[dict] = {
        "perturbation_info": Instance(str, description="a path (a string)"),
        "batch_size": Integral(1), "examples": _Examples(),
    }

    @classmethod
    def from_table(cls, table: dict, where: str, base: Path) -> HubbleDesign:
        """As :meth:`Design.from_table`, with the example files read from the study's directory."""
        if "examples" not in table:
            raise ConfigError(f"{where} needs the key examples: {_Examples.description}.")
        examples = table["examples"]
        if not _Examples()(examples):
            raise ConfigError(f"{where} examples must be {_Examples.description}; got "
                              f"{examples!r}.")
        rest = {k: v for k, v in table.items() if k != "examples"}
        design = super().from_table(rest, where, base)
        pairs = tuple((str(name), tuple(Path(base) / f for f in files))
                      for name, files in examples.items())
        return dataclasses.replace(design, examples=pairs)

    def exposures(self, units, checkpoints) -> pd.DataFrame:
        """Every inserted copy of each unit."""
        from ...orders.hubble import (hubble_exposures, read_inserted_examples,
                                        read_perturbation_info)

        with self.config_errors():
            info = read_perturbation_info(self.perturbation_info)
            examples = pd.concat([read_inserted_examples(name, files)
                                  for name, files in self.examples], ignore_index=True)
            found = hubble_exposures(info, examples, self.batch_size, where=self.where)
        keys = pd.Index(np.asarray(units).astype(str))
        if not keys.isin(examples["unit"]).any():
            raise ConfigError(
                f"{self.where} none of the {len(keys)} units is an inserted example (e.g. "
                f"{keys[0]!r}); unit ids must be the examples' meta ids."
            )
        found = found.assign(unit=found["unit"].astype(str))
        lookup = dict(zip(keys, np.asarray(units)))
        found = found[found["unit"].isin(keys)]
        return found.assign(unit=found["unit"].map(lookup))
