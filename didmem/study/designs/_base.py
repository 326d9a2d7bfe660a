"""What every ``[design] kind`` shares: reading its table and writing the panel.

A kind is a frozen dataclass derived from :class:`Design`. Its fields but ``where`` are the
keys of its ``[design]`` table (besides ``kind``); their defaults are the fields' defaults;
``_constraints`` declares what each key accepts (the constraints of
:mod:`didmem._validation`) and ``_paths`` the keys that are paths, read from the study
file's directory. :meth:`Design.from_table` checks the table from these declarations.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ...errors import ConfigError, ParameterError
from .._tables import closest, replace_atomically, unknown_keys

__all__ = ["Design", "ExposureDesign"]


@dataclass(frozen=True)
class Design:
    """A ``[design]`` table: which instances a study scores and when each was trained.

    Parameters
    ----------
    where : str
        Where the table is (``config FILE: [design]``); every message starts with it.
    """

    where: str

    kind: ClassVar[str] = ""
    draws_instances: ClassVar[bool] = False
    """Whether the design draws the instances itself (then the study has no [instances])."""
    _constraints: ClassVar[dict] = {}
    _paths: ClassVar[tuple] = ()

    # ------------------------------------------------------------------ reading
    @classmethod
    def keys(cls) -> frozenset:
        """The keys of this kind's table: ``kind`` and the fields but ``where``."""
        return frozenset({"kind"} | {f.name for f in dataclasses.fields(cls)} - {"where"})

    @classmethod
    def from_table(cls, table: dict, where: str, base: Path) -> Design:
        """Check ``table`` against the declarations and build the design.

        Raises
        ------
        ConfigError
            One line naming ``where`` and the key that is wrong.
        """
        unknown_keys(table, cls.keys(), where, f" for kind = {cls.kind!r}")
        values = {}
        for field in dataclasses.fields(cls):
            name = field.name
            constraint = cls._constraints.get(name)
            if name == "where":
                continue
            if name not in table:
                if field.default is dataclasses.MISSING:
                    what = getattr(constraint, "description", "a value")
                    raise ConfigError(f"{where} needs the key {name}: {what}.")
                continue
            value = table[name]
            if constraint is not None and not constraint(value):
                hint = closest(value, getattr(constraint, "values", ()))
                raise ConfigError(f"{where} {name} must be {constraint.description}; "
                                  f"got {value!r}{hint}.")
            if name in cls._paths:
                value = Path(base) / value
            values[name] = tuple(value) if isinstance(value, list) else value
        design = cls(where=where, **values)
        design.check_table()
        return design

    def check_table(self) -> None:
        """Checks that involve several keys (default: none)."""

    def check_files(self, checkpoints) -> None:
        """Checks of the design's files against the checkpoints, when the study is read.

        They must be cheap (no scoring, no large reads); the default checks nothing.
        """

    def check_backend(self, spec, checkpoints) -> None:
        """Checks of the design against ``[backend]`` (its spec and checkpoint steps), when
        the study is read; the default checks nothing."""

    @property
    def run_names(self) -> tuple:
        """The names of the training runs a design scores separately (none: one run, the
        ``[backend]``'s checkpoints)."""
        return ()

    def run_backends(self, spec) -> dict:
        """Run name -> the backend spec of its checkpoints (designs of several runs)."""
        return {}

    def covariates(self) -> tuple:
        """The instance covariates :meth:`panel` adds (what ``[estimate] covariates`` may
        name): those of :func:`~didmem.backends.instance_covariates`."""
        from ...backends.covariates import instance_covariates

        return tuple(c for c in instance_covariates([[1]]).columns if c != "unit")

    def never_treated(self) -> int | None:
        """How many never-treated instances the design gives, or ``None`` if unknown yet."""
        return None

    def max_exposures(self) -> int | None:
        """The most times training sees any instance, read cheaply when the study is read
        (before any scoring), or ``None`` if unknown yet."""
        return None

    # ------------------------------------------------------------------ running
    @contextlib.contextmanager
    def config_errors(self, key: str = ""):
        """Turn a reader's :class:`~didmem.ParameterError` into a :class:`ConfigError` that
        starts with this design's place in the configuration (and ``key``, the setting read)."""
        try:
            yield
        except ParameterError as exc:
            text = str(exc)
            if not text.startswith(self.where):
                text = f"{self.where} {key}: {text}" if key else f"{self.where} {text}"
            raise ConfigError(text) from None

    def instances(self, config, checkpoints, out):  # pragma: no cover - abstract
        """Token ids and unit ids of the instances to score; checked before any scoring."""
        raise NotImplementedError

    def cohorts_of(self, units, checkpoints) -> np.ndarray:  # pragma: no cover - abstract
        """Cohort of each unit on the checkpoints (``inf`` or NaN: never treated)."""
        raise NotImplementedError

    def cohort_table(self, units, checkpoints) -> pd.DataFrame:
        """``unit`` and ``cohort`` (NaN: never treated); designs with repeats add
        ``cohort_2``, ... and ``exposures``."""
        cohort = np.asarray(self.cohorts_of(units, checkpoints), dtype=np.float64)
        return pd.DataFrame({"unit": units,
                             "cohort": np.where(np.isfinite(cohort), cohort, np.nan)})

    def panel(self, scores: pd.DataFrame, tokens, units, checkpoints) -> pd.DataFrame:
        """The scores with the cohort columns (NaN for validation) and instance covariates.

        Parameters
        ----------
        scores : pandas.DataFrame
            The runner's frame (``unit``, ``time``, metrics).
        tokens, units
            The scored instances, for the covariates.
        checkpoints : sequence of int
            The backend's checkpoint steps.

        Returns
        -------
        pandas.DataFrame
            ``unit``, ``time``, ``cohort`` (``cohort_2``, ..., ``exposures`` where the
            design has repeats), the metrics and the covariates.
        """
        from ...backends.covariates import add_instance_covariates, instance_covariates

        unit_ids = pd.unique(scores["unit"])
        table = self.cohort_table(unit_ids, checkpoints).set_index("unit")
        frame = scores.copy()
        for i, column in enumerate(table.columns):
            values = frame["unit"].map(table[column])
            if column != "exposures":
                values = values.to_numpy(dtype=np.float64)
            frame.insert(2 + i, column, values)
        frame = self.adjust_panel(frame)
        covariates = instance_covariates(tokens, units)
        return add_instance_covariates(frame, covariates).reset_index(drop=True)

    def adjust_panel(self, frame: pd.DataFrame) -> pd.DataFrame:
        """A last change of the panel before the covariates are added (default: none)."""
        return frame

    def write_panel(self, scores, tokens, units, checkpoints, out) -> Path:
        """Write :meth:`panel` to ``out/panel.parquet`` (atomically) and return the path."""
        frame = self.panel(scores, tokens, units, checkpoints)
        return replace_atomically(Path(out) / "panel.parquet",
                                  lambda tmp: frame.to_parquet(tmp, index=False))


class ExposureDesign(Design):
    """A design whose instances may be trained on several times.

    Subclasses give :meth:`exposures` (one ``unit, step`` row per time training saw a
    unit); the panel gets ``cohort``, ``cohort_2``, ... and ``exposures``
    (:func:`~didmem.orders.exposure_cohorts`).
    """

    def exposures(self, units, checkpoints) -> pd.DataFrame:  # pragma: no cover - abstract
        """One ``unit, step`` row per exposure of each unit (none: never trained)."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        """How errors about the design's files start."""
        return self.where

    def instances(self, config, checkpoints, out):
        """The instances of ``[instances]``, checked against the design's order before any
        scoring (designs that read their instances from the suite's files override it)."""
        tokens, units = config.load_instances()
        ids = np.arange(len(tokens)) if units is None else np.asarray(units)
        self.cohort_table(pd.unique(ids), checkpoints)  # a mistake shows before scoring
        return tokens, units

    def cohort_table(self, units, checkpoints) -> pd.DataFrame:
        """``unit``, ``cohort``, ``cohort_2``, ..., ``exposures``."""
        from ...orders.exposures import exposure_cohorts

        exposures = self.exposures(units, checkpoints)
        with self.config_errors():
            return exposure_cohorts(exposures, units, checkpoints, where=self.label)

    def cohorts_of(self, units, checkpoints) -> np.ndarray:
        """The first exposure's cohort of each unit (``inf``: never trained on)."""
        first = self.cohort_table(units, checkpoints)["cohort"].to_numpy(dtype=np.float64)
        return np.where(np.isnan(first), np.inf, first)
