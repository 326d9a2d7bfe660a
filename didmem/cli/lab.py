"""``didmem lab``: train tiny language models with their counterfactual twins."""

from __future__ import annotations

import argparse

from .._validation import add_option
from ..lab.config import LabConfig

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "config_changes", "run"]

HELP = "train tiny language models with counterfactual twins (the true memorisation profile)"
DESCRIPTION = (
    "Generate a seeded corpus, train a tiny GPT-NeoX once over it with a recorded data order, "
    "train for every cohort a run without only its analysed instances (and a twin without all "
    "of them), score them with the transformers backend, and write DIR/panel.parquet and "
    "DIR/truth.parquet (the exact tau(g, c)). With --replicate N, repeat over N seeds and "
    "score estimators against the truth."
)


def _cohort_list(text: str) -> tuple:
    if text in ("all", "auto"):
        return text
    if text.strip() in ("", "none"):
        return ()
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected 'all', 'auto', 'none' or comma-separated steps such as 96,192; "
            f"got {text!r}"
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
                        help="cohorts with an exact counterfactual run: 'all' (default), 'auto', "
                             "'none' or e.g. 96,192")
    parser.add_argument("--subset-models", type=int, default=None, metavar="M",
                        help="also train M (even) subset models for the architectural estimator")
    parser.add_argument("--validation-shift", type=float, default=None, metavar="S",
                        help="draw validation from a shifted language (0..1)")
    parser.add_argument("--domains", type=int, default=None, metavar="D",
                        help="domains of the generated language (each its own words and chain)")
    parser.add_argument("--validation-mix", type=float, default=None, metavar="P",
                        help="share of validation instances from the first domain (0..1); "
                             "implies --domains 2 unless given")
    parser.add_argument("--replicate", type=int, default=None, metavar="N",
                        help="run N seeds (from --seed) into DIR/seed{s} and print each "
                             "estimator's mean error, MC error, RMSE, correlation and coverage "
                             "against the exact truth; writes DIR/replication.csv")
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
        "n_domains": args.domains,
        "validation_mix": args.validation_mix,
        "text_files": tuple(args.text_file) if args.text_file else None,
        "threads": args.threads,
    }
    changes = {k: v for k, v in mapping.items() if v is not None}
    if "validation_mix" in changes and "n_domains" not in changes:
        changes["n_domains"] = 2
    return changes


def run(args: argparse.Namespace) -> int:
    """Run the lab with parsed options, print its summary, and return the exit status 0."""
    from ..lab.runner import run as run_lab

    if args.replicate is not None:
        return _replicate_from_args(args)
    result = run_lab(args.out, quick=args.quick, seed=args.seed, overwrite=args.overwrite,
                 **config_changes(args))
    print(result.summary())
    if result.reused:
        print("(an identical run was already complete in this directory; loaded it)")
    return 0


def _replicate_from_args(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..lab.replication import replicate

    rep = replicate(args.out, n_seeds=args.replicate, first_seed=args.seed, quick=args.quick,
                    overwrite=args.overwrite, **config_changes(args))
    print(rep.to_text())
    target = Path(args.out) / "replication.csv"
    rep.summary.to_csv(target, index=False)
    rep.runs.to_csv(Path(args.out) / "replication_runs.csv", index=False)
    print(f"wrote {target} and {target.with_name('replication_runs.csv')}")
    return 0
