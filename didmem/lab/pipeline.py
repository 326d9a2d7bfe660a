"""One lab run end to end: design, training, counterfactual runs, scoring, truth, files.

See :func:`run` for the entry point and ``docs/lab.rst`` for the layout of the output
directory.
"""

from __future__ import annotations

import hashlib
import platform
import time as _time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._progress import progress as progress_line
from .._version import __version__
from ..errors import ParameterError
from .config import LabConfig, demo_config, quick_config
from .design import STREAMS, build_design
from .outputs import FORMAT_VERSION, LabDirectory
from .scoring import backend_settings, score_run
from .study_files import study_tables, study_toml
from .truth import cohort_truth, combine_effects, exact_check, instance_effects

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
        ``panel.parquet``: ``unit``, ``time``, ``cohort`` (NaN for validation), ``domain``
        and the metrics.
    truth : pandas.DataFrame
        ``truth.parquet``: ``cohort``, ``time``, ``metric``, ``tau`` (exact where the cohort
        has an exact run, by default every cohort), ``tau_twin``, ``exact``, ``sd``,
        ``n_units``. With ``exposures > 1`` an ``exposure`` column comes first: exposure 1's
        rows are the effect of every exposure of the cohort's instances (what the first
        exposure's estimator identifies: its exact runs and the twin replace the instances
        at all their positions), exposure ``k``'s the exact effect of the ``k``-th
        exposure at its cohort (``tau_twin`` NaN).
    exact : pandas.DataFrame
        ``exact_check.parquet``: twin truth against the exact per-cohort truth (may be empty).
    timings : dict
        Seconds spent per stage (not written to disk, so that files stay reproducible).
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
        """Directory of the main run's ``step{N}`` checkpoints."""
        return self.out_dir / "checkpoints"

    def instantaneous(self, metric: str = "mean_token_loglik") -> pd.DataFrame:
        """The true instantaneous effect τ(g, g) per cohort, with its instance-level z-score.

        ``z = tau / (sd / sqrt(n_units))`` says how clearly the cohort's mean effect stands
        out from the spread of its instances' effects.
        """
        truth = self.truth
        if "exposure" in truth:  # repeated exposure: the first exposure's truth
            truth = truth[truth["exposure"] == 1]
        t = truth[(truth["metric"] == metric) & (truth["time"] == truth["cohort"])]
        out = t[["cohort", "tau", "sd", "n_units"]].reset_index(drop=True)
        out["z"] = out["tau"] / (out["sd"] / np.sqrt(out["n_units"]))
        return out

    def summary(self, metric: str = "mean_token_loglik") -> str:
        """A short text report: instantaneous truth per cohort and the exact check."""
        lines = [f"didmem lab run in {self.out_dir}", f"metric: {metric}",
                 "cohort   tau(g,g)        z"]
        for row in self.instantaneous(metric).itertuples():
            lines.append(f"{row.cohort:>6} {row.tau:>10.4f} {row.z:>8.1f}")
        ex = self.exact[self.exact["metric"] == metric] if len(self.exact) else self.exact
        if len(ex):
            lines.append("exact check: max |twin - exact| per cohort")
            for g, part in ex.groupby("cohort"):
                lines.append(f"{g:>6} {part['difference'].abs().max():>10.4f}")
        if self.timings:
            lines.append("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.timings.items()))
        return "\n".join(lines)


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


def run(out_dir, quick: bool = False, seed: int = 0, overwrite: bool = False,
        config: LabConfig | None = None, progress: bool | None = None,
        **changes) -> LabResult:
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
    cfg = _config_for(quick, seed, config, changes)
    directory = LabDirectory(out_dir)
    settings = _settings(cfg)
    if not overwrite and directory.is_complete_run_of(settings):
        return load(out_dir)
    timings = {}
    clock = _time.perf_counter()
    design = build_design(cfg)  # before touching the directory: bad input fails here
    stages = _stages(cfg, design)
    bar = progress_line(len(stages), f"lab (seed {cfg.seed})", progress, unit="stages")
    bar.say(stages[0][1])

    def lap(name):
        nonlocal clock
        now = _time.perf_counter()
        timings[name] = now - clock
        clock = now
        bar.step()
        if len(timings) < len(stages):
            bar.say(stages[len(timings)][1])

    with bar:
        directory.prepare(settings, overwrite)
        lap("design")
        from .trainer import torch_session

        with torch_session(cfg.threads) as torch:
            runs = _train_all(cfg, design, directory.path, lap)
            scores = _score_all(cfg, design, runs)
            lap("scoring")
            versions = {"torch": torch.__version__}
        tables = _tables(cfg, design, runs, scores)
        tables.update(study_tables(design, tables["data_order.parquet"]))
        for name, frame in tables.items():
            directory.write_parquet(name, frame)
        (directory.path / "study.toml").write_text(study_toml(
            runs["main"]["checkpoints"], cfg.metrics, backend_settings(cfg), cfg.seed))
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


def _stages(cfg, design) -> list:
    """``(lap name, what it does)`` of the run's stages in order (the progress line's steps)."""
    stages = [("design", "building the design"), ("train", "training the main run"),
              ("twin", "training the twin")]
    if cfg.exact_cohort_steps or _exposure_runs(design):
        stages.append(("exact", "training the exact runs"))
    if cfg.n_subset_models:
        stages.append(("subsets", f"training {cfg.n_subset_models} subset models"))
    return stages + [("scoring", "scoring every checkpoint"),
                     ("writing", "writing the tables")]


def _train_all(cfg, design, root: Path, lap) -> dict:
    """Train the main run, the twin, the exact runs and the subset models."""
    from .trainer import init_model, train

    vocab = len(design.corpus.tokenizer)
    tokens = design.tokens
    k = cfg.checkpoint_every
    design.corpus.tokenizer.save(root / "checkpoints" / "tokenizer.json")
    runs = {}
    later = _exposure_runs(design)
    runs["main"] = train(cfg, tokens[design.order], init_model(cfg, vocab, design.init_seed),
                         root / "checkpoints", cfg.checkpoints,
                         snapshot_steps=[g - k for g in cfg.exact_cohort_steps]
                         + [g - k for _, g in later])
    lap("train")
    runs["twin"] = train(cfg, tokens[design.twin_order()],
                         init_model(cfg, vocab, design.init_seed),
                         root / "twin" / "checkpoints", cfg.checkpoints)
    lap("twin")
    for g in cfg.exact_cohort_steps:
        runs[f"exact/cohort{g}"] = train(
            cfg, tokens[design.exact_order(g)], runs["main"]["snapshots"][g - k],
            root / "exact" / f"cohort{g}", [c for c in cfg.checkpoints if c >= g])
    for e, g in later:
        runs[f"exact{e}/cohort{g}"] = train(
            cfg, tokens[design.exposure_order(e, g)], runs["main"]["snapshots"][g - k],
            root / f"exact{e}" / f"cohort{g}", [c for c in cfg.checkpoints if c >= g])
    runs["main"]["snapshots"].clear()
    if cfg.exact_cohort_steps or later:
        lap("exact")
    for j in range(cfg.n_subset_models):
        runs[f"subset{j}"] = train(
            cfg, tokens[design.subset_order(j)],
            init_model(cfg, vocab, int(design.subset_seeds[j])),
            root / "subsets" / f"model{j}", cfg.checkpoints)
    if cfg.n_subset_models:
        lap("subsets")
    return runs


def _exposure_runs(design) -> list:
    """``(exposure, cohort)`` of every exact run of a later exposure (one per cohort)."""
    pairs = set(zip(design.repeat_exposures.tolist(), design.repeat_cohorts.tolist()))
    return sorted(pairs)


def _score_all(cfg, design, runs) -> dict:
    """Score every run's checkpoints on the units it needs, with the transformers backend."""
    tokens = design.tokens
    analysed = design.analysed_ids
    units = np.concatenate([analysed, design.validation_ids])
    scores = {
        "main": score_run(runs["main"]["checkpoints"], tokens[units], units, cfg),
        "twin": score_run(runs["twin"]["checkpoints"], tokens[analysed], analysed, cfg),
    }
    for g in cfg.exact_cohort_steps:
        ids = analysed[design.analysed_cohorts == g]
        scores[f"exact/cohort{g}"] = score_run(runs[f"exact/cohort{g}"]["checkpoints"],
                                               tokens[ids], ids, cfg)
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
    metrics = list(cfg.metrics)
    tok = design.corpus.tokenizer
    cohorts = pd.Series(design.analysed_cohorts, index=design.analysed_ids)
    n_an = len(design.analysed_ids)

    main = scores["main"]
    panel = main[["unit", "time"]].copy()
    panel["cohort"] = main["unit"].map(cohorts.astype(np.float64)).to_numpy(np.float64)
    exposure_cohorts = design.exposure_cohorts()
    for e in range(2, cfg.exposures + 1):
        later = pd.Series(np.where(np.isinf(exposure_cohorts[:, e - 1]), np.nan,
                                   exposure_cohorts[:, e - 1]), index=design.analysed_ids)
        panel[f"cohort_{e}"] = main["unit"].map(later).to_numpy(np.float64)
    panel["domain"] = design.domains[main["unit"].to_numpy()]
    for m in metrics:
        panel[m] = main[m].to_numpy(np.float64)

    twin_effects = instance_effects(main, scores["twin"], cohorts, metrics)
    exact_effects = {}
    for g in cfg.exact_cohort_steps:
        sel = cohorts[cohorts == g]
        exact_effects[g] = instance_effects(main[main["time"] >= g], scores[f"exact/cohort{g}"],
                                            sel, metrics)
    exact = exact_check(cohort_truth(twin_effects), exact_effects)
    effects = combine_effects(twin_effects, exact_effects)
    truth = cohort_truth(effects)
    if cfg.exposures > 1:
        truth = pd.concat([truth.assign(exposure=1)]
                          + _later_truth(cfg, design, main, scores, metrics),
                          ignore_index=True)
        truth = truth[["exposure"] + [c for c in truth.columns if c != "exposure"]]

    pos = np.arange(cfg.n_positions)
    twin_order = design.twin_order()
    analysed_flag = np.zeros(cfg.n_positions, dtype=bool)
    analysed_flag[design.analysed_positions] = True
    order = pd.DataFrame({
        "position": pos,
        "batch": pos // cfg.batch_size,
        "step": pos // cfg.batch_size + 1,
        "cohort": design.position_cohorts.astype(np.int64),
        "instance": design.order,
        "analysed": analysed_flag,
        "twin_instance": twin_order,
    })
    if cfg.exposures > 1:
        exposure = analysed_flag.astype(np.int64)
        exposure[design.repeat_positions] = design.repeat_exposures
        order["exposure"] = exposure
    instances = pd.DataFrame({
        "instance": np.arange(len(design.tokens)),
        "split": design.split,
        "domain": design.domains,
        "tokens": [row.astype(np.int64) for row in design.tokens],
        "text": [tok.decode(row) for row in design.tokens],
    })
    n_val = len(design.validation_ids)
    sample = pd.DataFrame({
        "unit": np.concatenate([design.analysed_ids, design.validation_ids]),
        "role": ["analysed"] * n_an + ["validation"] * n_val,
        "cohort": np.concatenate([design.analysed_cohorts.astype(np.float64),
                                  np.full(n_val, np.nan)]),
        "position": np.concatenate([design.analysed_positions, np.full(n_val, -1)]),
        "replacement": np.concatenate([design.replacement_ids, np.full(n_val, -1)]),
    })
    for e in range(2, cfg.exposures + 1):
        sample[f"cohort_{e}"] = np.concatenate([
            np.where(np.isinf(exposure_cohorts[:, e - 1]), np.nan, exposure_cohorts[:, e - 1]),
            np.full(n_val, np.nan)])
    sample["domain"] = design.domains[sample["unit"].to_numpy()]
    losses = pd.concat([
        pd.DataFrame({"run": name,
                      "step": np.arange(cfg.n_steps - len(r["losses"]) + 1, cfg.n_steps + 1),
                      "loss": r["losses"]})
        for name, r in runs.items()
    ], ignore_index=True)
    tables = {
        "data_order.parquet": order,
        "instances.parquet": instances,
        "sample.parquet": sample,
        "panel.parquet": panel,
        "truth.parquet": truth,
        "truth_units.parquet": effects,
        "twin_scores.parquet": scores["twin"][["unit", "time"] + metrics],
        "exact_check.parquet": exact,
        "losses.parquet": losses,
    }
    if cfg.n_subset_models:
        m = cfg.n_subset_models
        tables["membership.parquet"] = pd.DataFrame({
            "model": np.repeat(np.arange(m), n_an),
            "seed": np.repeat(design.subset_seeds, n_an),
            "unit": np.tile(design.analysed_ids, m),
            "cohort": np.tile(design.analysed_cohorts, m),
            "member": design.membership.ravel(),
        })
        tables["subset_scores.parquet"] = pd.concat([
            scores[f"subset{j}"].assign(model=j)[["model", "unit", "time"] + metrics]
            for j in range(m)
        ], ignore_index=True)
    return tables


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
        table = table.assign(tau_twin=np.nan, exact=True, exposure=e)
        parts.append(table[["exposure", "cohort", "time", "metric", "tau", "tau_twin",
                            "exact", "sd", "n_units", "tau_total", "spillover"]])
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
            "scoring_backend": dict(backend_settings(cfg), backend="TransformersBackend"),
            "batch_trained_at_step": "batch b (positions b*B..b*B+B-1) is trained at step b+1",
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
