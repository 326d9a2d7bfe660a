"""``[design] kind = "runs"``: several training runs of one model, each with its data order.

As PolyPythias' seeds: the same data in other orders (GPT-NeoX index maps per run)::

    [design]
    kind = "runs"
    data = "pile/document"               # the indexed dataset (.idx/.bin) the maps index
    spans = "instances.parquet"          # the instances, by content: columns document (and
                                         # start, end), found in every run (optional unit)
    batch_size = 1024                    # global batch size (sequences per step)
    require_all = true                   # refuse an instance absent from one run's order
    validation = "validation.npy"        # optional 2-D token ids, never trained (units -1-j)

    [[design.runs]]
    name = "seed1"
    maps = "maps"                        # a directory of index maps (with seed), or the prefix
    seed = 1                             # picks the run's maps in the directory
    checkpoints = { 0 = "ckpt/seed1/step0", 1000 = "ckpt/seed1/step1000" }
    # or  model = "EleutherAI/pythia-160m-seed1": hub revisions at [backend]'s steps

    [[design.runs]]
    name = "seed2"
    maps = "maps"
    seed = 2
    model = "EleutherAI/pythia-160m-seed2"

``[backend]`` gives the checkpoint steps and the scoring settings; each run names its own
checkpoints (``checkpoints``, the same steps as ``[backend]``'s; a run that lacks one of
them is refused) or hub model (``model``). The instances' tokens are read from ``data``;
each instance's cohorts in each run come from that run's maps
(:func:`~didmem.orders.run_exposures`, :func:`~didmem.orders.run_cohorts`), so the panel
has a ``run`` column beside ``unit`` and ``time``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ..._validation import Boolean, Constraint, Instance, Integral
from ...errors import ConfigError, ParameterError
from .._tables import read_token_ids, unknown_keys
from ._base import Design

__all__ = ["RunsDesign", "RunOrder"]

_PATH = Instance(str, description="a path (a string)")
_RUN_KEYS = ("name", "maps", "seed", "checkpoints", "model")


class _Runs(Constraint):
    description = "a non-empty list of run tables ([[design.runs]]: name, maps, and seed, " \
                  "checkpoints or model)"

    def __call__(self, value) -> bool:
        return isinstance(value, list) and bool(value) and all(isinstance(v, dict)
                                                               for v in value)


@dataclass(frozen=True)
class RunOrder:
    """One run of a ``runs`` design: its name, its index maps and its checkpoints.

    Parameters
    ----------
    name : str
        The run's name (the panel's ``run`` column).
    maps : Path
        Its index maps: a directory (with ``seed``) or the files' common prefix.
    seed : int, optional
        Picks the run's maps in a directory of several runs' maps.
    checkpoints : dict, optional
        Step -> checkpoint directory (or ``[hub name, revision]``) of this run.
    model : str, optional
        A hub model whose revisions ``step{N}`` are this run's checkpoints.
    """

    name: str
    maps: Path
    seed: int | None = None
    checkpoints: dict | None = None
    model: str | None = None

    def backend_params(self, params: dict) -> dict:
        """``[backend]``'s keywords with this run's checkpoints (or hub model)."""
        steps = (sorted(int(k) for k in params["checkpoints"]) if "checkpoints" in params
                 else list(params.get("steps", ())))
        params = {k: v for k, v in params.items() if k not in ("checkpoints", "name", "steps")}
        if self.checkpoints is not None:
            return dict(params, checkpoints=self.checkpoints)
        return dict(params, name=self.model, steps=steps)


@dataclass(frozen=True)
class RunsDesign(Design):
    """``kind = "runs"``: the same instances in several runs' data orders.

    Parameters
    ----------
    where : str
        Where the table is; every message starts with it.
    data : Path
        The indexed dataset (``.idx`` / ``.bin``) the runs' index maps index.
    spans : Path
        The instances: a ``.parquet`` or ``.csv`` table of ``document`` (and ``start``,
        ``end``: the tokens ``start .. end - 1`` of the document; without them the whole document), and an
        optional ``unit`` column (default: the row number).
    batch_size : int
        Sequences per optimisation step.
    runs : tuple of RunOrder
        The runs (``[[design.runs]]``), at least one, names distinct.
    require_all : bool
        Refuse an instance that one run trains and another never trains whole (``false``:
        never treated in that run).
    validation : Path, optional
        A 2-D ``.npy`` of held-out token ids (units ``-1 - j``), never trained in any run.
    """

    data: Path
    spans: Path
    batch_size: int
    runs: tuple
    require_all: bool = True
    validation: Path | None = None

    kind: ClassVar[str] = "runs"
    draws_instances: ClassVar[bool] = True
    _paths: ClassVar[tuple] = ("data", "spans", "validation")
    _constraints: ClassVar[dict] = {
        "data": _PATH, "spans": _PATH, "batch_size": Integral(1), "runs": _Runs(),
        "require_all": Boolean(), "validation": _PATH,
    }

    # ------------------------------------------------------------------ reading
    @classmethod
    def from_table(cls, table: dict, where: str, base: Path) -> RunsDesign:
        """As :meth:`Design.from_table`, with each ``[[design.runs]]`` table checked."""
        design = super().from_table(table, where, base)
        runs, names = [], set()
        for i, run in enumerate(design.runs):
            here = f"{where} runs[{i}]"
            unknown_keys(run, _RUN_KEYS, here)
            name = run.get("name")
            if not isinstance(name, str) or not name:
                raise ConfigError(f"{here} needs a name (a non-empty string); got {name!r}.")
            if name in names:
                raise ConfigError(f"{here} name {name!r} is given to two runs.")
            names.add(name)
            if not isinstance(run.get("maps"), str):
                raise ConfigError(f"{here} (run {name!r}) needs maps: its index maps' "
                                  "directory or prefix (a string).")
            seed = run.get("seed")
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
                raise ConfigError(f"{here} (run {name!r}) seed must be an integer; got "
                                  f"{seed!r}.")
            checkpoints, model = run.get("checkpoints"), run.get("model")
            if (checkpoints is None) == (model is None):
                raise ConfigError(f"{here} (run {name!r}) needs one of checkpoints (step = "
                                  "directory) or model (a hub name), not both or neither.")
            if checkpoints is not None:
                if not isinstance(checkpoints, dict) or not checkpoints:
                    raise ConfigError(f"{here} (run {name!r}) checkpoints must be a table of "
                                      f"step = directory; got {checkpoints!r}.")
                checkpoints = {str(k): str(Path(base) / v) if isinstance(v, str)
                               and not Path(v).is_absolute() else v
                               for k, v in checkpoints.items()}
            elif not isinstance(model, str):
                raise ConfigError(f"{here} (run {name!r}) model must be a hub name (a "
                                  f"string); got {model!r}.")
            runs.append(RunOrder(name=name, maps=Path(base) / run["maps"], seed=seed,
                                 checkpoints=checkpoints, model=model))
        return dataclasses.replace(design, runs=tuple(runs))

    @property
    def run_names(self) -> tuple:
        """The runs' names, in the order of the study file."""
        return tuple(run.name for run in self.runs)

    def run_backends(self, spec) -> dict:
        """Run name -> the :class:`~didmem.backends.BackendSpec` that scores its checkpoints
        (``[backend]``'s settings with the run's checkpoints or model)."""
        from ...backends._spec import BackendSpec

        return {run.name: BackendSpec(spec.kind, run.backend_params(spec.params))
                for run in self.runs}

    def check_backend(self, spec, checkpoints) -> None:
        """Every run's backend builds and has exactly ``[backend]``'s checkpoint steps."""
        steps = sorted(int(c) for c in checkpoints)
        for name, run_spec in self.run_backends(spec).items():
            try:
                built = run_spec.build()
            except (ParameterError, TypeError) as exc:
                raise ConfigError(f"{self.where} run {name!r}: {exc}") from None
            mine = sorted(int(c) for c in built.checkpoints)
            if mine != steps:
                missing = sorted(set(steps) - set(mine))
                extra = sorted(set(mine) - set(steps))
                what = (f"lacks the checkpoint of step {missing[0]}" if missing
                        else f"has a checkpoint at step {extra[0]}")
                raise ConfigError(
                    f"{self.where} run {name!r} {what}, which [backend] "
                    f"{'has' if missing else 'does not have'} (steps {steps}): every run "
                    "needs the same checkpoints, so that its cells line up with the others'.")

    def check_files(self, checkpoints) -> None:
        """The dataset, the instances and every run's maps are there and fit together."""
        self._cohorts(checkpoints)

    def never_treated(self) -> int | None:
        """The validation instances (0 without ``validation``)."""
        if self.validation is None:
            return 0
        return len(read_token_ids(self.validation, f"{self.where} validation"))

    # ------------------------------------------------------------------ the order
    def _dataset(self):
        from ...orders.indexed import MMapIndexedDataset

        with self.config_errors("data"):
            return MMapIndexedDataset(self.data)

    def _instance_table(self) -> pd.DataFrame:
        file = self.spans
        if not file.is_file():
            raise ConfigError(f"{self.where} spans {str(file)!r} does not exist.")
        if file.suffix not in (".parquet", ".csv"):
            raise ConfigError(f"{self.where} spans {str(file)!r} must be a .parquet or "
                              ".csv table.")
        try:
            table = pd.read_parquet(file) if file.suffix == ".parquet" else pd.read_csv(file)
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise ConfigError(f"{self.where} spans {str(file)!r} cannot be read: "
                              f"{reason}") from None
        if "unit" in table and table["unit"].duplicated().any():
            dup = table["unit"][table["unit"].duplicated()].iloc[0]
            raise ConfigError(f"{self.where} spans {str(file)!r} repeats unit {dup!r}.")
        return table

    def _maps(self) -> dict:
        from ...orders.neox import read_index_maps

        out = {}
        data = self._dataset()
        for run in self.runs:
            with self.config_errors(f"run {run.name!r} maps"):
                out[run.name] = read_index_maps(run.maps, run.seed, n_documents=len(data))
        return out

    def _cohorts(self, checkpoints) -> pd.DataFrame:
        """``run, unit, cohort, cohort_2, ..., exposures`` of every instance in every run
        (validation units never treated)."""
        from ...orders.neox import run_cohorts, run_exposures

        table = self._instance_table()
        data = self._dataset()
        spans = table[[c for c in ("document", "start", "end") if c in table]]
        with self.config_errors(f"spans {str(self.spans)!r}"):
            exposures = run_exposures(self._maps(), data.sizes, spans, self.batch_size)
            cohorts = run_cohorts(exposures, len(table), checkpoints, runs=self.run_names,
                                  require_all=self.require_all, where=self.where)
        units = self._unit_ids(table)
        cohorts["unit"] = units[cohorts["unit"].to_numpy()]
        held = self._validation_units()
        if held.size:
            rows = [pd.DataFrame({"run": name, "unit": held}) for name in self.run_names]
            cohorts = pd.concat([cohorts, *rows], ignore_index=True)
            cohorts["exposures"] = cohorts["exposures"].fillna(0).astype(np.int64)
        return cohorts

    def _unit_ids(self, table: pd.DataFrame) -> np.ndarray:
        return (table["unit"].to_numpy() if "unit" in table
                else np.arange(len(table), dtype=np.int64))

    def _validation_units(self) -> np.ndarray:
        if self.validation is None:
            return np.zeros(0, dtype=np.int64)
        return -1 - np.arange(self.never_treated(), dtype=np.int64)

    def exposures(self, checkpoints) -> pd.DataFrame:
        """Every exposure of each instance in each run: ``run, unit, position, step``."""
        from ...orders.neox import run_exposures

        table = self._instance_table()
        spans = table[[c for c in ("document", "start", "end") if c in table]]
        with self.config_errors(f"spans {str(self.spans)!r}"):
            out = run_exposures(self._maps(), self._dataset().sizes, spans, self.batch_size)
        out["unit"] = self._unit_ids(table)[out["unit"].to_numpy()]
        return out

    # ------------------------------------------------------------------ running
    def instances(self, config, checkpoints, out):
        """The instances' tokens, read from ``data`` (and ``validation``)."""
        table = self._instance_table()
        data = self._dataset()
        tokens = []
        for row in table.itertuples():
            doc = data[int(row.document)]
            start = int(getattr(row, "start", 0))
            end = int(getattr(row, "end", doc.size))
            tokens.append(doc[start:end])
        units = list(self._unit_ids(table))
        if self.validation is not None:
            held = read_token_ids(self.validation, f"{self.where} validation")
            tokens += [np.asarray(t, dtype=np.int64) for t in held]
            units += list(self._validation_units())
        self._cohorts(checkpoints)  # a mistake shows before scoring
        return tokens, np.asarray(units)

    def cohort_table(self, units, checkpoints) -> pd.DataFrame:
        """``run, unit, cohort, cohort_2, ..., exposures`` (see :meth:`panel`)."""
        cohorts = self._cohorts(checkpoints)
        return cohorts[cohorts["unit"].isin(pd.unique(np.asarray(units)))].reset_index(
            drop=True)

    def cohorts_of(self, units, checkpoints) -> np.ndarray:
        """Not defined for several runs: a unit has one cohort per run."""
        raise ConfigError(f"{self.where}: a unit has one cohort per run; use cohort_table.")

    def panel(self, scores: pd.DataFrame, tokens, units, checkpoints) -> pd.DataFrame:
        """The scores of every run (``run``, ``unit``, ``time``, metrics) with each unit's
        cohorts in its run and the instance covariates."""
        from ...backends.covariates import add_instance_covariates, instance_covariates

        if "run" not in scores:
            raise ConfigError(f"{self.where}: the scores of several runs need a run column.")
        table = self.cohort_table(pd.unique(scores["unit"]), checkpoints)
        frame = scores.merge(table, on=["run", "unit"], how="left", validate="many_to_one")
        if frame["exposures"].isna().any():
            row = frame[frame["exposures"].isna()].iloc[0]
            raise ConfigError(f"{self.where}: run {row['run']!r} scored unit {row['unit']!r}, "
                              "which is not an instance of the design.")
        frame["exposures"] = frame["exposures"].astype(np.int64)
        front = ["run", "unit", "time"] + [c for c in table.columns if c not in ("run", "unit")]
        frame = frame[front + [c for c in frame.columns if c not in front]]
        covariates = instance_covariates(tokens, units)
        return add_instance_covariates(frame, covariates).reset_index(drop=True)
