"""``didmem run``: score, estimate and report from one study file, resumably.

A thin adapter over :class:`didmem.Study`: the file is read and checked at once by
:meth:`Study.from_file <didmem.Study.from_file>` (every key, every path, the ``[design]``,
the outcomes against the metrics), before anything is scored; :meth:`Study.run
<didmem.Study.run>` does the three steps and skips those that are done. The file is
described in ``docs/study.rst``. Ctrl-C stops the run with one line and exit status 130; the
same command resumes it.
"""

from __future__ import annotations

import argparse
import sys

from ._options import use_agg_backend

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run", "INTERRUPTED"]

HELP = "score, estimate and report from one study configuration (resumable)"
DESCRIPTION = (
    "Read a study configuration (the 'didmem score' file with a [design] table, and optional "
    "[estimate] and [report] tables) and check all of it, then score the checkpoints into "
    "OUT/panel.parquet, estimate the memorisation profile of each outcome into "
    "OUT/results-OUTCOME.parquet and write OUT/report.html. A step whose files are newer than "
    "its inputs and the configuration is skipped. See docs/study.rst."
)

INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT, as shells report it)."""


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``didmem run`` options to ``parser`` and return it."""
    from ..runners import RUNNER_KINDS

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


def interrupted(command: str) -> int:
    """Say on one line that ``command`` was interrupted and how to resume; return 130."""
    print(f"didmem {command}: interrupted; run the same command again to resume (finished "
          "work is kept).", file=sys.stderr)
    return INTERRUPTED


def run(args: argparse.Namespace) -> int:
    """Run ``didmem run`` with parsed arguments; return the exit status."""
    from ..study import Study

    study = Study.from_file(args.config, runner=args.runner, address=args.address)
    use_agg_backend()
    try:
        study.run(out=args.out, redo=args.redo, log=print)
    except KeyboardInterrupt:
        return interrupted("run")
    return 0
