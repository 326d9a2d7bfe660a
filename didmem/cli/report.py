"""``didmem report``: a self-contained HTML report of results files."""

from __future__ import annotations


from .._validation import choices_of
from ..errors import ParameterError
from ._options import load_results, parse_labels, read_panel_frame, result_names, use_agg_backend

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "write a self-contained HTML report of results files"
DESCRIPTION = (
    "Write one HTML file (figures embedded, no network needed) that opens with the finding in "
    "words for each results file, then the profile heatmap (hover a cell), the tables and "
    "figures, the pre-test, a searchable table of every cell and the settings; with --truth, "
    "the truth beside the estimates; with several files, the correlation of their profiles."
)


def add_arguments(parser) -> None:
    """Add the ``didmem report`` options to ``parser``."""
    from .._validation import add_option
    from ..honest import sensitivity
    from ..report import render_report

    parser.add_argument("results", nargs="+", help="results file(s) (.parquet)")
    parser.add_argument("--out", default="report.html", help="HTML file (default: %(default)s)")
    add_option(parser, render_report, "title", help="report title")
    parser.add_argument("--sensitivity", choices=choices_of(sensitivity, "restriction"),
                        help="add the sensitivity to violations of parallel trends under this "
                             "restriction (results estimated with --base-period universal)")
    parser.add_argument("--sensitivity-m", help="its values of Mbar or M, comma-separated")
    parser.add_argument("--truth", help="the true tau(g, c) where it is known (a .parquet or .csv "
                                        "with cohort, time, tau[, metric], e.g. a lab run's "
                                        "truth.parquet): shown beside the estimates")
    parser.add_argument("--labels", help="names of the results, comma-separated, one per file "
                                         "(default: the file stems)")
    parser.add_argument("--sensitivity-event-time", type=float, default=0.0,
                        help="its target event time (default: %(default)s)")


def run(args) -> int:
    """Run ``didmem report`` with parsed arguments; return the exit status."""
    from ..report import write_report
    from ..results._truth import check_truth_frame

    sensitivity = None
    if (args.sensitivity is None) != (args.sensitivity_m is None):
        raise ParameterError("--sensitivity and --sensitivity-m go together: the restriction "
                             "and its values of M or Mbar.")
    if args.sensitivity is not None:
        from .sensitivity import parse_floats

        sensitivity = {"restriction": args.sensitivity,
                       "m": parse_floats(args.sensitivity_m, "--sensitivity-m"),
                       "event_time": args.sensitivity_event_time}
    labels = parse_labels(args.labels, args.results)
    truth = None
    if args.truth is not None:
        truth = read_panel_frame(args.truth, option="--truth", what="truth file")
        check_truth_frame(truth, f"The truth file {args.truth!r} (--truth)")
    results = load_results(args.results)
    use_agg_backend()
    named = dict(zip(labels or result_names(args.results), results))
    path = write_report(named, args.out, title=args.title, sensitivity=sensitivity, truth=truth)
    print(f"wrote {path}")
    return 0
