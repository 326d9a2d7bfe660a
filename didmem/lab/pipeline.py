"""One lab run end to end: design, training, counterfactual runs, scoring, truth, files.

See :func:`run` for the entry point and ``docs/lab.rst`` for the layout of the output
directory.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import time as _time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._progress import progress as progress_line
from .._validation import (Boolean, Instance, Integral, OneOf, Satisfies, constraints_of,
                           validate_params)
from .._version import __version__
from ..errors import ParameterError
from .config import LabConfig, demo_config, quick_config
from .design import STREAMS, build_design
from .outputs import FORMAT_VERSION, LabDirectory
from .runs import run_design, run_directory, stack_runs
from .scoring import REFERENCE_METRIC, backend_settings, reference_checkpoint, tracking
from .scoring import score_run as _score_run
from .study_files import study_tables, study_toml
from .truth import (cohort_truth, combine_effects, direct_effects, draw_noise, exact_check,
                    instance_effects, mean_effect, not_yet_treated_effect)

__all__ = ["run", "LabResult", "load"]


@dataclass(frozen=True)
class LabResult:
    """What a lab run produced.

    Attributes
    ----------
    out_dir : pathlib.Path
        The run's directory.
    config : LabConfig
        Its settings.
    panel : pandas.DataFrame
        ``panel.parquet``: ``unit``, ``time``, ``cohort`` (NaN for validation), ``domain``,
        with rare instances ``rare`` and ``surprisal``, and the metrics.
    truth : pandas.DataFrame
        ``truth.parquet``: ``cohort``, ``time``, ``metric``, ``tau`` (the direct effect,
        ``tau_total - spillover``: what DiD with never-treated controls estimates; exact
        where the cohort has an exact run, by default every cohort), ``tau_twin`` (the
        twin's direct effect), ``exact``, ``sd``, ``n_units``, ``tau_total`` (the exact
        run's total effect), ``spillover`` (its mean effect on the never-treated
        instances), ``tau_nyt`` and ``spillover_nyt`` (the same with the not-yet-treated
        comparison's controls) and ``tau_se`` (the truth's own noise over replacement
        draws). With ``exposures > 1`` an ``exposure`` column comes first: exposure 1's
        rows are the effect of every exposure of the cohort's instances (what the first
        exposure's estimator identifies: its exact runs and the twin replace the instances
        at all their positions), exposure ``k``'s the direct effect of the ``k``-th
        exposure at its cohort against its history-matched controls (``tau_twin``,
        ``tau_nyt``, ``spillover_nyt`` and ``tau_se`` NaN).
    exact : pandas.DataFrame
        ``exact_check.parquet``: twin truth against the exact per-cohort truth (may be empty).

        With several runs (``config.runs > 1``) each of the three tables has a ``run``
        column first (``0 .. R-1``), and each run's own files are in ``runs/run{r}/``.
    timings : dict
        Seconds spent per stage (not written to disk, so that files stay reproducible).
        With several runs in several worker processes, each stage's seconds in its worker
        (the stages overlap) and ``runs``, the wall time of them all.
    reused : bool
        True when an identical complete run was already in ``out_dir`` and was loaded.
    """

    out_dir: Path
    config: LabConfig
    panel: pd.DataFrame
    truth: pd.DataFrame
    exact: pd.DataFrame
    timings: dict = field(default_factory=dict)
    reused: bool = False

    @property
    def checkpoint_dir(self) -> Path:
        """Directory of the main run's ``step{N}`` checkpoints (run 0's with several runs)."""
        if self.config.runs > 1:
            return self.out_dir / run_directory(0) / "checkpoints"
        return self.out_dir / "checkpoints"

    def instantaneous(self, metric: str = "mean_token_loglik",
                      exposure: int = 1) -> pd.DataFrame:
        """The true instantaneous effect τ(g, g) per cohort of one exposure, with its
        instance-level z-score.

        ``z = tau / (sd / sqrt(n_units))`` says how clearly the cohort's mean effect stands
        out from the spread of its instances' effects. ``exposure`` picks the ``k``-th
        exposure's cohorts and truth in a run with repeats (``exposures > 1``).
        """
        truth = self.truth
        if "exposure" in truth:  # repeated exposure: the rows of the exposure asked for
            if not (truth["exposure"] == exposure).any():
                raise ParameterError(f"This lab run has the exposures "
                                     f"{sorted(truth['exposure'].unique().tolist())}; got "
                                     f"exposure={exposure!r}.")
            truth = truth[truth["exposure"] == exposure]
        elif exposure != 1:
            raise ParameterError(f"This lab run has one exposure (exposures = 1); got "
                                 f"exposure={exposure!r}.")
        t = truth[(truth["metric"] == metric) & (truth["time"] == truth["cohort"])]
        keep = (["run"] if "run" in t else []) + ["cohort", "tau", "sd", "n_units"]
        out = t[keep].reset_index(drop=True)
        out["z"] = out["tau"] / (out["sd"] / np.sqrt(out["n_units"]))
        return out

    def summary(self, metric: str = "mean_token_loglik") -> str:
        """A short text report: instantaneous truth per cohort of every exposure and the
        exact check."""
        lines = [f"didmem lab run in {self.out_dir}", f"metric: {metric}"]
        exposures = (sorted(int(k) for k in self.truth["exposure"].unique())
                     if "exposure" in self.truth else [1])
        for k in exposures:
            if len(exposures) > 1:
                lines.append(f"exposure {k}" + (" (every exposure of the cohort's instances)"
                                                if k == 1 else f": the {_ordinal(k)} exposure"))
            table = self.instantaneous(metric, k)
            if "run" in table:  # several runs: one column of tau(g,g) per run
                wide = table.pivot(index="cohort", columns="run", values="tau")
                lines.append("cohort " + "".join(f"{'run ' + str(r):>10}" for r in wide.columns)
                             + "   (tau(g,g) of each run)")
                for g, row in wide.iterrows():
                    lines.append(f"{g:>6} " + "".join(f"{v:>10.4f}" for v in row))
                continue
            lines.append("cohort   tau(g,g)        z")
            for row in table.itertuples():
                lines.append(f"{row.cohort:>6} {row.tau:>10.4f} {row.z:>8.1f}")
        ex = self.exact[self.exact["metric"] == metric] if len(self.exact) else self.exact
        if len(ex):
            lines.append("exact check: max |twin - exact| per cohort"
                         + (" (over the runs)" if "run" in ex else ""))
            for g, part in ex.groupby("cohort"):
                lines.append(f"{g:>6} {part['difference'].abs().max():>10.4f}")
        if self.timings:
            lines.append("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.timings.items()))
        return "\n".join(lines)


def _ordinal(k: int) -> str:
    return {2: "second", 3: "third"}.get(k, f"{k}th")


def _config_for(quick: bool, seed: int, config, changes: dict) -> LabConfig:
    if config is not None:
        if not isinstance(config, LabConfig):
            raise ParameterError(f"config must be a LabConfig; got {type(config).__name__}.")
        return config.replace(**changes) if changes else config
    return (quick_config if quick else demo_config)(seed=seed, **changes)


def _settings(cfg: LabConfig) -> dict:
    """What identifies a run: every setting, plus the content of the user's text files."""
    texts = [hashlib.sha256(Path(p).read_bytes()).hexdigest() if Path(p).is_file() else None
             for p in cfg.text_files]
    return {"config": cfg.to_dict(), "text_files_sha256": texts, "format_version": FORMAT_VERSION}


def load(out_dir) -> LabResult:
    """Load a complete lab run from its directory.

    Raises
    ------
    ParameterError
        If the directory holds no complete run (no ``manifest.json``).
    """
    directory = LabDirectory(out_dir)
    manifest = directory.manifest()
    if manifest is None:
        raise ParameterError(f"{str(out_dir)!r} holds no complete lab run (no manifest.json).")
    cfg = LabConfig.from_dict(manifest["settings"]["config"])
    path = Path(out_dir)
    return LabResult(
        out_dir=path,
        config=cfg,
        panel=pd.read_parquet(path / "panel.parquet"),
        truth=pd.read_parquet(path / "truth.parquet"),
        exact=pd.read_parquet(path / "exact_check.parquet"),
        reused=True,
    )


_PATH = Satisfies(lambda v: isinstance(v, (str, os.PathLike)) and os.fspath(v) != "",
                  "a directory's path (a non-empty string or os.PathLike)")
RUN_ARGUMENTS = {"out_dir": _PATH, "quick": Boolean(), "overwrite": Boolean(),
                 "seed": constraints_of(LabConfig)["seed"],
                 "config": Instance(LabConfig, allow_none=True)}
"""The declared arguments of :func:`run` (and :func:`~didmem.lab.replicate`)."""


@validate_params(RUN_ARGUMENTS | {"progress": OneOf(None, True, False),
                                  "workers": Integral(1, allow_none=True)},
                 owner="didmem.lab.run")
def run(out_dir, quick: bool = False, seed: int = 0, overwrite: bool = False,
        config: LabConfig | None = None, progress: bool | None = None,
        workers: int | None = None, **changes) -> LabResult:
    """Train a lab model, its twin and checks, score them, and write the run's directory.

    Parameters
    ----------
    out_dir : path-like
        Output directory (see ``docs/lab.rst`` for its layout).
    quick : bool
        Use the quick scale (:func:`~didmem.lab.quick_config`) instead of the demo scale.
    seed : int
        Master seed (ignored when ``config`` is given).
    overwrite : bool
        Replace a different run, or other files, in ``out_dir``. Without it such a directory
        is refused. A complete run with the same settings is loaded instead of recomputed,
        unless ``overwrite`` is True.
    config : LabConfig, optional
        Full settings; overrides ``quick`` and ``seed``.
    progress : bool, optional
        Show progress (the stage: training which run, scoring, writing; stages done, time
        spent) on standard error: by default when it is a terminal; ``True`` always,
        ``False`` never.
    workers : int, optional
        With several runs (``runs > 1``): the processes that train and score them at once
        (each with ``config.threads`` torch threads). By default one per run, at most the
        cores available divided by ``threads``; at most two per run are started. The files
        do not depend on it: each run's models, panel and truth are those of ``workers=1``,
        which runs everything in this process. Ignored with one run. The workers start with ``spawn``, so a script that
        calls :func:`run` with several workers must do so under
        ``if __name__ == "__main__":``.
    **changes
        Fields of :class:`~didmem.lab.LabConfig` to change, e.g. ``exact_cohorts=(96,)``.

    Returns
    -------
    LabResult

    Raises
    ------
    didmem.errors.ParameterError
        For impossible settings, or an output directory that holds something else.
    didmem.errors.MissingDependencyError
        Without torch or transformers (``pip install 'didmem[lm]'``).
    """
    from .workers import refuse_in_bootstrap

    refuse_in_bootstrap()  # a script without a main guard, imported by a worker: stop here
    cfg = _config_for(quick, seed, config, changes)
    directory = LabDirectory(out_dir)
    settings = _settings(cfg)
    if not overwrite and directory.is_complete_run_of(settings):
        return load(out_dir)
    timings = {}
    clock = _time.perf_counter()
    design = build_design(cfg)  # before touching the directory: bad input fails here
    from .workers import lab_workers

    workers = lab_workers(workers, cfg.runs, cfg.threads)
    stages = _stages(cfg, design, workers)
    bar = progress_line(len(stages), f"lab (seed {cfg.seed})", progress, unit="stages")
    bar.say(stages[0][1])

    def lap(name, seconds=None):
        """End the stage ``name`` now, or record the ``seconds`` a worker spent on it."""
        nonlocal clock
        now = _time.perf_counter()
        timings[name] = now - clock if seconds is None else seconds
        clock = now
        bar.step()
        if len(timings) < len(stages):
            bar.say(stages[len(timings)][1])

    with bar:
        directory.prepare(settings, overwrite)
        lap("design")
        from .trainer import torch_session

        with torch_session(cfg.threads) as torch:
            if cfg.runs == 1:
                tables, _ = _one_run(cfg, design, directory.path, lap)
            else:
                tables = _several_runs(cfg, design, directory.path, lap, workers)
            versions = {"torch": torch.__version__}
        if cfg.runs == 1:
            for name, frame in tables.items():
                directory.write_parquet(name, frame)
        manifest = _manifest(cfg, design, settings, versions)
        directory.finish(manifest)
        lap("writing")
    return LabResult(
        out_dir=directory.path,
        config=cfg,
        panel=tables["panel.parquet"],
        truth=tables["truth.parquet"],
        exact=tables["exact_check.parquet"],
        timings=timings,
    )


def _stages(cfg, design, workers: int = 1) -> list:
    """``(lap name, what it does)`` of the run's stages in order (the progress line's steps);
    with several runs, each run's stages are named ``run{r}/...``; with several workers
    they overlap, in the order they finish, and ``runs`` is their wall time."""
    one = [("train", "training the main run"), ("twin", "training the twin")]
    if cfg.exact_cohort_steps or _exposure_runs(design):
        one.append(("exact", "training the exact runs"))
    if cfg.n_subset_models:
        one.append(("subsets", f"training {cfg.n_subset_models} subset models"))
    one.append(("scoring", "scoring every checkpoint"))
    if workers > 1:
        one.append(("tables", "writing its tables"))
    if cfg.runs > 1:
        one = [(f"run{r}/{name}", f"run {r} of {cfg.runs}: {what}")
               for r in range(cfg.runs) for name, what in one]
    if workers > 1:
        one = [(name, f"{cfg.runs} runs in {workers} processes") for name, _ in one]
        one.append(("runs", f"{cfg.runs} runs in {workers} processes"))
    return [("design", "building the design")] + one + [("writing", "writing the tables")]


def _one_run(cfg, design, root: Path, lap, prefix: str = "", reference=None) -> tuple:
    """Train, score and tabulate one run into ``root`` (its checkpoints and ``study.toml``);
    return its tables by file name (``lap`` names its stages with ``prefix``) and the
    reference model ``reference_ratio`` was scored against (``reference``: another run's;
    by default this run's twin)."""
    runs = _train_all(cfg, design, root, lambda name: lap(prefix + name))
    if reference is None:
        reference = reference_checkpoint(cfg, runs)
    return _score_run_tables(cfg, design, root, runs, reference,
                             lambda name: lap(prefix + name)), reference


def _score_run_tables(cfg, design, root: Path, runs: dict, reference, lap) -> dict:
    """Score one run's models (lap ``scoring``), and return its tables by file name; write
    its ``study.toml``."""
    scores = _score_all(cfg, design, runs, reference)
    lap("scoring")
    tables = _tables(cfg, design, runs, scores)
    tables.update(study_tables(design, tables["data_order.parquet"]))
    (root / "study.toml").write_text(study_toml(  # no reference model there
        runs["main"]["checkpoints"], [m for m in cfg.metrics if m != REFERENCE_METRIC],
        backend_settings(cfg), cfg.seed))
    return tables


#: The tables of several runs that are also written stacked, with a ``run`` column, at the
#: top of the output directory (each run's directory has all of its own).
STACKED_TABLES = ("panel.parquet", "truth.parquet", "truth_units.parquet",
                  "truth_draws.parquet", "truth_controls.parquet", "exact_check.parquet", "sample.parquet")


def _several_runs(cfg, design, root: Path, lap, workers: int = 1) -> dict:
    """Train every run (:func:`~didmem.lab.runs.run_design`) into ``root/runs/run{r}``,
    write each run's tables there, and write the stacked tables (``run`` first) and the
    shared ``instances.parquet`` at ``root``; return the stacked tables. With ``workers >
    1`` the runs' work goes to that many processes (:func:`_parallel_runs`)."""
    if workers > 1:
        per_run = _parallel_runs(cfg, design, root, lap, workers)
    else:
        per_run, reference = [], None  # reference_ratio: run 0's twin for every run
        for r in range(cfg.runs):
            where = _run_root(root, r)
            tables, reference = _one_run(cfg, run_design(design, r), where, lap,
                                         prefix=f"run{r}/", reference=reference)
            _write_run_tables(where, tables)
            per_run.append(tables)
    top = LabDirectory(root)
    out = {name: stack_runs([t[name] for t in per_run]) for name in STACKED_TABLES}
    out["instances.parquet"] = per_run[0]["instances.parquet"]
    for name, frame in out.items():
        top.write_parquet(name, frame)
    return out


def _run_root(root: Path, run: int) -> Path:
    """Run ``run``'s own directory (made)."""
    where = root / run_directory(run)
    where.mkdir(parents=True, exist_ok=True)
    return where


def _write_run_tables(where: Path, tables: dict) -> None:
    """One run's tables in its directory (the shared ``instances.parquet`` goes on top)."""
    own = LabDirectory(where)
    for name, frame in tables.items():
        if name != "instances.parquet":
            own.write_parquet(name, frame)


def _parallel_runs(cfg, design, root: Path, lap, workers: int) -> list:
    """Every run's tables, its work done in ``workers`` processes
    (:func:`~didmem.lab.workers.run_tasks`).

    Each run is three tasks: the main run with its exact runs, the twin (with the subset
    models), and scoring with the tables (after both, and after run 0's twin when
    ``reference_ratio`` needs it). Every task computes exactly what :func:`_one_run` does in
    this process, so the files do not depend on ``workers``. ``lap`` gets each stage's
    seconds in its worker (stages overlap), then ``runs``: the wall time of them all."""
    from .workers import Task, run_tasks

    reference_needed = REFERENCE_METRIC in cfg.metrics
    train, twins, scoring = [], [], []
    for r in range(cfg.runs):
        args = (cfg, run_design(design, r), _run_root(root, r))
        train.append(Task(f"run{r}/main", _main_task, args))
        twins.append(Task(f"run{r}/twin", _twin_task, args))
        after = (f"run{r}/main", f"run{r}/twin") + (("run0/twin",) if reference_needed else ())
        scoring.append(Task(f"run{r}/scoring", _scoring_task, args, after=after))
    # the short twins first (run 0's is everyone's reference), so that no scoring waits for
    # one at the end; then the main runs, then the scoring as runs become ready
    tasks = twins + train + scoring

    def done(name, value, seconds):
        run = name.split("/")[0]
        for stage, sec in seconds.items():
            lap(f"{run}/{stage}", sec)

    clock = _time.perf_counter()
    results = run_tasks(tasks, workers, cfg.threads, on_done=done)
    lap("runs", _time.perf_counter() - clock)
    return [results[f"run{r}/scoring"] for r in range(cfg.runs)]


def _main_task(cfg, design, root: Path, laps) -> dict:
    """A worker's task: the main run and its exact runs (:func:`_train_main`,
    :func:`_train_exact`)."""
    return _train_exact(cfg, design, root, _train_main(cfg, design, root, laps), laps)


def _twin_task(cfg, design, root: Path, laps) -> dict:
    """A worker's task: the twin and the subset models."""
    return {**_train_twin(cfg, design, root, laps), **_train_subsets(cfg, design, root, laps)}


def _scoring_task(cfg, design, root: Path, main: dict, twin: dict, *rest) -> dict:
    """A worker's task: score one run and write its tables (``rest``: run 0's twin task's
    result when ``reference_ratio`` needs it, then the laps)."""
    *reference_run, laps = rest
    runs = _models(main, {"twin": twin["twin"]},
                   {k: v for k, v in twin.items() if k != "twin"})
    reference = reference_checkpoint(cfg, reference_run[0]) if reference_run else None
    tables = _score_run_tables(cfg, design, root, runs, reference, laps)
    _write_run_tables(root, tables)
    laps("tables")
    return tables


def _train_all(cfg, design, root: Path, lap) -> dict:
    """Train the main run, the twin, the exact runs (and their other replacement draws) and
    the subset models."""
    main = _train_main(cfg, design, root, lap)
    twin = _train_twin(cfg, design, root, lap)
    main = _train_exact(cfg, design, root, main, lap)
    return _models(main, twin, _train_subsets(cfg, design, root, lap))


def _models(main: dict, twin: dict, subsets: dict) -> dict:
    """The trained models of one run by name, in the order of the tables (main, twin, exact
    runs, subset models), from :func:`_train_main`'s, :func:`_train_twin`'s and
    :func:`_train_subsets`' results."""
    return {"main": main["main"], **twin, **{k: v for k, v in main.items() if k != "main"},
            **subsets}


def _train_main(cfg, design, root: Path, lap) -> dict:
    """Train the main run (lap ``train``), keeping the snapshots that the exact runs start
    from, and save the tokenizer beside the checkpoints."""
    from .trainer import init_model, train

    k = cfg.checkpoint_every
    design.corpus.tokenizer.save(root / "checkpoints" / "tokenizer.json")
    on_step, tracked = tracking(cfg, design, root / "track") if cfg.track else (None, None)
    main = train(cfg, design.tokens[design.order],
                 init_model(cfg, len(design.corpus.tokenizer), design.init_seed),
                 root / "checkpoints", cfg.checkpoints,
                 snapshot_steps=[g - k for g in cfg.exact_cohort_steps]
                 + [g - k for _, g in _exposure_runs(design)], on_step=on_step)
    if tracked is not None:
        main["tracked"] = tracked()  # the main run's scores, measured while it trained
    lap("train")
    return {"main": main}


def _train_exact(cfg, design, root: Path, runs: dict, lap) -> dict:
    """Train the exact runs from the main run's snapshots (lap ``exact``, if any), then drop
    the snapshots; return ``runs`` with them."""
    from .trainer import train

    tokens = design.tokens
    k = cfg.checkpoint_every
    later = _exposure_runs(design)
    runs = dict(runs)
    for g in cfg.exact_cohort_steps:
        runs[f"exact/cohort{g}"] = train(
            cfg, tokens[design.exact_order(g)], runs["main"]["snapshots"][g - k],
            root / "exact" / f"cohort{g}", [c for c in cfg.checkpoints if c >= g])
    for g in cfg.exact_cohort_steps:
        for j in range(1, cfg.truth_draws + 1):
            runs[f"exact/cohort{g}/draw{j}"] = train(
                cfg, tokens[design.exact_order(g, draw=j)], runs["main"]["snapshots"][g - k],
                root / "exact" / f"cohort{g}_draw{j}", [c for c in cfg.checkpoints if c >= g])
    for e, g in later:
        runs[f"exact{e}/cohort{g}"] = train(
            cfg, tokens[design.exposure_order(e, g)], runs["main"]["snapshots"][g - k],
            root / f"exact{e}" / f"cohort{g}", [c for c in cfg.checkpoints if c >= g])
    runs["main"]["snapshots"].clear()
    if cfg.exact_cohort_steps or later:
        lap("exact")
    return runs


def _train_twin(cfg, design, root: Path, lap) -> dict:
    """Train the twin (lap ``twin``)."""
    from .trainer import init_model, train

    twin = train(cfg, design.tokens[design.twin_order()],
                 init_model(cfg, len(design.corpus.tokenizer), design.init_seed),
                 root / "twin" / "checkpoints", cfg.checkpoints)
    lap("twin")
    return {"twin": twin}


def _train_subsets(cfg, design, root: Path, lap) -> dict:
    """Train the subset models (lap ``subsets``; none without them)."""
    from .trainer import init_model, train

    runs = {}
    for j in range(cfg.n_subset_models):
        runs[f"subset{j}"] = train(
            cfg, design.tokens[design.subset_order(j)],
            init_model(cfg, len(design.corpus.tokenizer), int(design.subset_seeds[j])),
            root / "subsets" / f"model{j}", cfg.checkpoints)
    if cfg.n_subset_models:
        lap("subsets")
    return runs


def _exposure_runs(design) -> list:
    """``(exposure, cohort)`` of every exact run of a later exposure (one per cohort)."""
    pairs = set(zip(design.repeat_exposures.tolist(), design.repeat_cohorts.tolist()))
    return sorted(pairs)


def _score_all(cfg, design, runs, reference=None) -> dict:
    """Score every run's checkpoints on the units it needs, with the transformers backend:
    a counterfactual run also on the controls whose drift its truth subtracts."""
    tokens = design.tokens
    analysed = design.analysed_ids
    validation = design.validation_ids
    units = np.concatenate([analysed, validation])
    score_run = functools.partial(_score_run, reference=reference)  # one for every run
    scores = {
        "main": runs["main"]["tracked"] if "tracked" in runs["main"]
        else score_run(runs["main"]["checkpoints"], tokens[units], units, cfg),
        "twin": score_run(runs["twin"]["checkpoints"], tokens[units], units, cfg),
    }
    for g in cfg.exact_cohort_steps:  # the cohort, its never- and not-yet-treated controls
        mine = analysed[design.analysed_cohorts == g]
        ids = np.concatenate([mine, validation, analysed[design.analysed_cohorts > g]])
        scores[f"exact/cohort{g}"] = score_run(runs[f"exact/cohort{g}"]["checkpoints"],
                                               tokens[ids], ids, cfg)
        ids = np.concatenate([mine, validation])
        for j in range(1, cfg.truth_draws + 1):
            name = f"exact/cohort{g}/draw{j}"
            scores[name] = score_run(runs[name]["checkpoints"], tokens[ids], ids, cfg)
    for e, g in _exposure_runs(design):  # treated and history-matched controls
        treated, controls, _, _ = design.exposure_groups(e, g)
        ids = analysed[np.concatenate([treated, controls])]
        scores[f"exact{e}/cohort{g}"] = score_run(runs[f"exact{e}/cohort{g}"]["checkpoints"],
                                                  tokens[ids], ids, cfg)
    for j in range(cfg.n_subset_models):
        scores[f"subset{j}"] = score_run(runs[f"subset{j}"]["checkpoints"], tokens[analysed],
                                         analysed, cfg)
    return scores


def _tables(cfg, design, runs, scores) -> dict:
    """Every parquet table of the run, by file name."""
    truth, effects, draws, exact, controls = _truth_tables(cfg, design, scores)
    tables = {
        "data_order.parquet": _order_table(cfg, design),
        "instances.parquet": _instances_table(design),
        "sample.parquet": _sample_table(cfg, design),
        "panel.parquet": _panel_table(cfg, design, scores["main"]),
        "truth.parquet": truth,
        "truth_units.parquet": effects,
        "truth_draws.parquet": draws,
        "truth_controls.parquet": controls,
        "twin_scores.parquet": scores["twin"][["unit", "time"] + list(cfg.metrics)],
        "exact_check.parquet": exact,
        "losses.parquet": _losses_table(cfg, runs),
    }
    tables.update(_subset_tables(cfg, design, scores))
    return tables


def _later_cohorts(design, exposure: int) -> np.ndarray:
    """Cohort of every analysed instance's ``exposure``-th exposure (NaN where none)."""
    cohorts = design.exposure_cohorts()[:, exposure - 1]
    return np.where(np.isinf(cohorts), np.nan, cohorts)


def _panel_table(cfg, design, main: pd.DataFrame) -> pd.DataFrame:
    """``panel.parquet``: the main run's scores with each unit's cohorts, domain and instance
    features (:func:`instance_features`)."""
    units = main["unit"]
    panel = main[["unit", "time"]].copy()
    cohorts = pd.Series(design.analysed_cohorts.astype(np.float64), index=design.analysed_ids)
    panel["cohort"] = units.map(cohorts).to_numpy(np.float64)
    for e in range(2, cfg.exposures + 1):
        later = pd.Series(_later_cohorts(design, e), index=design.analysed_ids)
        panel[f"cohort_{e}"] = units.map(later).to_numpy(np.float64)
    panel["domain"] = design.domains[units.to_numpy()]
    for name, values in instance_features(design).items():
        panel[name] = values[units.to_numpy()]
    for m in cfg.metrics:
        panel[m] = main[m].to_numpy(np.float64)
    return panel


def instance_features(design) -> dict:
    """The instance features that drive memorisation, by name, one value per instance: with
    rare instances (``rare_share > 0``) ``rare`` (0 or 1) and ``surprisal``
    (:meth:`~didmem.lab.corpus.MarkovCorpus.surprisal`); none otherwise."""
    if design.rare is None:
        return {}
    return {"rare": design.rare.astype(np.int64),
            "surprisal": design.corpus.surprisal(design.tokens)}


def _truth_tables(cfg, design, scores) -> tuple:
    """``truth.parquet``, ``truth_units.parquet``, ``truth_draws.parquet``,
    ``exact_check.parquet`` and ``truth_controls.parquet``: the direct truth of every
    exposure, its checks, and each exact run's effect on every never-treated instance (the
    spillover instance by instance: a subgroup's own spillover is its mean over the
    subgroup's never-treated instances)."""
    metrics = list(cfg.metrics)
    main = scores["main"]
    cohorts = pd.Series(design.analysed_cohorts, index=design.analysed_ids)
    validation = design.validation_ids
    twin = scores["twin"]
    twin_spill = mean_effect(main, twin, validation, metrics)
    twin_effects = direct_effects(instance_effects(main, twin, cohorts, metrics), twin_spill)
    exact_effects, nyt_spill, draws, controls = {}, {}, [], []
    for g in cfg.exact_cohort_steps:
        after = main[main["time"] >= g]
        run = scores[f"exact/cohort{g}"]
        controls.append(instance_effects(  # the spillover instance by instance
            after, run, pd.Series(np.full(validation.size, g, dtype=np.int64),
                                  index=validation), metrics))
        spill = controls[-1].groupby(["metric", "time"])["effect"].mean()
        exact_effects[g] = direct_effects(
            instance_effects(after, run, cohorts[cohorts == g], metrics), spill)
        nyt_spill[g] = not_yet_treated_effect(after, run, validation, cohorts[cohorts > g],
                                              metrics)
        draws.append(_draw_truth(exact_effects[g], 0))
        for j in range(1, cfg.truth_draws + 1):
            other = scores[f"exact/cohort{g}/draw{j}"]
            effects = instance_effects(after, other, cohorts[cohorts == g], metrics)
            draws.append(_draw_truth(
                direct_effects(effects, mean_effect(after, other, validation, metrics)), j))
    exact = exact_check(cohort_truth(twin_effects), exact_effects)
    effects = _combine_direct(twin_effects, exact_effects)
    draws = pd.concat(draws, ignore_index=True) if draws else pd.DataFrame(
        columns=["draw", "cohort", "time", "metric", "tau_total", "spillover", "tau"])
    truth = _first_truth(cohort_truth(effects), effects, nyt_spill, draw_noise(draws))
    if cfg.exposures > 1:
        truth = pd.concat([truth.assign(exposure=1)]
                          + _later_truth(cfg, design, main, scores, metrics),
                          ignore_index=True)
        truth = truth[["exposure"] + [c for c in truth.columns if c != "exposure"]]
    controls = pd.concat(controls, ignore_index=True) if controls else pd.DataFrame(
        {"unit": np.zeros(0, np.int64), "cohort": np.zeros(0, np.int64),
         "time": np.zeros(0, np.int64), "metric": np.zeros(0, object),
         "effect": np.zeros(0)})
    return truth, effects, draws, exact, controls


def _draw_truth(effects: pd.DataFrame, draw: int) -> pd.DataFrame:
    """One exact run's direct truth, total effect and spillover per post-treatment cell."""
    cell = effects.groupby(["cohort", "time", "metric"], sort=True).agg(
        tau=("effect", "mean"), spillover=("spillover", "first")).reset_index()
    cell["tau_total"] = cell["tau"] + cell["spillover"]
    cell.insert(0, "draw", np.int64(draw))
    return cell[["draw", "cohort", "time", "metric", "tau_total", "spillover", "tau"]]


def _combine_direct(twin_effects: pd.DataFrame, exact_effects: dict) -> pd.DataFrame:
    """:func:`combine_effects` of direct effects, with each instance's ``spillover`` (the
    exact run's where the cohort has one, zero before its cohort; else the twin's)."""
    effects = combine_effects(twin_effects, exact_effects)
    spill = twin_effects["spillover"].to_numpy(np.float64).copy()
    if exact_effects:
        keys = ["unit", "time", "metric"]
        exact = pd.concat([e[keys + ["spillover"]] for e in exact_effects.values()],
                          ignore_index=True)
        merged = effects[keys].merge(exact, on=keys, how="left", validate="one_to_one")
        flag = effects["exact"].to_numpy()
        spill[flag] = merged["spillover"].fillna(0.0).to_numpy(np.float64)[flag]
    return effects.assign(spillover=spill)


def _first_truth(truth: pd.DataFrame, effects: pd.DataFrame, nyt_spill: dict,
                 noise: pd.DataFrame) -> pd.DataFrame:
    """The first exposure's truth: the direct effect ``tau`` beside ``tau_total``,
    ``spillover``, the not-yet-treated comparison's ``tau_nyt`` and ``spillover_nyt``
    (NaN for a cohort without an exact run) and the truth's own noise ``tau_se``."""
    keys = ["metric", "cohort", "time"]
    spill = effects.groupby(keys, sort=True)["spillover"].first()
    truth = truth.merge(spill.reset_index(), on=keys, how="left", validate="one_to_one")
    truth["tau_total"] = truth["tau"] + truth["spillover"]
    nyt = np.full(len(truth), np.nan)
    for g, series in nyt_spill.items():
        rows = np.flatnonzero(truth["cohort"].to_numpy() == g)
        key = pd.MultiIndex.from_arrays([truth["metric"].to_numpy()[rows],
                                         truth["time"].to_numpy()[rows]])
        nyt[rows] = series.reindex(key).fillna(0.0).to_numpy(np.float64)
    truth["spillover_nyt"] = nyt
    truth["tau_nyt"] = truth["tau_total"] - truth["spillover_nyt"]
    event = truth["time"] - truth["cohort"]
    se = noise.set_index(["metric", "event_time"])["tau_se"] if len(noise) else pd.Series(
        dtype=np.float64)
    tau_se = se.reindex(pd.MultiIndex.from_arrays([truth["metric"], event])).to_numpy(
        np.float64)
    tau_se = np.where(event < 0, 0.0, tau_se)  # the exact run is the main run before g
    truth["tau_se"] = np.where(truth["exact"], tau_se, np.nan)
    return truth[TRUTH_COLUMNS]


#: The columns of ``truth.parquet`` (after ``exposure`` with repeated exposure).
TRUTH_COLUMNS = ["cohort", "time", "metric", "tau", "tau_twin", "exact", "sd", "n_units",
                 "tau_total", "spillover", "tau_nyt", "spillover_nyt", "tau_se"]


def _order_table(cfg, design) -> pd.DataFrame:
    """``data_order.parquet``: every training position, its instance and the twin's."""
    pos = np.arange(cfg.n_positions)
    analysed = np.zeros(cfg.n_positions, dtype=bool)
    analysed[design.analysed_positions] = True
    order = pd.DataFrame({
        "position": pos,
        "batch": pos // cfg.batch_size,
        "step": pos // cfg.batch_size + 1,
        "cohort": design.position_cohorts.astype(np.int64),
        "instance": design.order,
        "analysed": analysed,
        "twin_instance": design.twin_order(),
    })
    if cfg.exposures > 1:
        exposure = analysed.astype(np.int64)
        exposure[design.repeat_positions] = design.repeat_exposures
        order["exposure"] = exposure
    return order


def _instances_table(design) -> pd.DataFrame:
    """``instances.parquet``: every instance's split, domain, tokens and text."""
    tok = design.corpus.tokenizer
    return pd.DataFrame({
        "instance": np.arange(len(design.tokens)),
        "split": design.split,
        "domain": design.domains,
        **instance_features(design),
        "tokens": [row.astype(np.int64) for row in design.tokens],
        "text": [tok.decode(row) for row in design.tokens],
    })


def _sample_table(cfg, design) -> pd.DataFrame:
    """``sample.parquet``: the analysed and validation units, their cohorts and replacements."""
    n_an, n_val = len(design.analysed_ids), len(design.validation_ids)
    sample = pd.DataFrame({
        "unit": np.concatenate([design.analysed_ids, design.validation_ids]),
        "role": ["analysed"] * n_an + ["validation"] * n_val,
        "cohort": np.concatenate([design.analysed_cohorts.astype(np.float64),
                                  np.full(n_val, np.nan)]),
        "position": np.concatenate([design.analysed_positions, np.full(n_val, -1)]),
        "replacement": np.concatenate([design.replacement_ids, np.full(n_val, -1)]),
    })
    for e in range(2, cfg.exposures + 1):
        sample[f"cohort_{e}"] = np.concatenate([_later_cohorts(design, e),
                                                np.full(n_val, np.nan)])
    sample["domain"] = design.domains[sample["unit"].to_numpy()]
    for name, values in instance_features(design).items():
        sample[name] = values[sample["unit"].to_numpy()]
    return sample


def _losses_table(cfg, runs) -> pd.DataFrame:
    """``losses.parquet``: every run's training loss by step."""
    return pd.concat([
        pd.DataFrame({"run": name,
                      "step": np.arange(cfg.n_steps - len(r["losses"]) + 1, cfg.n_steps + 1),
                      "loss": r["losses"]})
        for name, r in runs.items()
    ], ignore_index=True)


def _subset_tables(cfg, design, scores) -> dict:
    """``membership.parquet`` and ``subset_scores.parquet`` (none without subset models)."""
    m = cfg.n_subset_models
    if not m:
        return {}
    n_an = len(design.analysed_ids)
    return {
        "membership.parquet": pd.DataFrame({
            "model": np.repeat(np.arange(m), n_an),
            "seed": np.repeat(design.subset_seeds, n_an),
            "unit": np.tile(design.analysed_ids, m),
            "cohort": np.tile(design.analysed_cohorts, m),
            "member": design.membership.ravel(),
        }),
        "subset_scores.parquet": pd.concat([
            scores[f"subset{j}"].assign(model=j)[["model", "unit", "time"] + list(cfg.metrics)]
            for j in range(m)
        ], ignore_index=True),
    }


def _later_truth(cfg, design, main, scores, metrics) -> list:
    """The exact truth of every later exposure, one table per (exposure, cohort).

    The exact run of exposure ``e`` at cohort ``g`` is the main run up to the checkpoint
    before ``g`` without only the ``e``-th exposures in ``g``'s macro-batch: its effect is
    exactly zero before ``g`` and the exact total effect from ``g`` on (``tau_total``). The
    run also moves the scores of instances it did not change (a retraining on another
    order drifts as a whole): ``spillover`` is that mean effect on the history-matched
    controls (the instances with the same earlier exposures and no ``e``-th one; each
    history weighted by its treated instances, as the estimator pools them), and
    ``tau = tau_total - spillover`` the direct effect, the estimand of a comparison with
    those controls.
    """
    parts = []
    times = np.asarray(cfg.checkpoints, dtype=np.int64)
    analysed = design.analysed_ids
    for e, g in _exposure_runs(design):
        treated, controls, control_hist, treated_hist = design.exposure_groups(e, g)
        ids = analysed[treated]
        run = scores[f"exact{e}/cohort{g}"]
        cohorts = pd.Series(np.full(ids.size, g, dtype=np.int64), index=ids)
        effects = instance_effects(main[main["time"] >= g], run, cohorts, metrics)
        before = pd.DataFrame([(u, g, t, m, 0.0) for m in metrics for u in ids
                               for t in times[times < g]],
                              columns=["unit", "cohort", "time", "metric", "effect"])
        table = cohort_truth(pd.concat([before, effects], ignore_index=True))
        spill = _spillover(main[main["time"] >= g], run, analysed[controls], control_hist,
                           treated_hist, metrics)
        key = pd.MultiIndex.from_arrays([table["metric"], table["time"]])
        table["spillover"] = spill.reindex(key).fillna(0.0).to_numpy()
        table["tau_total"] = table["tau"]
        table["tau"] = table["tau_total"] - table["spillover"]
        table = table.assign(tau_twin=np.nan, exact=True, exposure=e, tau_nyt=np.nan,
                             spillover_nyt=np.nan, tau_se=np.nan)
        parts.append(table[["exposure"] + TRUTH_COLUMNS])
    return parts


def _spillover(main, run, control_ids, control_hist, treated_hist, metrics) -> pd.Series:
    """Mean effect of an exact run on the controls, by (metric, time): per history, then
    weighted by the treated instances' histories."""
    effects = instance_effects(main, run, pd.Series(control_hist, index=control_ids),
                               metrics)  # the "cohort" column holds the history code
    by_history = effects.groupby(["metric", "time", "cohort"])["effect"].mean()
    hist, count = np.unique(treated_hist, return_counts=True)
    weights = pd.Series(count / count.sum(), index=hist)
    share = pd.Series(weights.reindex(by_history.index.get_level_values("cohort")).to_numpy(),
                      index=by_history.index)  # renormalised over histories with controls
    weighted = (by_history * share).groupby(level=["metric", "time"]).sum()
    return weighted / share.groupby(level=["metric", "time"]).sum()


def _manifest(cfg, design, settings, versions) -> dict:
    import pyarrow
    import transformers

    return {
        "format": "didmem-lab",
        "settings": settings,
        "derived": {
            "checkpoints": list(cfg.checkpoints),
            "cohorts": list(cfg.cohorts),
            "exact_cohorts": list(cfg.exact_cohort_steps),
            "n_positions": cfg.n_positions,
            "n_train_instances": int((design.split == "train").sum()),
            "n_analysed_total": len(design.analysed_ids),
            "vocab_size": len(design.corpus.tokenizer),
            "corpus": design.corpus.describe(),
            "init_seed": design.init_seed,
            "subset_seeds": [int(s) for s in design.subset_seeds],
            "random_streams": list(STREAMS),
            "scoring_backend": dict(backend_settings(cfg), backend="TransformersBackend",
                                    **({"reference": ("" if cfg.runs == 1 else
                                                      run_directory(0) + "/")
                                        + f"twin/checkpoints/step{cfg.n_steps}"}
                                       if REFERENCE_METRIC in cfg.metrics else {})),
            "batch_trained_at_step": "batch b (positions b*B..b*B+B-1) is trained at step b+1",
            **_runs_manifest(cfg, design),
        },
        "versions": {
            "didmem": __version__,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "pandas": pd.__version__,
            "pyarrow": pyarrow.__version__,
            "transformers": transformers.__version__,
            **versions,
        },
    }


def _runs_manifest(cfg, design) -> dict:
    """With several runs: each run's directory and initialisation seed (nothing for one)."""
    if cfg.runs == 1:
        return {}
    return {"runs": [{"run": r, "directory": run_directory(r),
                      "init_seed": run_design(design, r).init_seed} for r in range(cfg.runs)]}
