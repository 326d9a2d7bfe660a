"""``didmem score``: score checkpoints into a panel of outcomes, locally or on Ray.

A thin adapter over :meth:`didmem.Study.score` (and :meth:`~didmem.Study.plan` for
``--plan``); the configuration file is described in ``docs/study.rst``.
"""

from __future__ import annotations

import argparse

from .run import interrupted

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "score checkpoints into a panel of outcomes, locally or on Ray (resumable)"
DESCRIPTION = (
    "Read a TOML or JSON configuration (backend and checkpoints, instances file, metrics, "
    "runner), build the scoring plan (one work item per checkpoint and shard), run it with the "
    "local runner or on Ray, and write OUT/scores.parquet beside the parts, manifest.json and "
    "plan.json. A re-run with the same configuration skips finished parts. With a [design] table "
    "(kind 'pythia', 'order', 'olmo' or 'hubble') it also writes OUT/panel.parquet with the "
    "cohorts and the instance covariates, ready for 'didmem estimate'. See docs/ray.rst and docs/study.rst."
)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``didmem score`` options to ``parser`` and return it."""
    from ..runners import RUNNER_KINDS

    parser.add_argument("--config", required=True, metavar="FILE",
                        help="the run's configuration, .toml or .json (see docs/study.rst)")
    parser.add_argument("--runner", choices=list(RUNNER_KINDS), default=None,
                        help="where the work items run (default: the config's, else local)")
    parser.add_argument("--address", default=None,
                        help="address of an existing Ray cluster, e.g. 'auto' (ray runner)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output directory (default: the config's 'out', else "
                             "'didmem-scores')")
    parser.add_argument("--plan", action="store_true",
                        help="print the scoring plan, save it as OUT/plan.json, and stop")
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``didmem score`` with parsed arguments; return the exit status."""
    from ..study import Study

    study = Study.from_file(args.config, runner=args.runner, address=args.address)
    if args.plan:
        study.plan(out=args.out, log=print)
        return 0
    try:
        study.score(out=args.out, log=print)
    except KeyboardInterrupt:
        return interrupted("score")
    return 0
