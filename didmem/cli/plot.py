"""``didmem plot``: one figure of one or more results files, as PNG."""

from __future__ import annotations

from pathlib import Path

from ..errors import ParameterError
from ._options import load_results, parse_labels, result_names, use_agg_backend

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run", "FIGURES"]

HELP = "draw one figure of a results file as PNG"
DESCRIPTION = (
    "Draw a figure of a results file written by 'didmem estimate' or 'didmem demo': the "
    "profile heatmap (significant cells), instantaneous, persistent or residual memorisation, "
    "parallel-trends diagnostics, the event study (the effect by event time, before and after "
    "treatment together, as R's ggdid), or the correlation of the profiles of two or more results "
    "files. A results file of several runs ('didmem estimate --run') draws its runs side by "
    "side (--figure runs: each run, the pooled and the within-instance estimates at event "
    "time 0) or its pooled profile (--figure profile). A membership-inference results file "
    "('didmem estimate --estimator membership') draws its AUC per checkpoint (--figure auc) "
    "or its implied profile (--figure profile). With --truth (a lab run's truth.parquet) the "
    "instantaneous, persistent and residual figures mark the truth as the report does, and "
    "--figure truth draws every post-treatment estimate against its truth."
)

FIGURES = ("profile", "instantaneous", "persistent", "residual", "pretrends", "event_study",
           "correlation", "runs", "auc", "truth")
TRUTH_FIGURES = ("instantaneous", "persistent", "residual", "truth")
"""The figures that ``--truth`` draws the truth on (``truth``: estimates against it)."""
"""The figures ``--figure`` draws."""


def add_arguments(parser) -> None:
    """Add the ``didmem plot`` options to ``parser``."""
    parser.add_argument("results", nargs="+", help="results file(s) (.parquet)")
    parser.add_argument("--figure", required=True, choices=list(FIGURES), help="the figure to draw")
    parser.add_argument("--out",
                        help="PNG to write (default: RESULTS_FIGURE.png beside the first)")
    parser.add_argument("--dpi", type=int, default=110, help="resolution (default: %(default)s)")
    parser.add_argument("--truth", help="the true tau(g, c) (a .parquet or .csv with cohort, "
                                        "time, tau[, metric], e.g. a lab run's truth.parquet): "
                                        "marked on --figure " + ", ".join(TRUTH_FIGURES[:3])
                                        + "; needed by --figure truth")
    parser.add_argument("--labels", help="names of the results for --figure correlation, "
                                         "comma-separated, one per file (default: file stems)")


_DPI = (36, 1200)


def _truth(args):
    """The ``--truth`` file's table (checked), or None; refused for a figure it is not drawn on."""
    if args.figure == "truth" and args.truth is None:
        raise ParameterError("--figure truth draws the estimates against the truth: give "
                             "--truth FILE (a lab run's truth.parquet).")
    if args.truth is None:
        return None
    if args.figure not in TRUTH_FIGURES:
        raise ParameterError(f"--truth is drawn on --figure {', '.join(TRUTH_FIGURES)}; got "
                             f"--figure {args.figure} (the report, didmem report --truth, shows "
                             "the truth beside every table).")
    from ..results._truth import check_truth_frame
    from ._options import read_panel_frame

    truth = read_panel_frame(args.truth, option="--truth", what="truth file")
    check_truth_frame(truth, f"The truth file {args.truth!r} (--truth)")
    return truth


def _mark_truth(ax, result, truth, figure: str) -> None:
    """The truth of an aggregation's keys on its figure, as the report draws it."""
    from ..report._truth import cells_with_truth, cohort_weights, overlay, true_aggregate

    agg = result.aggregate(figure)
    true = true_aggregate(cells_with_truth(result, truth), figure, agg.key_name,
                          cohort_weights(result))
    overlay(ax, true.reindex(agg.to_frame()[agg.key_name].to_numpy()),
            bars=figure == "residual")


def run(args) -> int:
    """Run ``didmem plot`` with parsed arguments; return the exit status."""
    from .. import plotting
    from ..results.profiles import profile_correlation

    if args.figure == "correlation":
        if len(args.results) < 2:
            raise ParameterError("--figure correlation needs two or more results files.")
    elif len(args.results) != 1:
        raise ParameterError(f"--figure {args.figure} draws one results file; got "
                             f"{len(args.results)}.")
    if not _DPI[0] <= args.dpi <= _DPI[1]:
        raise ParameterError(f"--dpi must be dots per inch in [{_DPI[0]}, {_DPI[1]}] (fonts "
                             "cannot be drawn below, and an image above takes gigabytes); got "
                             f"{args.dpi}.")
    labels = parse_labels(args.labels, args.results)
    if labels is not None and args.figure != "correlation":
        raise ParameterError("--labels names the models of --figure correlation; "
                             f"--figure {args.figure} draws one results file.")
    truth = _truth(args)
    results = load_results(args.results)
    out = Path(args.out) if args.out else Path(args.results[0]).with_name(
        Path(args.results[0]).stem + f"_{args.figure}.png")
    use_agg_backend()
    runs = hasattr(results[0], "per_run")
    membership = hasattr(results[0], "cell_auc")
    if args.figure == "auc" or (membership and args.figure != "correlation"):
        if not membership:
            raise ParameterError(f"--figure auc draws a membership-inference results file "
                                 f"(didmem estimate --estimator membership); {args.results[0]!r} "
                                 "holds another estimator's result.")
        if args.figure not in ("auc", "profile"):
            raise ParameterError(
                f"{args.results[0]!r} holds a membership-inference result: it draws --figure "
                f"auc (the AUC per checkpoint) or --figure profile (the implied profile), not "
                f"--figure {args.figure}; for that figure estimate with --estimator did.")
        ax = results[0].plot(args.figure)
    elif args.figure == "runs" or runs:
        if not runs:
            raise ParameterError(f"--figure runs draws a results file of several runs (didmem "
                                 f"estimate --run); {args.results[0]!r} holds one result.")
        if args.figure not in ("runs", "profile"):
            raise ParameterError(
                f"{args.results[0]!r} holds several runs: it draws --figure runs (the runs side "
                f"by side) or --figure profile (the pooled profile), not --figure {args.figure}; "
                "for one run's figures, estimate that run's panel alone.")
        ax = (plotting.plot_runs(results[0]) if args.figure == "runs"
              else plotting.plot_profile(results[0].pooled))
    elif args.figure == "correlation":
        named = dict(zip(labels or result_names(args.results), results))
        ax = plotting.plot_profile_correlation(profile_correlation(named))
    elif args.figure == "truth":
        from ..report._truth import cells_with_truth, truth_scatter
        from .._outcomes import outcome_label

        ax = truth_scatter(cells_with_truth(results[0], truth), label=outcome_label(results[0]))
    else:
        ax = plotting.PLOTS[args.figure](results[0])
        if truth is not None:
            _mark_truth(ax, results[0], truth, args.figure)
    out.parent.mkdir(parents=True, exist_ok=True)
    ax.figure.savefig(out, dpi=args.dpi)
    import matplotlib.pyplot as plt

    plt.close(ax.figure)  # a command run in a process that goes on (tests, notebooks)
    print(f"wrote {out}")
    return 0
