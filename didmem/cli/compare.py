"""``didmem compare``: where memorisation differs, between two models or between subgroups."""

from __future__ import annotations

from pathlib import Path

from ..errors import ParameterError
from ._options import panel_column_options, read_panel_frame, seed_option

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "the difference of two models' profiles (paired on shared instances), or profiles by a feature"
DESCRIPTION = (
    "With two panel files (the same instances scored by two models, runs or learning rates): "
    "fit both, and print the difference profile with a simultaneous band paired on the "
    "instances they share, its aggregations and a joint test that the profiles are equal. "
    "With one panel file and --by FEATURE (a column constant within each instance): a "
    "profile per subgroup with its own controls, and tests that memorisation is equal across "
    "subgroups. Results files are refused: they keep no per-instance influence, which the "
    "pairing needs."
)


def add_arguments(parser) -> None:
    """Add the ``didmem compare`` options to ``parser``."""
    from .._validation import add_option
    from ..estimators.did import DiDEstimator

    parser.add_argument("panels", nargs="+", metavar="PANEL",
                        help="two panel files (.parquet or .csv), or one with --by")
    parser.add_argument("--outcome", required=True, help="the outcome column")
    parser.add_argument("--by", default=None, metavar="FEATURE",
                        help="one panel: the instance feature whose subgroups to compare")
    parser.add_argument("--labels", default=None,
                        help="names of the two panels, comma-separated (default: file stems)")
    panel_column_options(parser)
    add_option(parser, DiDEstimator, "control_group", "--control", help="control group")
    add_option(parser, DiDEstimator, "base_period", help="the pre-treatment cells' base period")
    parser.add_argument("--never-treated", type=float, default=None, metavar="CODE",
                        help="a cohort value that marks never-treated units (NaN and inf always do)")
    parser.add_argument("--lower-is-better", action="store_true",
                        help="the outcome is lower-is-better (surprisal, rank): flip its sign")
    parser.add_argument("--n-draws", type=int, default=None, metavar="N",
                        help="Gaussian draws of the simultaneous band and the max-t test "
                             "(default: compare_profiles')")
    seed_option(parser)
    parser.add_argument("--out", default=None,
                        help="write the difference's cells (or the subgroups' equality tests) "
                             "to this .csv")


def _is_results_file(path: Path) -> bool:
    if path.suffix != ".parquet":
        return False
    try:
        import pyarrow.parquet as pq

        return b"didmem" in (pq.read_schema(path).metadata or {})
    except (OSError, ValueError):
        return False


def run(args) -> int:
    """Run ``didmem compare`` with parsed arguments; return the exit status."""
    import pandas as pd

    from ..contrasts import compare_profiles, heterogeneity
    from ..estimators.did import DiDEstimator
    from ..panel import Panel

    paths = [Path(p) for p in args.panels]
    wanted = 1 if args.by else 2
    if len(paths) != wanted:
        raise ParameterError(f"compare takes {'one panel file with --by' if args.by else 'two panel files'}"
                             f"; got {len(paths)}.")
    for path in paths:
        if _is_results_file(path):
            raise ParameterError(
                f"{str(path)!r} is a didmem results file: it keeps the cells' standard errors "
                "but not each instance's influence, which a paired comparison needs; pass the "
                "panel files the results were estimated from.")
    if args.out is not None and not args.out.endswith(".csv"):
        raise ParameterError(f"--out must name a '.csv' file; got {args.out!r}.")
    estimator = DiDEstimator(control_group=args.control_group, base_period=args.base_period,
                             n_bootstrap=0, lower_is_better=args.lower_is_better,
                             outcome=args.outcome)

    draws = {} if args.n_draws is None else {"n_draws": args.n_draws}

    def panel_of(frame):
        return Panel(frame, unit=args.unit, time=args.time, cohort=args.cohort,
                     outcome=args.outcome, never_treated=args.never_treated)

    if args.by:
        from ._estimate_by import instance_feature

        frame = read_panel_frame(paths[0])
        feature = instance_feature(frame, args.by, args.unit, repr(str(paths[0])))
        het = heterogeneity(panel_of(frame), feature, estimator=estimator, seed=args.seed,
                            **draws)
        print(het.summary())
        table = het.equality("instantaneous")
        print("\ninstantaneous memorisation by subgroup (last row: overall):")
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        if args.out:
            het.equality().to_csv(args.out, index=False)
            print(f"\nwrote {args.out}")
        return 0
    labels = ([x.strip() for x in args.labels.split(",")] if args.labels
              else [p.stem for p in paths])
    if not args.labels and labels[0] == labels[1]:
        raise ParameterError(f"The two panel files have the same name ({labels[0]!r}), which "
                             "would label both profiles; name them with --labels A,B.")
    if len(labels) != 2 or not all(labels) or labels[0] == labels[1]:
        raise ParameterError(f"--labels needs two different names, comma-separated; got "
                             f"{args.labels!r}.")
    a, b = (estimator.fit(panel_of(read_panel_frame(p))) for p in paths)
    diff = compare_profiles(a, b, labels=tuple(labels), seed=args.seed, **draws)
    print(diff.summary())
    print("\ninstantaneous memorisation, by cohort:")
    print(diff.aggregate("instantaneous").to_frame().to_string(
        index=False, float_format=lambda v: f"{v:.4g}"))
    if args.out:
        diff.to_frame().to_csv(args.out, index=False)
        print(f"\nwrote {args.out}")
    return 0
