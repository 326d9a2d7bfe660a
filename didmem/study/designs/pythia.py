"""``[design] kind = "pythia"``: the paper's sample drawn from Pythia's pre-shuffled data.

::

    [design]
    kind = "pythia"
    data = "pile/document"         # prefix of the pre-shuffled .bin/.idx files
    validation = "val.npy"         # 2-D token ids (.npy), a .parquet with a token_ids
                                   # column, or the prefix of a second .bin/.idx dataset
    seed = 42
    batches_per_cohort = 10        # the paper's sampler (defaults shown)
    sequences_per_batch = 10
    n_validation = 2000
    batch_size = 1024              # sequences per optimisation step
    steps_per_checkpoint = 1000
    cohorts = [1000, 2000]         # optional: every checkpoint that is a positive multiple of
                                   # steps_per_checkpoint, up to step 95,000
    cohort_rule = "didmem"         # or "paper" (see didmem.cohorts)
    second_epoch = "search"        # optional: later exposures as cohort_2, ... ("none", the
                                   # default: first exposure only; "windows": rows holding
                                   # the instance's content re-packed at any offset; "offset"
                                   # with epoch_sequences: row i + epoch_sequences repeats
                                   # row i, checked row by row); see
                                   # didmem.orders.pythia_repeats and .windows
    search_stop = 146432000        # "search"/"windows": rows searched (default: every row up
                                   # to the last checkpoint)
    window = 50                    # "windows" only: tokens per window (default 50),
    window_stride = 50             # row positions looked up (default: window) and
    min_tokens = 50                # tokens of the instance a row must hold (default: window)

The instances come from the design (no ``[instances]`` table): the sample is drawn with
:func:`~didmem.orders.sample_paper_design` and saved as ``OUT/sample.parquet``; unit
ids are the sequence indices, and ``-1 - j`` for validation sequence ``j``.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ..._messages import listing
from ..._validation import Constraint, Instance, Integral, OneOf, defaults_of
from ...orders.pythia import sample_paper_design
from ...cohorts import (
    COHORT_RULES,
    PAPER_LAST_STEP,
    cohort_from_sequence_index,
    cohort_from_step,
    paper_first_epoch,
    step_from_sequence_index,
)
from ...errors import ConfigError
from .._tables import load_npy, read_token_ids
from ._base import Design

__all__ = ["PythiaDesign"]

_SAMPLER = defaults_of(sample_paper_design)
SECOND_EPOCH = ("none", "search", "windows", "offset")
_PATH = Instance(str, description="a path (a string)")


class _PositiveIntegers(Constraint):
    description = "a non-empty list of positive integers"

    def __call__(self, value) -> bool:
        return (isinstance(value, list) and bool(value)
                and all(isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in value))


@dataclass(frozen=True)
class PythiaDesign(Design):
    """``kind = "pythia"``: the paper's sample from a pre-shuffled indexed dataset.

    Parameters
    ----------
    where : str
        Where the table is; every message starts with it.
    data : Path
        Prefix of the pre-shuffled ``.bin``/``.idx`` dataset.
    validation : Path
        Validation token ids: a 2-D ``.npy``, a ``.parquet`` table, or a ``.bin``/``.idx``
        prefix.
    validation_column : str
        The column of token ids of a ``.parquet`` validation file.
    seed : int
        Seed of the sampler.
    batches_per_cohort, sequences_per_batch, n_validation, batch_size, steps_per_checkpoint
        As in :func:`~didmem.orders.sample_paper_design`.
    cohorts : tuple of int, optional
        The treated cohorts; default every checkpoint that is a positive multiple of
        ``steps_per_checkpoint`` up to step 95,000.
    cohort_rule : {"didmem", "paper"}
        How a sequence index becomes a cohort (see :mod:`didmem.cohorts`).
    second_epoch : {"none", "search", "windows", "offset"}
        Later exposures of the sampled sequences: none (the first only), every row of the
        order equal to the sequence (``"search"``, up to ``search_stop`` rows), every row
        holding ``min_tokens`` of its tokens in runs of at least ``window`` (``"windows"``:
        re-packed copies, :func:`~didmem.orders.find_windows`), or the row
        ``epoch_sequences`` later (``"offset"``, checked to be equal). The panel then gets
        ``cohort_2``, ... and ``exposures``. See :mod:`didmem.orders.pythia_repeats` for
        what Pythia's own tools say about the deduplicated suite's second pass.
    search_stop : int, optional
        Rows searched with ``"search"`` or ``"windows"``; default: every row up to the last
        checkpoint.
    window, window_stride, min_tokens : int, optional
        With ``"windows"``: tokens per window (50), row positions looked up (every
        ``window``-th; every shared run of ``window + window_stride - 1`` tokens is found)
        and the instance's tokens a row must hold to be an exposure (``window``).
    epoch_sequences : int, optional
        Rows of one pass, with ``"offset"``.
    """

    data: Path
    validation: Path
    validation_column: str = "token_ids"
    seed: int = 0
    batches_per_cohort: int = _SAMPLER["batches_per_cohort"]
    sequences_per_batch: int = _SAMPLER["sequences_per_batch"]
    n_validation: int = _SAMPLER["n_validation"]
    batch_size: int = _SAMPLER["batch_size"]
    steps_per_checkpoint: int = _SAMPLER["steps_per_checkpoint"]
    cohorts: tuple | None = None
    cohort_rule: str = COHORT_RULES[0]
    second_epoch: str = "none"
    search_stop: int | None = None
    epoch_sequences: int | None = None
    window: int | None = None
    window_stride: int | None = None
    min_tokens: int | None = None

    kind: ClassVar[str] = "pythia"
    draws_instances: ClassVar[bool] = True
    _paths: ClassVar[tuple] = ("data", "validation")
    _constraints: ClassVar[dict] = {
        "data": _PATH, "validation": _PATH, "validation_column": Instance(str),
        "seed": Integral(0), "batches_per_cohort": Integral(1),
        "sequences_per_batch": Integral(1), "n_validation": Integral(0),
        "batch_size": Integral(1), "steps_per_checkpoint": Integral(1),
        "cohorts": _PositiveIntegers(), "cohort_rule": OneOf(*COHORT_RULES),
        "second_epoch": OneOf(*SECOND_EPOCH), "search_stop": Integral(1),
        "epoch_sequences": Integral(1), "window": Integral(1), "window_stride": Integral(1),
        "min_tokens": Integral(1),
    }

    def check_table(self) -> None:
        """Cohorts: each once, each a multiple of ``steps_per_checkpoint``; the keys of
        ``second_epoch`` go together."""
        if self.second_epoch != "none" and self.cohort_rule == "paper":
            raise ConfigError(f"{self.where} second_epoch = {self.second_epoch!r} needs "
                              "cohort_rule = 'didmem' (the paper's rule stops at the first "
                              "epoch).")
        if (self.epoch_sequences is None) == (self.second_epoch == "offset"):
            raise ConfigError(f"{self.where} epoch_sequences goes with second_epoch = "
                              "'offset', and only with it.")
        if self.search_stop is not None and self.second_epoch not in ("search", "windows"):
            raise ConfigError(f"{self.where} search_stop goes with second_epoch = 'search' or "
                              "'windows'.")
        given = [k for k in ("window", "window_stride", "min_tokens")
                 if getattr(self, k) is not None]
        if given and self.second_epoch != "windows":
            raise ConfigError(f"{self.where} {given[0]} goes with second_epoch = 'windows'.")
        if self.cohorts is None:
            return
        twice = sorted(g for g, n in Counter(self.cohorts).items() if n > 1)
        if twice:
            raise ConfigError(f"{self.where} cohorts lists {listing(twice)} more than once; "
                              "name each cohort once.")
        every = self.steps_per_checkpoint
        off = [g for g in self.cohorts if g % every]
        if off:
            raise ConfigError(
                f"{self.where} cohorts must be multiples of steps_per_checkpoint = {every}; "
                f"{listing(off)} {'is' if len(off) == 1 else 'are'} not."
            )

    def never_treated(self) -> int:
        """The validation sequences drawn: ``n_validation``."""
        return self.n_validation

    def check_files(self, checkpoints) -> None:
        """The data holds every cohort's batches; the validation file ``n_validation`` rows."""
        data = self._indexed(self.data, "data")
        cohorts = self._cohorts(checkpoints)
        need = max(cohorts) * self.batch_size
        if need > len(data):
            raise ConfigError(
                f"{self.where} data: {str(self.data)!r} has {len(data)} sequences; cohort "
                f"{max(cohorts)} needs {need} (batch_size x cohort)."
            )
        if self.n_validation:
            available = self._validation_count()
            if self.n_validation > available:
                raise ConfigError(
                    f"{self.where} n_validation = {self.n_validation} needs as many validation "
                    f"sequences; {str(self.validation)!r} has {available}."
                )

    # ------------------------------------------------------------------ files
    def _missing(self, file: Path):
        if not file.is_file():
            raise ConfigError(f"{self.where} validation {str(file)!r} does not exist.")

    def _validation_count(self) -> int:
        file = self.validation
        if file.suffix == ".npy":
            self._missing(file)
            return len(load_npy(file, f"{self.where} validation", mmap_mode="r"))
        if file.suffix == ".parquet":
            self._missing(file)
            import pyarrow.parquet as pq

            return pq.ParquetFile(file).metadata.num_rows
        return len(self._indexed(file, "validation"))

    def _validation_tokens(self):
        if self.validation.suffix in (".npy", ".parquet"):
            return read_token_ids(self.validation, f"{self.where} validation",
                                  column=self.validation_column)
        return self._indexed(self.validation, "validation")

    def _indexed(self, prefix, key):
        from ...orders.indexed import MMapIndexedDataset

        with self.config_errors(key):
            return MMapIndexedDataset(prefix)

    def default_cohorts(self, checkpoints) -> list:
        """Checkpoints that are positive multiples of ``steps_per_checkpoint``, up to 95,000."""
        every = self.steps_per_checkpoint
        return [int(c) for c in checkpoints if 0 < c <= PAPER_LAST_STEP and c % every == 0]

    def _cohorts(self, checkpoints) -> list:
        cohorts = list(self.cohorts) if self.cohorts else self.default_cohorts(checkpoints)
        if not cohorts:
            raise ConfigError(
                f"{self.where} cohorts: no checkpoint is a positive multiple of "
                f"steps_per_checkpoint = {self.steps_per_checkpoint}; set cohorts."
            )
        return cohorts

    # ------------------------------------------------------------------ running
    def draw(self, checkpoints):
        """Draw the sample; return it with the instances' token ids and unit ids."""
        self.check_files(checkpoints)
        data = self._indexed(self.data, "data")
        validation = self._validation_tokens() if self.n_validation else []
        with self.config_errors():
            sample = sample_paper_design(
                self.seed, cohorts=self._cohorts(checkpoints),
                batches_per_cohort=self.batches_per_cohort,
                sequences_per_batch=self.sequences_per_batch, n_validation=self.n_validation,
                validation_pool=len(validation) if self.n_validation else None,
                batch_size=self.batch_size, steps_per_checkpoint=self.steps_per_checkpoint,
            )
        seq = sample.frame["seq_idx"].to_numpy()
        tokens = [data[int(i)] if i >= 0 else np.asarray(validation[int(-1 - i)], np.int64)
                  for i in seq]
        return sample, tokens, seq

    def instances(self, config, checkpoints, out):
        """Draw the sample, save it as ``out/sample.parquet``; return tokens and unit ids.

        With ``second_epoch``, every exposure found is saved as ``out/exposures.parquet``
        (``unit``, ``position``, ``step``; with ``"windows"`` also ``tokens``, the
        instance's tokens the row holds), its ``searched`` column the rows searched.
        """
        sample, tokens, units = self.draw(checkpoints)
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        sample.save(out / "sample.parquet")
        self.cohorts_of(units, checkpoints)  # a mistake shows before the scoring starts
        if self.second_epoch != "none":
            self._repeats(units, checkpoints)[1].to_parquet(out / "exposures.parquet",
                                                            index=False)
        return tokens, units

    def cohort_table(self, units, checkpoints) -> pd.DataFrame:
        """``cohort``; with ``second_epoch``, also ``cohort_2``, ... and ``exposures``.

        The search runs once for the check before scoring and once more only if the data
        files change (their sizes and modification times key a small cache).
        """
        if self.second_epoch == "none":
            return super().cohort_table(units, checkpoints)
        units = np.asarray(units, dtype=np.int64)
        table = self._repeats(units, checkpoints)[0]
        return table.set_index("unit").loc[units].reset_index()

    def _repeats(self, units, checkpoints) -> tuple:
        """The cohort table and the exposures found, cached while the data files stay."""
        stamp = tuple((f.stat().st_size, f.stat().st_mtime_ns)
                      for f in (self.data.with_suffix(".bin"), self.data.with_suffix(".idx"))
                      if f.is_file())
        return _repeat_cohorts(self, tuple(sorted(set(np.asarray(units).tolist()))),
                               tuple(sorted(int(c) for c in checkpoints)), stamp)

    def _repeat_cohorts(self, units: tuple, checkpoints: tuple) -> tuple:
        from ...orders.exposures import exposure_cohorts
        from ...orders.pythia_repeats import find_repeats, offset_repeats
        from ...orders.windows import find_windows, window_exposures

        units = np.asarray(units, dtype=np.int64)
        train = units[units >= 0]
        data = self._indexed(self.data, "data")
        with self.config_errors():
            if self.second_epoch == "offset":
                found = offset_repeats(data, train, epoch_sequences=self.epoch_sequences,
                                       batch_size=self.batch_size, where=self.where)
                found["searched"] = "offset"
            else:
                stop = min(self.search_stop or int(max(checkpoints)) * self.batch_size,
                           len(data))
                tokens = [data[int(i)] for i in train]
                if self.second_epoch == "windows":
                    window = self.window or defaults_of(find_windows)["window"]
                    runs = find_windows(data, train, tokens, batch_size=self.batch_size,
                                        window=window, stride=self.window_stride, stop=stop,
                                        where=self.where)
                    found = window_exposures(runs, self.min_tokens or window)
                else:
                    found = find_repeats(data, train, tokens, batch_size=self.batch_size,
                                         stop=stop, where=self.where)
                found["searched"] = f"rows 0 .. {stop - 1}"
            return exposure_cohorts(found, units, checkpoints, where=self.where), found

    def cohorts_of(self, units, checkpoints) -> np.ndarray:
        """Cohort of each sequence index by the configured rule (``inf``: validation)."""
        if self.second_epoch != "none":
            first = self.cohort_table(units, checkpoints)["cohort"].to_numpy(dtype=np.float64)
            return np.where(np.isnan(first), np.inf, first)
        idx = np.asarray(units, dtype=np.int64)
        if self.cohort_rule == "didmem":
            step = step_from_sequence_index(idx, self.batch_size)
            with self.config_errors():
                return cohort_from_step(step, checkpoints)
        cohort = cohort_from_sequence_index(idx, self.batch_size, self.steps_per_checkpoint,
                                            rule="paper")
        finite = cohort[np.isfinite(cohort)]
        absent = sorted(set(finite.tolist()) - {float(c) for c in checkpoints})
        if absent:
            raise ConfigError(
                f"{self.where} cohort_rule = 'paper' gives cohorts {listing(absent)} that are "
                f"not checkpoints of [backend]."
            )
        return cohort

    def adjust_panel(self, frame: pd.DataFrame) -> pd.DataFrame:
        """With ``cohort_rule = "paper"``: the paper's first-epoch panel."""
        if self.cohort_rule == "paper":
            return paper_first_epoch(frame, last=PAPER_LAST_STEP, where=self.where)
        return frame


@functools.lru_cache(maxsize=2)
def _repeat_cohorts(design: PythiaDesign, units: tuple, checkpoints: tuple,
                    stamp: tuple) -> tuple:
    return design._repeat_cohorts(units, checkpoints)
