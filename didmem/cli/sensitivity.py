"""``didmem sensitivity``: robustness of an event study to violations of parallel trends.

One subcommand of :mod:`didmem.cli` (``HELP``, ``DESCRIPTION``, ``add_arguments``, ``run``).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import MissingDependencyError, ParameterError

HELP = "sensitivity of the event-time profile to violations of parallel trends"
DESCRIPTION = (
    "Read a results file written by 'didmem estimate --base-period universal' and print the "
    "confidence intervals of a post-treatment event-time effect (or an average of several) "
    "under restricted violations of parallel trends (Rambachan & Roth 2023): relative "
    "magnitudes (violations after treatment at most Mbar times the largest before) or "
    "smoothness (the violation's slope changes by at most M per period), beside the "
    "original interval, with the breakdown value (the smallest bound at which the interval "
    "contains zero). Writes the table as CSV and the figure as PNG.")


def parse_floats(text: str, flag: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ParameterError(f"{flag} expects comma-separated numbers; got {text!r}.") from None
    if not values:
        raise ParameterError(f"{flag} expects at least one number; got {text!r}.")
    return values


def add_arguments(p) -> None:
    p.add_argument("results", help="results file (.parquet) of an estimate with a universal "
                                   "base period")
    from .._validation import add_option
    from ..honest import sensitivity

    add_option(p, sensitivity, "restriction", help="restriction on the violations")
    p.add_argument("--m", required=True,
                   help="values of Mbar (relative magnitudes) or M (smoothness, in outcome "
                        "units per period squared), comma-separated, e.g. 0,0.5,1,2")
    target = p.add_mutually_exclusive_group()
    add_option(target, sensitivity, "event_time", type=float,
               help="the post-treatment event time of the target")
    target.add_argument("--average",
                        help="target the average of these post-treatment event times "
                             "(comma-separated) instead of one")
    add_option(p, sensitivity, "method",
               help="relative magnitudes (and smoothness with --bias or --monotonicity): "
                    "the hybrid or the conditional ARP test")
    add_option(p, sensitivity, "bias",
               help="also restrict the sign of the post-treatment violations "
                    "(Delta^RMB, Delta^SDPB; tested by linear programs, slower)")
    add_option(p, sensitivity, "monotonicity",
               help="also restrict the violation to increase (decrease) from the "
                    "reference period on (not with --bias)")
    add_option(p, sensitivity, "alpha", type=float,
               help="one minus the coverage (default: the results file's)")
    add_option(p, sensitivity, "grid_points", type=int,
               help="relative magnitudes: points of the grid the test is inverted over")
    add_option(p, sensitivity, "simulations", type=int,
               help="draws of the C-LF critical value's simulation")
    add_option(p, sensitivity, "seed", type=int,
               help="seed of the C-LF critical value's simulation")
    p.add_argument("--out", help="CSV to write (default: RESULTS_sensitivity.csv beside the "
                                 "results); the figure goes beside it as .png")
    p.add_argument("--no-figure", action="store_true", help="write the table only")
    from ._options import progress_option

    progress_option(p)


def run(args) -> int:
    import didmem
    from ..results import load_result

    ms = parse_floats(args.m, "--m")
    if args.average is not None:
        times = parse_floats(args.average, "--average")
        target = {t: 1.0 / len(times) for t in times}
        if len(target) < len(times):
            raise ParameterError(f"--average lists an event time twice: {args.average!r}.")
    else:
        target = args.event_time
    out = Path(args.out) if args.out else Path(args.results).with_name(
        Path(args.results).stem + "_sensitivity.csv")
    if out.suffix != ".csv":
        raise ParameterError(f"--out must name a '.csv' file; got {args.out!r}.")
    res = load_result(args.results)
    if "base_period" not in res.params:
        raise ParameterError(
            f"{args.results!r} holds a {res.estimator} result, which has no base period: the "
            "sensitivity analysis reads an event study of DiDEstimator estimated with "
            "'didmem estimate ... --base-period universal'.")
    base = res.params.get("base_period")
    if base != "universal":
        raise ParameterError(
            f"{args.results!r} was estimated with base_period={base!r}; the sensitivity "
            "analysis needs a universal base period: re-run 'didmem estimate ... "
            "--base-period universal'.")
    try:
        s = didmem.sensitivity(res.aggregate("dynamic"), restriction=args.restriction, m=ms,
                               event_time=target, alpha=args.alpha, method=args.method,
                               grid_points=args.grid_points, simulations=args.simulations,
                               seed=args.seed, bias=args.bias,
                               monotonicity=args.monotonicity, progress=args.progress)
    except ParameterError as exc:  # the library names event_time, which --average set
        if args.average is not None and str(exc).startswith("event_time "):
            raise ParameterError(f"--average {args.average!r}: {exc}") from None
        raise
    table = s.to_frame()
    bound = "M" if s.restriction == "smoothness" else "Mbar"
    shape = f" with {s.variant}" if s.variant else ""
    print(f"{s.restriction.replace('_', ' ')}{shape}: {1 - s.alpha:.0%} confidence intervals "
          f"of {_describe(s.target)}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    print(f"breakdown {bound}: {s.breakdown:.6g} (the smallest {bound} whose interval "
          "contains zero)")
    out.parent.mkdir(parents=True, exist_ok=True)
    table.assign(breakdown=s.breakdown, restriction=s.restriction,
                 variant=s.variant or "").to_csv(out, index=False)
    written = [out]
    if not args.no_figure:
        try:
            written.append(_figure(s, out.with_suffix(".png")))
        except MissingDependencyError as exc:
            print(f"no figure: {exc}")
    print("wrote:\n" + "\n".join(f"  {p}" for p in written))
    return 0


def _describe(target) -> str:
    used = target[target != 0]
    if used.size == 1:
        return f"the effect at event time {used.index[0]:g}"
    return "the average of event times " + ", ".join(f"{e:g}" for e in used.index)


def _figure(s, path: Path) -> Path:
    from ..errors import optional_import

    optional_import("matplotlib", "plot").use("Agg")
    import matplotlib.pyplot as plt

    from ..results.plotting import plot_sensitivity

    ax = plot_sensitivity(s)
    ax.figure.savefig(path, dpi=110)
    plt.close(ax.figure)
    return path
