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

from .errors import DidmemError, ParameterError

__all__ = ["main"]


def _demo(args) -> int:
    import didmem
    from didmem.lab import run

    t0 = time.perf_counter()
    out = Path(args.out)
    metric = "mean_token_loglik"
    print(f"didmem demo: training a tiny language model and its counterfactual twin in {out / 'lab'}"
          + (" (quick scale)" if args.quick else "") + " ...", flush=True)
    lab = run(out / "lab", quick=args.quick, seed=args.seed, overwrite=args.overwrite)
    panel = didmem.Panel(lab.panel, unit="unit", time="time", cohort="cohort", outcome=metric)
    res = didmem.DiDEstimator(n_bootstrap=args.draws, random_state=args.seed).fit(panel)
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
          "from the twin:")
    print(inst.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"truth vs estimate: RMSE {rmse:.4f} over {len(post)} post-treatment cells; the band "
          f"covers the twin's truth in {int(covered.sum())} of them")
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
    if path.suffix == ".csv":
        return pd.read_csv(path)
    if path.suffix == ".parquet":
        from .errors import optional_import

        optional_import("pyarrow", "plot")
        return pd.read_parquet(path)
    raise ParameterError(f"A panel file must end in '.csv' or '.parquet'; got {str(path)!r}.")


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
                         outcome=args.outcome)
    cls = {"did": didmem.DiDEstimator, "difference": didmem.DifferenceEstimator}[args.estimator]
    options = {} if args.base_period is None else {"base_period": args.base_period}
    res = cls(control_group=args.control, n_bootstrap=args.draws, random_state=args.seed,
              lower_is_better=args.lower_is_better, **options).fit(panel)
    print(res.summary())
    print(f"\nwrote {res.save(out)}")
    return 0


def _load_all(paths):
    from .results_io import load_result

    return [load_result(p) for p in paths]


def _plot(args) -> int:
    from . import plotting
    from .profiles import profile_correlation

    if args.kind == "correlation":
        if len(args.results) < 2:
            raise ParameterError("--kind correlation needs two or more results files.")
    elif len(args.results) != 1:
        raise ParameterError(f"--kind {args.kind} draws one results file; got "
                             f"{len(args.results)}.")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="didmem",
        description="Causal memorisation profiles of language models by difference-in-differences.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="the main job on the embedded default: lab model, twin truth, DiD profile",
        description="Train a tiny language model on a generated corpus together with its "
                    "counterfactual twin (the memorisation lab), score every checkpoint, "
                    "estimate the memorisation profile with a simultaneous bootstrap band, "
                    "print the summary and the truth-vs-estimate error, and write the tables "
                    "to --out with the figures (profile.png, instantaneous.png, "
                    "persistent.png), results.parquet and report.html. Needs the 'lm' and "
                    "'plot' extras.",
    )
    demo.add_argument("--out", default="didmem-demo", help="output directory (default: %(default)s)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    demo.add_argument("--draws", type=int, default=1000, help="bootstrap draws (default: %(default)s)")
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
    est.add_argument("--estimator", choices=["did", "difference"], default="did",
                     help="difference-in-differences or the plain difference (default: %(default)s)")
    est.add_argument("--control", choices=["never_treated", "not_yet_treated"],
                     default="never_treated", help="control group (default: %(default)s)")
    est.add_argument("--base-period", choices=["varying", "universal"],
                     help="did only: the pre-treatment cells' base period (default: varying); "
                          "'didmem sensitivity' needs universal")
    est.add_argument("--unit", default="unit", help="unit column (default: %(default)s)")
    est.add_argument("--time", default="time", help="time / checkpoint column (default: %(default)s)")
    est.add_argument("--cohort", default="cohort",
                     help="cohort / treatment-step column, NaN or inf for never treated "
                          "(default: %(default)s)")
    est.add_argument("--lower-is-better", action="store_true",
                     help="the outcome is lower-is-better (surprisal, rank): flip its sign")
    est.add_argument("--draws", type=int, default=1000, help="bootstrap draws (default: %(default)s)")
    est.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
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
    rep.add_argument("--title", default="didmem report", help="report title")
    rep.add_argument("--sensitivity", choices=["relative_magnitudes", "smoothness"],
                     help="add the sensitivity to violations of parallel trends under this "
                          "restriction (results estimated with --base-period universal)")
    rep.add_argument("--sensitivity-m", help="its values of Mbar or M, comma-separated")
    rep.add_argument("--sensitivity-event-time", type=float, default=0.0,
                     help="its target event time (default: %(default)s)")
    rep.set_defaults(func=_report)

    from .lab import cli_args

    lab = sub.add_parser("lab", help=cli_args.HELP, description=cli_args.DESCRIPTION)
    cli_args.add_arguments(lab)
    lab.set_defaults(func=cli_args.main_from_args)

    from .runners import config as score_config

    score = sub.add_parser("score", help=score_config.HELP, description=score_config.DESCRIPTION)
    score_config.add_arguments(score)
    score.set_defaults(func=score_config.main_from_args)

    from . import cli_plan

    plan = sub.add_parser("plan", help=cli_plan.HELP, description=cli_plan.DESCRIPTION)
    cli_plan.add_arguments(plan)
    plan.set_defaults(func=cli_plan.main_from_args)

    from . import cli_sensitivity

    sens = sub.add_parser("sensitivity", help=cli_sensitivity.HELP,
                          description=cli_sensitivity.DESCRIPTION)
    cli_sensitivity.add_arguments(sens)
    sens.set_defaults(func=cli_sensitivity.main_from_args)

    from . import pipeline

    study = sub.add_parser("run", help=pipeline.HELP, description=pipeline.DESCRIPTION)
    pipeline.add_arguments(study)
    study.set_defaults(func=pipeline.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (DidmemError, FileNotFoundError, KeyError) as exc:
        print(f"didmem {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
