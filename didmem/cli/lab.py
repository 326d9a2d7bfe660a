"""``didmem lab``: train tiny language models with their counterfactual twins."""

from __future__ import annotations

import argparse


__all__ = ["HELP", "DESCRIPTION", "add_arguments", "config_changes", "run", "FLAGS", "SPECIAL"]

HELP = "train tiny language models with counterfactual twins (the true memorisation profile)"
DESCRIPTION = (
    "Generate a seeded corpus, train a tiny GPT-NeoX once over it with a recorded data order, "
    "train for every cohort a run without only its analysed instances (and a twin without all "
    "of them), score them with the transformers backend, and write DIR/panel.parquet and "
    "DIR/truth.parquet (tau(g, c), the direct effect: the exact run's total effect less its "
    "drift on the untreated). With --runs R, train R runs on the same corpus in different "
    "data orders, each with its own truth (a run column in both files). With --replicate N, "
    "repeat over N seeds and score estimators against the truth."
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


def _names(text: str) -> tuple:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names; got {text!r}")
    return names


#: LabConfig fields whose flag is not ``--field-name``: the names users already have.
FLAGS = {"n_subset_models": "--subset-models", "n_domains": "--domains",
         "text_files": "--text-file"}

#: How the fields that are not one number or word are given on the command line.
SPECIAL = {
    "exact_cohorts": {"type": _cohort_list, "metavar": "STEPS",
                      "help": "On the command line: 'all', 'auto', 'none' or steps such as "
                              "96,192."},
    "metrics": {"type": _names, "metavar": "NAMES", "help": "Comma-separated."},
    "text_files": {"action": "append", "metavar": "PATH", "help": "Repeatable."},
    "validation_mix": {"help": "Implies --domains 2 unless given."},
    "vary_init": {"action": "store_const", "const": True,
                  "help": "A flag (with --runs 2 or more)."},
    "track": {"action": "store_const", "const": True, "help": "A flag."},
}


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``didmem lab`` options to ``parser`` and return it.

    Every field of :class:`~didmem.lab.LabConfig` has an option (built by
    :func:`~didmem.cli._fields.add_dataclass_options`); the others are written here.
    """
    from ..lab.config import LabConfig, quick_config
    from ._fields import add_dataclass_options

    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--quick", action="store_true",
                        help="the quick scale instead of the demo scale, about a third of its "
                             "work (CPU: 24 s against 79 s on a loaded 2-core machine; the "
                             "wall time grows with the machine's load)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a different run, or other files, in DIR")
    parser.add_argument("--workers", type=int, default=None, metavar="N",  # None: run()'s
                        help="with --runs R: processes that train and score the runs at once "
                             "(the files are the same whatever their number; 1 runs "
                             "everything in this process); by default one per run, at most "
                             "one per core (per --threads)")
    from ._options import progress_option

    progress_option(parser)
    parser.add_argument("--replicate", type=int, default=None, metavar="N",
                        help="run N seeds (from --seed) into DIR/seed{s} and print each "
                             "estimator's mean error, MC error, RMSE, correlation and coverage "
                             "against the exact truth; writes DIR/replication.csv")
    settings = parser.add_argument_group(
        "settings (the fields of didmem.lab.LabConfig; those not given keep the scale's value)")
    add_dataclass_options(settings, LabConfig, flags=FLAGS, special=SPECIAL,
                          scales={"--quick": quick_config()}, keep_default=("seed",))
    return parser


def config_changes(args: argparse.Namespace) -> dict:
    """The :class:`~didmem.lab.LabConfig` fields that the parsed options change."""
    from ..lab.config import LabConfig
    from ._fields import field_changes

    changes = field_changes(args, LabConfig, exclude=("seed",))
    if "validation_mix" in changes and "n_domains" not in changes:
        changes["n_domains"] = 2
    return changes


def run(args: argparse.Namespace) -> int:
    """Run the lab with parsed options, print its summary, and return the exit status 0."""
    from ..lab.pipeline import run as run_lab

    if args.replicate is not None:
        if args.progress is not None:
            from ..errors import ParameterError

            raise ParameterError("--progress and --no-progress apply to one lab run, not to "
                                 "--replicate; drop them.")
        return _replicate_from_args(args)
    print(f"didmem lab: training and scoring the lab model and its counterfactual runs in "
          f"{args.out} ({'quick' if args.quick else 'demo'} scale; --progress shows the "
          "stage) ...", flush=True)
    result = run_lab(args.out, quick=args.quick, seed=args.seed, overwrite=args.overwrite,
                     workers=args.workers, progress=args.progress, **config_changes(args))
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
