"""Arguments of ``didmem lab``, ready to mount on an ``argparse`` sub-parser.

The command-line module adds them with :func:`add_arguments` and calls :func:`main_from_args`::

    lab = subparsers.add_parser("lab", help=HELP, description=DESCRIPTION)
    add_arguments(lab)
    lab.set_defaults(handler=main_from_args)
"""

from __future__ import annotations

import argparse

from .._validation import add_option
from .config import LabConfig

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "config_changes", "main_from_args"]

HELP = "train tiny language models with counterfactual twins (the true memorisation profile)"
DESCRIPTION = (
    "Generate a seeded corpus, train a tiny GPT-NeoX once over it with a recorded data order, "
    "train a twin without the analysed instances, score both with the transformers backend, "
    "and write DIR/panel.parquet and DIR/truth.parquet (the true tau(g, c))."
)


def _cohort_list(text: str) -> tuple:
    if text == "auto":
        return "auto"
    if text.strip() in ("", "none"):
        return ()
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected 'auto', 'none' or comma-separated steps such as 96,192; got {text!r}"
        ) from exc


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``didmem lab`` options to ``parser`` and return it."""
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--quick", action="store_true",
                        help="the quick scale (seconds) instead of the demo scale (about a minute)")
    add_option(parser, LabConfig, "seed", help="master seed")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a different run, or other files, in DIR")
    parser.add_argument("--exact-cohorts", type=_cohort_list, default=None, metavar="STEPS",
                        help="cohorts of the exact check: 'auto', 'none' or e.g. 96,192")
    parser.add_argument("--subset-models", type=int, default=None, metavar="M",
                        help="also train M (even) subset models for the architectural estimator")
    parser.add_argument("--validation-shift", type=float, default=None, metavar="S",
                        help="draw validation from a shifted language (0..1)")
    parser.add_argument("--text-file", action="append", default=None, metavar="PATH",
                        help="train on this text file instead of the generated language "
                             "(repeatable)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (results are bit-identical for a fixed count)")
    return parser


def config_changes(args: argparse.Namespace) -> dict:
    """The :class:`~didmem.lab.LabConfig` fields that the parsed options change."""
    mapping = {
        "exact_cohorts": args.exact_cohorts,
        "n_subset_models": args.subset_models,
        "validation_shift": args.validation_shift,
        "text_files": tuple(args.text_file) if args.text_file else None,
        "threads": args.threads,
    }
    return {k: v for k, v in mapping.items() if v is not None}


def main_from_args(args: argparse.Namespace) -> int:
    """Run the lab with parsed options, print its summary, and return the exit status 0."""
    from .runner import run

    result = run(args.out, quick=args.quick, seed=args.seed, overwrite=args.overwrite,
                 **config_changes(args))
    print(result.summary())
    if result.reused:
        print("(an identical run was already complete in this directory; loaded it)")
    return 0
