"""The study: read and checked at once, then scored, estimated and reported, resumably.

:meth:`Study.run` writes, under its output directory:

1. score: ``scores.parquet`` and ``panel.parquet`` (plus the runner's parts, ``plan.json``,
   ``manifest.json``, and ``sample.parquet`` for designs that draw their instances);
2. estimate: ``results-<outcome>.parquet`` per outcome;
3. report: ``report.html``.

It also writes ``study.json``, the configuration it ran. A step is done, and skipped on a
re-run, when its files exist and are newer than its inputs and ``study.json``: a changed
configuration redoes everything, and deleting ``results-*.parquet`` redoes the estimate and
the report but not the scoring. Within the scoring step the runner's parts make an
interrupted run resume where it stopped; ``redo=True`` redoes every step (the scoring still
reuses finished parts).
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping

import pandas as pd

from .._validation import Boolean, Satisfies, validate_params
from ..errors import ConfigError, DidmemError, OutputFileError, ParameterError
from ..panel import Panel
from ._tables import read_file, replace_atomically
from .config import StudyConfig, read_config, runner_table
from .designs import DESIGNS
from .estimate import ONE_EXPOSURE_ESTIMATORS

__all__ = ["Study", "StudyRun"]

STUDY_FILE = "study.json"
"""The configuration a run recorded in its output directory."""


@dataclass(frozen=True)
class StudyRun:
    """What :meth:`Study.run` produced.

    Attributes
    ----------
    out : Path
        The output directory.
    panel : pandas.DataFrame
        ``panel.parquet``: the scores with cohorts and instance covariates.
    results : Mapping of str to result
        Outcome -> its result: the fitted :class:`~didmem.GroupTimeResult`, or the
        :class:`~didmem.SavedResult` read back where the estimate was done already.
    report_path : Path
        ``report.html``.
    """

    out: Path
    panel: pd.DataFrame
    results: Mapping
    report_path: Path


def _path(value) -> bool:
    return isinstance(value, (str, os.PathLike)) and os.fspath(value) != ""


_PATH = Satisfies(_path, "a path (a non-empty string or os.PathLike)")
_OUT = Satisfies(lambda v: v is None or _path(v), "None or a directory's path")
_TEXT = Satisfies(lambda v: v is None or isinstance(v, str), "None or a string")
_LOG = Satisfies(lambda v: v is None or callable(v), "None or a callable that takes a line")
_READ = {"runner": _TEXT, "address": _TEXT}


def _done(outputs, inputs) -> bool:
    """Every output exists and is at least as new as every input."""
    outputs, inputs = list(outputs), list(inputs)
    if not outputs or not all(p.is_file() for p in outputs):
        return False
    oldest = min(p.stat().st_mtime_ns for p in outputs)
    return all(oldest >= p.stat().st_mtime_ns for p in inputs if p.is_file())


def unreadable(path: Path, exc: BaseException) -> OutputFileError:
    """The error for an output file that cannot be read: which file to delete."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return OutputFileError(
        f"{str(path)!r} cannot be read ({reason}): it was cut short, perhaps by a killed run "
        "or a full disk. Delete it and run again to write it anew."
    )


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise unreadable(path, exc) from None


def _load_result(path: Path):
    from ..results.saving import load_result

    try:
        return load_result(path)
    except DidmemError:
        raise
    except (OSError, ValueError) as exc:
        raise unreadable(path, exc) from None


class Study:
    """A study: from checkpoints and instances to a panel, results and a report.

    Build it with :meth:`from_file` or :meth:`from_dict`, which read and check the whole
    configuration at once (see :mod:`didmem.study.config` and the ``study`` page of the
    docs), so that a mistake is found before anything is scored.

    Parameters
    ----------
    config : StudyConfig
        A checked configuration.

    Examples
    --------
    >>> study = Study.from_file("study.toml")                  # doctest: +SKIP
    >>> run = study.run(out="out")                             # doctest: +SKIP
    >>> run.results["mean_token_loglik"].aggregate("instantaneous")  # doctest: +SKIP
    """

    def __init__(self, config: StudyConfig) -> None:
        if not isinstance(config, StudyConfig):
            raise ConfigError("Study(config) takes a StudyConfig; build a study with "
                              "Study.from_file(path) or Study.from_dict(data).")
        self.config = config

    @classmethod
    @validate_params({"path": _PATH} | _READ, owner="Study.from_file")
    def from_file(cls, path, *, runner: str | None = None, address: str | None = None) -> Study:
        """Read and check a ``.toml`` or ``.json`` study file.

        Parameters
        ----------
        path : str or os.PathLike
            The file; relative paths in it are read from its directory.
        runner : {"local", "ray"}, optional
            Overrides ``[runner] kind``.
        address : str, optional
            Overrides ``[runner] address`` (Ray only).

        Raises
        ------
        ConfigError
            One line naming the file and the key that is wrong.
        """
        path = Path(path)
        data = read_file(path)
        return cls(read_config(data, f"config {path}", path.resolve().parent, runner=runner,
                               address=address))

    @classmethod
    @validate_params({"data": Satisfies(lambda v: isinstance(v, Mapping), "a dict of tables"),
                      "base_dir": _PATH} | _READ, owner="Study.from_dict")
    def from_dict(cls, data: dict, base_dir=".", *, runner: str | None = None,
                  address: str | None = None) -> Study:
        """Check a configuration given as a dict (the tables of a study file).

        Parameters
        ----------
        data : dict
            The configuration; it is copied.
        base_dir : str or os.PathLike
            The directory relative paths are read from.
        runner, address
            As in :meth:`from_file`.

        Raises
        ------
        ConfigError
            One line naming the key that is wrong.
        """
        return cls(read_config(copy.deepcopy(dict(data)), "config <dict>", Path(base_dir).resolve(),
                               runner=runner, address=address))

    # ------------------------------------------------------------------ helpers
    @property
    def outcomes(self) -> tuple:
        """The outcomes :meth:`run` estimates: ``[estimate] outcomes``, else every metric."""
        return tuple(self.config.estimate.outcomes or self.config.metrics)

    def _out(self, out, default: str) -> Path:
        return Path(out) if out is not None else (self.config.out or Path(default))

    def _runner(self, out: Path, runner):
        from ..runners import RUNNERS, Runner

        config = self.config
        if runner is None:
            return config.make_runner(out)
        if isinstance(runner, str):
            table = runner_table(config.data.get("runner", {}), config.where, runner)
            settings = {k: v for k, v in table.items() if k != "kind"}
            return RUNNERS[runner](out, shard_size=config.shard_size, model=config.model,
                                   **settings)
        if isinstance(runner, Runner):
            if runner.out_dir is None:
                runner = copy.copy(runner)
                runner.out_dir = out
            elif runner.out_dir.resolve() != out.resolve():
                raise ConfigError(f"The runner writes to {str(runner.out_dir)!r} but the study "
                                  f"to {str(out)!r}; give the runner out_dir=None.")
            return runner
        raise ConfigError(f"runner must be a runner kind ({', '.join(RUNNERS)}) or a "
                          f"Runner; got {runner!r}.")

    def _instances(self, backend, out: Path):
        config = self.config
        if config.design is not None:
            return config.design.instances(config, backend.checkpoints, out)
        return config.load_instances()

    # ------------------------------------------------------------------ steps
    @validate_params({"out": _OUT, "log": _LOG}, owner="Study.plan")
    def plan(self, out=None, log: Callable | None = None):
        """The scoring plan (work items) without scoring anything; saved as ``plan.json``.

        Parameters
        ----------
        out : str or os.PathLike, optional
            As in :meth:`score`.
        log : callable, optional
            Called with the plan's summary and the path it was saved to.

        Returns
        -------
        ScoringPlan
        """
        log = log or (lambda line: None)
        out = self._out(out, "didmem-scores")
        backend = self.config.backend.build()
        tokens, units = self._instances(backend, out)
        plan = self.config.make_runner(out).plan(backend, tokens, unit_ids=units,
                                                 metrics=self.config.metrics)
        out.mkdir(parents=True, exist_ok=True)
        log(plan.summary())
        log(f"wrote {plan.save(out / 'plan.json')}")
        return plan

    @validate_params({"out": _OUT, "log": _LOG}, owner="Study.score")
    def score(self, out=None, runner=None, log: Callable | None = None) -> pd.DataFrame:
        """Score every instance at every checkpoint into ``out/scores.parquet``.

        With a ``[design]`` it also writes ``out/panel.parquet`` (cohorts and instance
        covariates). A re-run skips the work items whose parts are written.

        Parameters
        ----------
        out : str or os.PathLike, optional
            The output directory (default: the configuration's ``out``, else
            ``didmem-scores``).
        runner : str or Runner, optional
            A runner kind overriding ``[runner] kind``, or a runner, used as it is (its
            ``shard_size`` and settings; its ``out_dir`` must be ``None`` or ``out``).
        log : callable, optional
            Called with each line of progress (``print`` on the command line).

        Returns
        -------
        pandas.DataFrame
            The scores: ``unit``, ``time`` and one column per metric.
        """
        log = log or (lambda line: None)
        config = self.config
        out = self._out(out, "didmem-scores")
        backend = config.backend.build()
        tokens, units = self._instances(backend, out)
        if config.design is not None and config.design.run_names:
            frame = self._score_runs(out, runner, tokens, units, log)
        else:
            scorer = self._runner(out, runner)
            frame = scorer.run(backend, tokens, unit_ids=units, metrics=config.metrics)
        path = replace_atomically(out / "scores.parquet",
                                   lambda tmp: frame.to_parquet(tmp, index=False))
        kind = runner if isinstance(runner, str) else config.runner["kind"]
        label = type(runner).__name__ if runner is not None and not isinstance(runner, str) \
            else f"{kind} runner"
        log(f"scored {frame['unit'].nunique()} instances at {frame['time'].nunique()} "
            f"checkpoints with the {label}; wrote {path}")
        if config.design is not None:
            panel = config.design.write_panel(frame, tokens, units, backend.checkpoints, out)
            log(f"wrote {panel} (cohorts from [design], instance covariates)")
        return frame

    def _score_runs(self, out: Path, runner, tokens, units, log) -> pd.DataFrame:
        """Score the instances at every run's checkpoints (a design of several runs), each
        run into ``out/runs/NAME``; the scores with a ``run`` column first."""
        from ..runners import Runner

        if isinstance(runner, Runner):
            raise ConfigError("A study of several runs scores each run into its own folder; "
                              "give a runner kind (local or ray), not a Runner.")
        frames = []
        for name, spec in self.config.design.run_backends(self.config.backend).items():
            scorer = self._runner(out / "runs" / name, runner)
            scores = scorer.run(spec.build(), tokens, unit_ids=units,
                                metrics=self.config.metrics)
            log(f"run {name!r}: scored {scores['unit'].nunique()} instances at "
                f"{scores['time'].nunique()} checkpoints")
            frames.append(scores.assign(run=name))
        frame = pd.concat(frames, ignore_index=True)
        return frame[["run"] + [c for c in frame.columns if c != "run"]]

    def _record(self, out: Path) -> Path:
        """``out/study.json``: rewritten (so newer than every output) when the study changed."""
        path = out / STUDY_FILE
        text = json.dumps({"base": str(self.config.base), "config": self.config.data},
                          indent=1, sort_keys=True, default=str)
        if not path.is_file() or path.read_text() != text:
            replace_atomically(path, lambda tmp: tmp.write_text(text))
        return path

    def _fit(self, frame: pd.DataFrame, outcome: str):
        settings, where = self.config.estimate, f"{self.config.where}: [estimate]"
        cohorts = ["cohort"]  # and cohort_2, cohort_3, ...: the later exposures' cohorts
        while f"cohort_{len(cohorts) + 1}" in frame.columns:
            cohorts.append(f"cohort_{len(cohorts) + 1}")
        try:
            estimator = settings.estimator_for(outcome)
        except TypeError as exc:  # a keyword the estimator does not take
            raise ConfigError(f"{where} {exc}") from None
        if self.config.design is not None and self.config.design.run_names:
            return self._fit_runs(frame, outcome, estimator, where)
        if len(cohorts) > 1 and settings.estimator in ONE_EXPOSURE_ESTIMATORS:
            raise ConfigError(f"{where} estimator = {settings.estimator!r} takes one exposure "
                              f"per instance, but the panel has {len(cohorts)} exposures "
                              f"(columns {', '.join(cohorts)}); use estimator = 'did' "
                              "(exposure = k), or a training order without repeats.")
        try:
            panel = Panel(frame, unit="unit", time="time", cohort=cohorts, outcome=outcome,
                          covariates=list(settings.covariates) or None,
                          balance=settings.balance)
            return estimator.fit(panel)
        except DidmemError as exc:
            raise type(exc)(f"{where} outcome {outcome!r}: {exc}") from None

    def _fit_runs(self, frame: pd.DataFrame, outcome: str, estimator, where: str):
        """A panel of several runs: :class:`~didmem.RunsEstimator` (each run's, the pooled
        and the within-instance profile) with the ``[estimate]`` settings it shares with
        :class:`~didmem.DiDEstimator`, on the first exposure's cohorts."""
        from ..estimators.runs import RunsEstimator

        settings = self.config.estimate
        if settings.estimator != "did" or settings.covariates:
            raise ConfigError(f"{where} a study of several runs fits RunsEstimator, which "
                              "takes the did estimator's settings without covariates.")
        takes = RunsEstimator().get_params()
        params = {k: v for k, v in estimator.get_params().items() if k in takes}
        try:
            panel = Panel(frame, unit="unit", time="time", cohort="cohort", outcome=outcome,
                          run="run")
            return RunsEstimator(**params).fit(panel)
        except DidmemError as exc:
            raise type(exc)(f"{where} outcome {outcome!r}: {exc}") from None

    @validate_params({"out": _OUT, "redo": Boolean(), "log": _LOG}, owner="Study.run")
    def run(self, out=None, runner=None, redo: bool = False,
            log: Callable | None = None) -> StudyRun:
        """Score, estimate and report, skipping the steps that are done.

        Parameters
        ----------
        out : str or os.PathLike, optional
            The output directory (default: the configuration's ``out``, else
            ``didmem-study``).
        runner : str or Runner, optional
            As in :meth:`score`.
        redo : bool
            Redo every step (the scoring still reuses its finished parts).
        log : callable, optional
            Called with each line of progress (``print`` on the command line).

        Returns
        -------
        StudyRun

        Raises
        ------
        ConfigError
            The study has no ``[design]`` (nothing gives the cohorts).
        OutputFileError
            A file of an earlier run cannot be read; the message says which to delete.
        """
        config = self.config
        if config.design is None:
            raise ConfigError(
                f"{config.where}: running a study needs a [design] table (kind = "
                f"{' or '.join(repr(k) for k in DESIGNS)}) that gives the cohorts; "
                "Study.score (didmem score) scores without one."
            )
        log = log or (lambda line: None)
        out = self._out(out, "didmem-study")
        out.mkdir(parents=True, exist_ok=True)
        record = self._record(out)

        panel_path, scores_path = out / "panel.parquet", out / "scores.parquet"
        if not redo and _done([panel_path, scores_path], [record]):
            log(f"1/3 score: done already ({panel_path}); skipped")
        else:
            log("1/3 score")
            self.score(out, runner, log)
        frame = _read_parquet(panel_path)

        paths = {o: out / f"results-{o}.parquet" for o in self.outcomes}
        results = {}
        for i, (outcome, path) in enumerate(paths.items(), 1):
            label = f"2/3 estimate {outcome} ({i} of {len(paths)})"
            if not redo and _done([path], [panel_path, record]):
                log(f"{label}: done already ({path}); skipped")
                results[outcome] = _load_result(path)
                continue
            log(label)
            result = self._fit(frame, outcome)
            holes = _holes_line(frame, outcome)
            if holes:
                log(holes)
            log(result.summary())
            replace_atomically(path, result.save)
            log(f"wrote {path}")
            results[outcome] = result

        report_path = out / "report.html"
        if not redo and _done([report_path], [*paths.values(), record]):
            log(f"3/3 report: done already ({report_path}); skipped")
        else:
            self._report(paths, report_path)
            log(f"3/3 report: wrote {report_path}")
        return StudyRun(out=out, panel=frame, results=MappingProxyType(results),
                        report_path=report_path)

    def _report(self, paths: dict, report_path: Path) -> None:
        from ..report import write_report

        options = dict(self.config.report)
        options.setdefault("title",
                           f"didmem: memorisation profile of {self.config.model or 'the model'}")
        named = {o: _load_result(p) for o, p in paths.items()}
        try:
            replace_atomically(report_path, lambda tmp: write_report(named, tmp, **options))
        except ParameterError as exc:
            raise ConfigError(f"{self.config.where}: [report] {exc}") from None


def _holes_line(frame: pd.DataFrame, outcome: str) -> str:
    """How many (instance, checkpoint) scores of ``outcome`` are missing, and where."""
    scored = frame.dropna(subset=[outcome]) if outcome in frame else frame
    n_units, n_times = scored["unit"].nunique(), scored["time"].nunique()
    missing = n_units * n_times - len(scored)
    if missing <= 0:
        return ""
    per_time = n_units - scored.groupby("time")["unit"].nunique()
    worst = per_time[per_time > 0].sort_values(ascending=False).head(5)
    where = ", ".join(f"checkpoint {t:g}: {int(n)}" for t, n in worst.items())
    return (f"{outcome}: {missing} of {n_units * n_times} (instance, checkpoint) scores are "
            f"missing; estimating with every score kept (balance='keep'); most at {where}")
