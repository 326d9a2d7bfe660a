"""``didmem run``: score, estimate and report from one study configuration, resumably.

The configuration is the one of ``didmem score`` (see :mod:`didmem.runners.config`) with a
``[design]`` table (see :mod:`didmem.runners.design`), and optionally::

    [estimate]
    outcomes = ["mean_token_loglik"]   # default: every scored metric
    estimator = "did"                  # or "difference"
    control_group = "never_treated"    # or "not_yet_treated"
    est_method = "dr"                  # did only: "dr", "reg" or "ipw"
    covariates = ["length"]            # columns of panel.parquet (default: none)
    n_bootstrap = 1000
    random_state = 0
    alpha = 0.05
    lower_is_better = []               # outcomes where lower is better (surprisal, rank)

    [report]
    title = "Memorisation profile of my model"

The three steps write, under ``OUT``:

1. score: ``scores.parquet`` and ``panel.parquet`` (plus the runner's parts);
2. estimate: ``results-<outcome>.parquet`` per outcome;
3. report: ``report.html``.

A step is done, and skipped on a re-run, when its files exist and are newer than its inputs
and the configuration file: editing the configuration redoes everything, and deleting
``results-*.parquet`` redoes the estimate and the report but not the scoring. Within the
scoring step the runner's parts make an interrupted run resume where it stopped.
``--redo`` redoes every step (the scoring still reuses finished parts).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ParameterError
from ..runners.config import RUNNER_KINDS, load_config
from . import score
from ._options import use_agg_backend

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "score, estimate and report from one study configuration (resumable)"
DESCRIPTION = (
    "Read a study configuration (the 'didmem score' file with a [design] table, and optional "
    "[estimate] and [report] tables), then score the checkpoints into OUT/panel.parquet, "
    "estimate the memorisation profile of each outcome into OUT/results-OUTCOME.parquet and "
    "write OUT/report.html. A step whose files are newer than its inputs and the "
    "configuration is skipped. See docs/pythia.rst."
)

_ESTIMATE = {"outcomes", "estimator", "control_group", "est_method", "covariates",
             "n_bootstrap", "random_state", "alpha", "lower_is_better"}
_REPORT = {"title"}


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``didmem run`` options to ``parser`` and return it."""
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="the study configuration, .toml or .json, with a [design] table")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output directory (default: the config's 'out', else "
                             "'didmem-study')")
    parser.add_argument("--runner", choices=list(RUNNER_KINDS), default=None,
                        help="where the scoring runs (default: the config's, else local)")
    parser.add_argument("--address", default=None,
                        help="address of an existing Ray cluster (ray runner)")
    parser.add_argument("--redo", action="store_true",
                        help="redo every step (scoring still reuses its finished parts)")
    return parser


def _done(outputs, inputs) -> bool:
    """Every output exists and is at least as new as every input."""
    outputs, inputs = list(outputs), list(inputs)
    if not outputs or not all(p.is_file() for p in outputs):
        return False
    oldest = min(p.stat().st_mtime_ns for p in outputs)
    return all(oldest >= p.stat().st_mtime_ns for p in inputs if p.is_file())


def _check_list(table, key, where):
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParameterError(f"{where} {key} must be a list of strings; got {value!r}.")
    return value


def _estimate_settings(config) -> dict:
    table = dict(config.estimate or {})
    where = f"config {config.path}: [estimate]"
    unknown = sorted(set(table) - _ESTIMATE)
    if unknown:
        raise ParameterError(
            f"{where} unknown key {unknown[0]!r}; allowed: {', '.join(sorted(_ESTIMATE))}."
        )
    settings = {"where": where}
    for key in ("outcomes", "covariates", "lower_is_better"):
        if key in table or key != "outcomes":
            settings[key] = _check_list(table, key, where)
    estimator = table.pop("estimator", "did")
    if estimator not in ("did", "difference"):
        raise ParameterError(f"{where} estimator must be 'did' or 'difference'; got {estimator!r}.")
    if estimator == "difference" and ("est_method" in table or settings["covariates"]):
        raise ParameterError(f"{where} est_method and covariates go with estimator = 'did'.")
    settings["estimator"] = estimator
    settings["options"] = {k: table[k] for k in
                           ("control_group", "est_method", "n_bootstrap", "random_state", "alpha")
                           if k in table}
    settings["options"].setdefault("random_state", 0)
    return settings


def _fit(panel_frame, outcome, settings):
    import didmem

    where = settings["where"]
    lower = outcome in settings["lower_is_better"]
    cls = didmem.DiDEstimator if settings["estimator"] == "did" else didmem.DifferenceEstimator
    try:
        panel = didmem.Panel(panel_frame, unit="unit", time="time", cohort="cohort",
                             outcome=outcome, covariates=settings["covariates"] or None)
        return cls(**settings["options"], lower_is_better=lower).fit(panel)
    except TypeError as exc:
        raise ParameterError(f"{where} {exc}") from None
    except didmem.DidmemError as exc:
        raise type(exc)(f"{where} outcome {outcome!r}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Run ``didmem run`` with parsed arguments; return the exit status."""
    import pandas as pd

    config = load_config(args.config, runner=args.runner, address=args.address)
    where = f"config {config.path}"
    if config.design is None:
        raise ParameterError(
            f"{where}: 'didmem run' needs a [design] table (kind = 'pythia' or 'order') that "
            "gives the cohorts."
        )
    settings = _estimate_settings(config)
    report = dict(config.report or {})
    unknown = sorted(set(report) - _REPORT)
    if unknown:
        raise ParameterError(f"{where}: [report] unknown key {unknown[0]!r}; allowed: title.")
    title = report.get("title", f"didmem: memorisation profile of {config.model or 'the model'}")
    if not isinstance(title, str):
        raise ParameterError(f"{where}: [report] title must be a string; got {title!r}.")
    out = Path(args.out) if args.out is not None else (config.out or Path("didmem-study"))
    source = Path(args.config)

    panel_path, scores_path = out / "panel.parquet", out / "scores.parquet"
    if not args.redo and _done([panel_path, scores_path], [source]):
        print(f"1/3 score: done already ({panel_path}); skipped")
    else:
        print("1/3 score")
        score_args = argparse.Namespace(config=args.config, runner=args.runner,
                                        address=args.address, out=str(out), plan=False)
        score.run(score_args)

    frame = pd.read_parquet(panel_path)
    scored = [c for c in pd.read_parquet(scores_path).columns if c not in ("unit", "time")]
    outcomes = settings.get("outcomes") or scored
    absent = [o for o in outcomes + settings["covariates"] + settings["lower_is_better"]
              if o not in frame.columns]
    if absent:
        raise ParameterError(
            f"{settings['where']} {absent[0]!r} is not a column of {panel_path}; it has "
            f"{list(frame.columns)}."
        )
    results = {o: out / f"results-{o}.parquet" for o in outcomes}
    for i, (outcome, path) in enumerate(results.items(), 1):
        label = f"2/3 estimate {outcome} ({i} of {len(results)})"
        if not args.redo and _done([path], [panel_path, source]):
            print(f"{label}: done already ({path}); skipped")
            continue
        print(label)
        result = _fit(frame, outcome, settings)
        print(result.summary())
        print(f"wrote {result.save(path)}")

    report_path = out / "report.html"
    if not args.redo and _done([report_path], [*results.values(), source]):
        print(f"3/3 report: done already ({report_path}); skipped")
    else:
        from ..report import write_report
        from ..results.saving import load_result

        use_agg_backend()
        named = {o: load_result(p) for o, p in results.items()}
        print(f"3/3 report: wrote {write_report(named, report_path, title=title)}")
    return 0
