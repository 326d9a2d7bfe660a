"""``didmem report``: a self-contained HTML report of results files."""

from __future__ import annotations

from .._validation import add_option
from ..report import render_report
from ._options import load_results, use_agg_backend

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "write a self-contained HTML report of results files"
DESCRIPTION = (
    "Write one HTML file (figures embedded, no network needed) with the settings, pre-test, "
    "summary tables and figures of each results file, and the correlation of their profiles "
    "when there are several."
)


def add_arguments(parser) -> None:
    """Add the ``didmem report`` options to ``parser``."""
    parser.add_argument("results", nargs="+", help="results file(s) (.parquet)")
    parser.add_argument("--out", default="report.html", help="HTML file (default: %(default)s)")
    add_option(parser, render_report, "title", help="report title")


def run(args) -> int:
    """Run ``didmem report`` with parsed arguments; return the exit status."""
    from ..report import write_report

    results = load_results(args.results)
    use_agg_backend()
    named = {p: r for p, r in zip(args.results, results)}
    path = write_report(named, args.out, title=args.title)
    print(f"wrote {path}")
    return 0
