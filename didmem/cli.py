"""The ``didmem`` command line.

``didmem demo`` runs the main job on the embedded default and prints where its outputs are.
User errors (a missing file, an unknown column, an invalid option) exit with status 2 and a
one-line reason, without a stack trace.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from ._cli_options import bootstrap_option, panel_column_options, seed_option
from ._validation import add_option
from .estimators import DiDEstimator, DifferenceEstimator
from .panel import Panel
from .report import render_report
from .errors import DidmemError, PanelError, ParameterError

__all__ = ["main"]

_ESTIMATORS = {"did": DiDEstimator, "difference": DifferenceEstimator}


def _demo(args) -> int:
    import didmem
    from didmem.lab import run

    t0 = time.perf_counter()
    out = Path(args.out)
    metric = "mean_token_loglik"
    print(f"didmem demo: training a tiny language model and its counterfactual runs in {out / 'lab'}"
          + (" (quick scale)" if args.quick else "") + " ...", flush=True)
    lab = run(out / "lab", quick=args.quick, seed=args.seed, overwrite=args.overwrite)
    panel = didmem.Panel(lab.panel, unit="unit", time="time", cohort="cohort", outcome=metric)
    res = didmem.DiDEstimator(n_bootstrap=args.n_bootstrap, random_state=args.seed).fit(panel)
    truth = lab.truth[lab.truth["metric"] == metric][["cohort", "time", "tau"]]
    frame = res.to_frame().merge(truth, on=["cohort", "time"], how="left")
    cells_path = out / "cells.csv"
    frame.to_csv(cells_path, index=False)
    inst = res.aggregate("instantaneous").to_frame()
    true_inst = truth[truth["cohort"] == truth["time"]].set_index("cohort")["tau"]
    inst["true_tau"] = true_inst.reindex(inst["cohort"]).to_numpy()
    inst_path = out / "instantaneous.csv"
    inst.to_csv(inst_path, index=False)
    post = frame[frame["post"]]
    rmse = float(np.sqrt(np.mean((post["estimate"] - post["tau"]) ** 2)))
    covered = (post["ci_lower"] <= post["tau"]) & (post["tau"] <= post["ci_upper"])
    print(f"\n{panel!r}")
    print(res.summary())
    print(f"\nsignificant post-treatment cells: {int(post['significant'].sum())} of {len(post)}")
    print(f"instantaneous memorisation of {metric} by cohort (treatment step), with the truth "
          "from the exact counterfactual runs:")
    print(inst.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"truth vs estimate: RMSE {rmse:.4f} over {len(post)} post-treatment cells; the band "
          f"covers the exact truth in {int(covered.sum())} of them")
    written = [cells_path, inst_path, res.save(out / "results.parquet")]
    written += _demo_figures(res, lab.config, out)
    print("\nwrote:\n" + "\n".join(f"  {p}" for p in written))
    print(f"open {written[-1]} in a browser to see the report ({time.perf_counter() - t0:.1f} s)")
    return 0


def _agg_backend():
    from .errors import optional_import

    optional_import("matplotlib", "plot").use("Agg")


def _demo_figures(res, config, out: Path) -> list:
    """The profile, instantaneous (beside the learning rate) and persistent PNGs + report."""
    import pandas as pd

    from . import plotting
    from .lab.trainer import learning_rate
    from .report import write_report

    _agg_backend()
    import matplotlib.pyplot as plt

    steps = np.arange(1, config.n_steps + 1)
    schedule = pd.Series([learning_rate(int(s), config) for s in steps], index=steps)
    paths = []
    for name, options in (("profile", {}), ("instantaneous", {"lr_schedule": schedule}),
                          ("persistent", {})):
        ax = plotting.PLOTS[name](res, **options)
        path = out / f"{name}.png"
        ax.figure.savefig(path, dpi=110)
        plt.close(ax.figure)
        paths.append(path)
    paths.append(write_report({"lab model (demo)": res}, out / "report.html",
                              title="didmem demo: memorisation profile of the lab model",
                              figure_options={"instantaneous": {"lr_schedule": schedule}}))
    return paths


def _read_panel_frame(path: Path):
    import pandas as pd

    if not path.exists():
        raise FileNotFoundError(f"No panel file at {str(path)!r}.")
    if path.suffix not in (".csv", ".parquet"):
        raise ParameterError(f"A panel file must end in '.csv' or '.parquet'; got {str(path)!r}.")
    if path.suffix == ".parquet":
        from .errors import optional_import

        optional_import("pyarrow", "plot")
    try:
        return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        # pyarrow's ArrowInvalid is a ValueError; a truncated file gives an OSError
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise PanelError(f"Could not read the panel file {str(path)!r} as "
                         f"{path.suffix[1:]}: {reason}") from None


def _estimate(args) -> int:
    import didmem

    out = Path(args.out)
    if out.suffix != ".parquet":
        raise ParameterError(f"--out must name a '.parquet' file; got {args.out!r}.")
    if args.base_period is not None and args.estimator != "did":
        raise ParameterError(f"--base-period applies to --estimator did only; got --estimator "
                             f"{args.estimator}.")
    frame = _read_panel_frame(Path(args.panel))
    panel = didmem.Panel(frame, unit=args.unit, time=args.time, cohort=args.cohort,
                         outcome=args.outcome, never_treated=args.never_treated,
                         balance=args.balance)
    cls = _ESTIMATORS[args.estimator]
    options = {} if args.base_period is None else {"base_period": args.base_period}
    res = cls(control_group=args.control_group, n_bootstrap=args.n_bootstrap, random_state=args.seed,
              lower_is_better=args.lower_is_better, outcome=args.outcome,
              small_sample=not args.r_inference, **options).fit(panel)
    print(res.summary())
    print(f"\nwrote {res.save(out)}")
    return 0


def _load_all(paths):
    from .results.saving import load_result

    return [load_result(p) for p in paths]


def _plot(args) -> int:
    from . import plotting
    from .results.profiles import profile_correlation

    if args.kind == "correlation":
        if len(args.results) < 2:
            raise ParameterError("--kind correlation needs two or more results files.")
    elif len(args.results) != 1:
        raise ParameterError(f"--kind {args.kind} draws one results file; got "
                             f"{len(args.results)}.")
    if args.dpi <= 0:
        raise ParameterError(f"--dpi must be a positive number of dots per inch; got {args.dpi}.")
    results = _load_all(args.results)
    out = Path(args.out) if args.out else Path(args.results[0]).with_name(
        Path(args.results[0]).stem + f"_{args.kind}.png")
    _agg_backend()
    if args.kind == "correlation":
        named = {Path(p).stem: r for p, r in zip(args.results, results)}
        if len(named) < len(results):
            named = dict(zip(args.results, results))
        ax = plotting.plot_profile_correlation(profile_correlation(named))
    else:
        ax = plotting.PLOTS[args.kind](results[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    ax.figure.savefig(out, dpi=args.dpi)
    print(f"wrote {out}")
    return 0


def _report(args) -> int:
    from .report import write_report

    sensitivity = None
    if (args.sensitivity is None) != (args.sensitivity_m is None):
        raise ParameterError("--sensitivity and --sensitivity-m go together: the restriction "
                             "and its values of M or Mbar.")
    if args.sensitivity is not None:
        from .cli_sensitivity import parse_floats

        sensitivity = {"restriction": args.sensitivity,
                       "m": parse_floats(args.sensitivity_m, "--sensitivity-m"),
                       "event_time": args.sensitivity_event_time}
    results = _load_all(args.results)
    _agg_backend()
    named = {p: r for p, r in zip(args.results, results)}
    path = write_report(named, args.out, title=args.title, sensitivity=sensitivity)
    print(f"wrote {path}")
    return 0


def _subcommand_modules():
    """The subcommands that live in their own module: (name, module, handler name).

    Each module has ``HELP``, ``DESCRIPTION`` and ``add_arguments(parser)``; they are
    imported when the parser is built, so ``import didmem.cli`` stays light.
    """
    from . import cli_plan, cli_sensitivity, pipeline
    from .lab import cli_args
    from .runners import config as score_config

    return (("lab", cli_args, "main_from_args"), ("score", score_config, "main_from_args"),
            ("plan", cli_plan, "main_from_args"), ("sensitivity", cli_sensitivity, "main_from_args"),
            ("run", pipeline, "run"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="didmem",
        description="Causal memorisation profiles of language models by difference-in-differences.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="the main job on the embedded default: lab model, exact truth, DiD profile",
        description="Train a tiny language model on a generated corpus together with its "
                    "counterfactual runs (the memorisation lab), score every checkpoint, "
                    "estimate the memorisation profile with a simultaneous bootstrap band, "
                    "print the summary and the truth-vs-estimate error, and write the tables "
                    "to --out with the figures (profile.png, instantaneous.png, "
                    "persistent.png), results.parquet and report.html. Needs the 'lm' and "
                    "'plot' extras.",
    )
    demo.add_argument("--out", default="didmem-demo", help="output directory (default: %(default)s)")
    seed_option(demo)
    bootstrap_option(demo)
    demo.add_argument("--quick", action="store_true", help="the lab's quick scale (seconds)")
    demo.add_argument("--overwrite", action="store_true",
                      help="replace a different lab run found in --out")
    demo.set_defaults(func=_demo)

    est = sub.add_parser(
        "estimate",
        help="estimate the profile of a panel file and write a results parquet",
        description="Read a long panel (one row per unit and checkpoint; .parquet or .csv), "
                    "estimate tau(g, c) with a bootstrap band, print the summary and write "
                    "the results file (read it with didmem.load_result, 'didmem plot' or "
                    "'didmem report').",
    )
    est.add_argument("panel", help="the panel file (.parquet or .csv)")
    est.add_argument("--outcome", required=True, help="the outcome column")
    est.add_argument("--out", required=True, help="the results file to write (.parquet)")
    est.add_argument("--estimator", choices=list(_ESTIMATORS), default="did",
                     help="difference-in-differences or the plain difference (default: %(default)s)")
    add_option(est, DiDEstimator, "control_group", "--control", help="control group")
    est.add_argument("--base-period", choices=["varying", "universal"],
                     help="did only: the pre-treatment cells' base period (default: varying); "
                          "'didmem sensitivity' needs universal")
    panel_column_options(est)
    est.add_argument("--never-treated", type=float, default=None, metavar="CODE",
                     help="a cohort value that marks never-treated units, such as R did's 0 "
                          "(NaN and inf always do)")
    add_option(est, Panel, "balance",
               help="what to do with units not observed at every time: stop with an "
                    "error, or drop them with a warning")
    est.add_argument("--lower-is-better", action="store_true",
                     help="the outcome is lower-is-better (surprisal, rank): flip its sign")
    bootstrap_option(est)
    est.add_argument("--r-inference", action="store_true",
                     help="R did's standard errors and band (small_sample=False) instead of "
                          "the small-sample corrected ones")
    seed_option(est)
    est.set_defaults(func=_estimate)

    plot = sub.add_parser(
        "plot", help="draw one figure of a results file as PNG",
        description="Draw a figure of a results file written by 'didmem estimate' or "
                    "'didmem demo': the profile heatmap (significant cells), instantaneous, "
                    "persistent or residual memorisation, parallel-trends diagnostics, or the "
                    "correlation of the profiles of two or more results files.",
    )
    plot.add_argument("results", nargs="+", help="results file(s) (.parquet)")
    plot.add_argument("--kind", required=True,
                      choices=["profile", "instantaneous", "persistent", "residual",
                               "pretrends", "correlation"], help="the figure")
    plot.add_argument("--out", help="PNG to write (default: RESULTS_KIND.png beside the first)")
    plot.add_argument("--dpi", type=int, default=110, help="resolution (default: %(default)s)")
    plot.set_defaults(func=_plot)

    rep = sub.add_parser(
        "report", help="write a self-contained HTML report of results files",
        description="Write one HTML file (figures embedded, no network needed) with the "
                    "settings, pre-test, summary tables and figures of each results file, and "
                    "the correlation of their profiles when there are several.",
    )
    rep.add_argument("results", nargs="+", help="results file(s) (.parquet)")
    rep.add_argument("--out", default="report.html", help="HTML file (default: %(default)s)")
    add_option(rep, render_report, "title", help="report title")
    rep.add_argument("--sensitivity", choices=["relative_magnitudes", "smoothness"],
                     help="add the sensitivity to violations of parallel trends under this "
                          "restriction (results estimated with --base-period universal)")
    rep.add_argument("--sensitivity-m", help="its values of Mbar or M, comma-separated")
    rep.add_argument("--sensitivity-event-time", type=float, default=0.0,
                     help="its target event time (default: %(default)s)")
    rep.set_defaults(func=_report)

    for name, module, handler in _subcommand_modules():
        command = sub.add_parser(name, help=module.HELP, description=module.DESCRIPTION)
        module.add_arguments(command)
        command.set_defaults(func=getattr(module, handler))
    return parser


#: How the library's advice reads on the command line of ``didmem estimate``.
_ESTIMATE_FLAGS = (
    ("Pass balance='drop_incomplete_units' to drop those units.",
     "Pass --balance drop_incomplete_units to drop those units."),
    ("pass never_treated=0 to Panel (CLI: --never-treated 0)", "pass --never-treated 0"),
    ("Use control_group='not_yet_treated'", "Use --control not_yet_treated"),
    ("use control_group='not_yet_treated'", "use --control not_yet_treated"),
    ("name the one to use with outcome=...", "name the one to use with --outcome"),
)


def _cli_message(command: str, exc: BaseException) -> str:
    """The error's message on one line, with the library's advice in terms of CLI flags."""
    message = " ".join(str(exc).split())
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        message = str(exc.args[0])
    if command == "estimate":
        for api, flag in _ESTIMATE_FLAGS:
            message = message.replace(api, flag)
        if message.startswith("Missing columns:"):
            message += " Name the columns with --unit, --time, --cohort and --outcome."
    return message


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings on the command line: one line, without the package's file and source line."""
    text = " ".join(str(message).split())
    print(f"didmem: warning: {text}", file=sys.stderr if file is None else file)


def main(argv=None) -> int:
    import warnings

    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return args.func(args)
        except (DidmemError, FileNotFoundError, KeyError) as exc:
            print(f"didmem {args.command}: error: {_cli_message(args.command, exc)}",
                  file=sys.stderr)
            return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
