"""``didmem estimate``: the profile of a panel file, written as a results parquet."""

from __future__ import annotations

from pathlib import Path

from .._validation import choices_of, defaults_of
from ..errors import ParameterError
from ._options import bootstrap_option, panel_column_options, read_panel_frame, seed_option

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run", "FLAG_ADVICE"]

HELP = "estimate the profile of a panel file and write a results parquet"
DESCRIPTION = (
    "Read a long panel (one row per unit and checkpoint; .parquet or .csv, or a folder of "
    "parquet files read in bounded memory, locally or with --runner ray), estimate "
    "tau(g, c) with a bootstrap band, print the summary and write the results file (read it "
    "with didmem.load_result, 'didmem plot' or 'didmem report')."
)

FLAG_ADVICE = (
    ("Pass balance='drop_incomplete_units' to drop those units.",
     "Pass --balance drop_incomplete_units to drop those units."),
    ("Pass balance='keep' to estimate with every observed row (as R did's "
     "allow_unbalanced_panel=TRUE), or balance='drop_incomplete_units' to drop those units.",
     "Pass --balance keep to estimate with every observed row (as R did's "
     "allow_unbalanced_panel=TRUE), or --balance drop_incomplete_units to drop those units."),
    ("pass never_treated=0 to Panel (CLI: --never-treated 0)", "pass --never-treated 0"),
    ("Use control_group='not_yet_treated'", "Use --control not_yet_treated"),
    ("use control_group='not_yet_treated'", "use --control not_yet_treated"),
    ("name the one to use with outcome=...", "name the one to use with --outcome"),
)
"""How the library's advice reads on the command line: (in the library, with flags)."""


def add_arguments(parser) -> None:
    """Add the ``didmem estimate`` options to ``parser``."""
    from .._validation import add_option
    from ..estimators.did import DiDEstimator
    from ..cohorts import PYTHIA_BATCH_SIZE
    from ..estimators.runs import RunsEstimator
    from ..panel import Panel
    from ..study.estimate import EstimateSettings

    from ..runners import RUNNER_KINDS

    parser.add_argument("panel", help="the panel file (.parquet or .csv), or a folder of "
                                      "parquet files (a balanced panel, fitted from moments)")
    parser.add_argument("--outcome", default=None,
                        help="the outcome column (required, except with --memorised)")
    parser.add_argument("--out", required=True, help="the results file to write (.parquet)")
    add_option(parser, EstimateSettings, "estimator",
               help="difference-in-differences or the plain difference")
    add_option(parser, DiDEstimator, "control_group", "--control", help="control group")
    parser.add_argument("--base-period", choices=choices_of(DiDEstimator, "base_period"),
                        help="did only: the pre-treatment cells' base period (default: varying); "
                             "'didmem sensitivity' needs universal")
    panel_column_options(parser)
    add_option(parser, DiDEstimator, "exposure", metavar="K",
               help="did only: the effect of the K-th exposure of each instance, from the "
                    "cohort columns COHORT, COHORT_2, ..., COHORT_K (the --cohort name with "
                    "_2 ... _K), with controls of the same exposure history")
    parser.add_argument("--run", default=None, metavar="COLUMN",
                        help="the training-run column of a panel of several runs (seeds): "
                             "writes each run's profile, the pooled profile (runs a random "
                             "factor) and the within-instance comparison to one results file "
                             "(did only; see the docs' 'Several runs' page)")
    add_option(parser, RunsEstimator, "run_trends",
               help="with --run: how the within-instance comparison removes a run's shift "
                    "at a checkpoint (the mean of the instances no run trains, or nothing)")
    parser.add_argument("--never-treated", type=float, default=None, metavar="CODE",
                        help="a cohort value that marks never-treated units, such as R did's 0 "
                             "(NaN and inf always do)")
    add_option(parser, Panel, "balance",
               help="what to do with units not observed at every time: stop with an "
                    "error, drop them with a warning, or keep every observed row (R did's "
                    "allow_unbalanced_panel)")
    parser.add_argument("--lower-is-better", action="store_true",
                        help="the outcome is lower-is-better (surprisal, rank): flip its sign")
    bootstrap_option(parser)
    parser.add_argument("--r-inference", action="store_true",
                        help="R did's standard errors and band (small_sample=False) instead of "
                             "the small-sample corrected ones")
    seed_option(parser)
    parser.add_argument("--runner", choices=list(RUNNER_KINDS), default="local",
                        help="a folder's partitions read here or as tasks on Ray (default: "
                             "local)")
    parser.add_argument("--address", default=None,
                        help="address of an existing Ray cluster, e.g. 'auto' (ray runner)")
    parser.add_argument("--memorised", action="store_true",
                        help="PANEL is a folder of memorised-index lists (EleutherAI's "
                             "pythia-memorized-evals layout, one list per checkpoint): a binary "
                             "panel of every sequence of the training order x checkpoint, "
                             "outcome 'memorised', fitted from its pattern counts")
    parser.add_argument("--model", default=None,
                        help="with --memorised: whose lists to read (e.g. deduped.1.4b) when "
                             "the folder holds several models'")
    parser.add_argument("--batch-size", type=int, default=PYTHIA_BATCH_SIZE,
                        help="with --memorised: Pythia's order, sequence i trained at step "
                             "i // B + 1 (default: %(default)s)")
    parser.add_argument("--sequences", type=int, default=None,
                        help="with --memorised: sequences in the order (default: 143,000 steps "
                             "x the batch size)")


def run(args) -> int:
    """Run ``didmem estimate`` with parsed arguments; return the exit status."""
    from ..panel import Panel
    from ..results.saving import compute_saved
    from ..study.estimate import ESTIMATORS

    out = Path(args.out)
    if out.suffix != ".parquet":
        raise ParameterError(f"--out must name a '.parquet' file; got {args.out!r}.")
    memorised_only = [flag for flag, value in (("--model", args.model), ("--sequences",
                      args.sequences)) if value is not None]
    if memorised_only and not args.memorised:
        raise ParameterError(f"{' and '.join(memorised_only)} apply to --memorised only.")
    if args.memorised:
        args.outcome = args.outcome or "memorised"
    elif not args.outcome:
        raise ParameterError("--outcome is required: name the outcome column.")
    cls = ESTIMATORS[args.estimator]
    takes = defaults_of(cls)  # the estimator's own keywords: the flags that apply to it
    for flag, name, unset in (("--base-period", "base_period", None),
                              ("--exposure", "exposure", 1)):
        if getattr(args, name) != unset and name not in takes:
            users = sorted(k for k, c in ESTIMATORS.items() if name in defaults_of(c))
            raise ParameterError(f"{flag} applies to --estimator {' or '.join(users)} only; got "
                                 f"--estimator {args.estimator}.")
    if args.run is not None:
        return _run_runs(args)
    options = {} if args.base_period is None else {"base_period": args.base_period}
    if args.exposure != 1:
        options["exposure"] = args.exposure
    estimator = cls(control_group=args.control_group, n_bootstrap=args.n_bootstrap,
                    seed=args.seed, lower_is_better=args.lower_is_better,
                    outcome=args.outcome, small_sample=not args.r_inference, **options)
    if args.memorised:
        res = _fit_memorised(estimator, args)
    elif Path(args.panel).is_dir():
        res = _fit_folder(estimator, args)
    else:
        if args.runner != "local" or args.address is not None:
            raise ParameterError("--runner ray and --address apply to a folder of parquet "
                                 f"files; got the file {args.panel!r}.")
        frame = read_panel_frame(Path(args.panel))
        cohorts = _cohort_columns(frame.columns, args.cohort, args.exposure)
        panel = Panel(frame, unit=args.unit, time=args.time, cohort=cohorts,
                      outcome=args.outcome, never_treated=args.never_treated,
                      balance=args.balance)
        res = estimator.fit(panel)
    compute_saved(res)  # the summary's and the file's quantities, two at a time
    print(res.summary())
    print(f"\nwrote {res.save(out)}")
    return 0


def _run_runs(args) -> int:
    """``--run COLUMN``: each run's, the pooled and the within-instance profiles, one file."""
    from ..estimators.runs import RunsEstimator
    from ..panel import Panel

    if args.estimator != "did" or args.exposure != 1 or Path(args.panel).is_dir():
        raise ParameterError("--run fits a panel file of several runs with --estimator did and "
                             "one exposure; got " + (f"the folder {args.panel!r}"
                                                     if Path(args.panel).is_dir() else
                                                     f"--estimator {args.estimator}, "
                                                     f"--exposure {args.exposure}") + ".")
    options = {} if args.base_period is None else {"base_period": args.base_period}
    estimator = RunsEstimator(control_group=args.control_group, n_bootstrap=args.n_bootstrap,
                              seed=args.seed, lower_is_better=args.lower_is_better,
                              outcome=args.outcome, small_sample=not args.r_inference,
                              run_trends=args.run_trends, **options)
    frame = read_panel_frame(Path(args.panel))
    panel = Panel(frame, unit=args.unit, time=args.time, cohort=args.cohort,
                  outcome=args.outcome, never_treated=args.never_treated,
                  balance=args.balance, run=args.run)
    res = estimator.fit(panel)
    text = res.summary()
    path = res.save(Path(args.out))
    print(text)
    print(f"\nwrote {path}")
    return 0


def _fit_folder(estimator, args):
    """A folder of parquet files: read in bounded memory (here or as tasks on Ray) and fitted
    from moments by ``estimator.fit``."""
    from ..panel import Panel

    if args.exposure != 1 or args.balance != "error":
        raise ParameterError(
            "A folder of parquet files is fitted from moments: one exposure and a balanced "
            "panel only; read a single file for the rest.")
    columns = dict(unit=args.unit, time=args.time, cohort=args.cohort, outcome=args.outcome,
                   never_treated=args.never_treated)
    if args.runner == "ray":
        from ..runners.ray_tasks import ray_map, ray_session

        with ray_session(args.address) as ray:
            return estimator.fit(Panel.scan(args.panel, **columns, map_items=ray_map(ray)))
    return estimator.fit(Panel.scan(args.panel, **columns))


def _fit_memorised(estimator, args):
    """A folder of memorised-index lists: the pattern counts of the binary panel, fitted."""
    from ..orders.memorised import read_memorised

    if args.exposure != 1 or args.runner != "local":
        raise ParameterError("--memorised is fitted from pattern counts: one exposure and the "
                             "local runner only.")
    if args.outcome != "memorised":
        raise ParameterError(f"--memorised names its outcome 'memorised'; got --outcome "
                             f"{args.outcome!r}.")
    return estimator.fit(read_memorised(args.panel, model=args.model,
                                        batch_size=args.batch_size, sequences=args.sequences))


def cli_message(message: str) -> str:
    """The library's advice in ``message`` in terms of this command's flags."""
    for api, flag in FLAG_ADVICE:
        message = message.replace(api, flag)
    if message.startswith("Missing columns:"):
        message += " Name the columns with --unit, --time, --cohort and --outcome."
    return message


def _cohort_columns(columns, cohort: str, exposure: int) -> list:
    """The cohort columns of exposures 1..``exposure`` (``cohort``, ``cohort_2``, ...), each
    checked to be in the panel file, so that a huge ``--exposure`` is refused at the first
    missing column rather than spelled out."""
    names = [cohort]
    for k in range(2, exposure + 1):
        name = f"{cohort}_{k}"
        if name not in columns:
            raise ParameterError(
                f"--exposure {exposure} needs the cohort columns {cohort}_2 ... "
                f"{cohort}_{exposure}, one per exposure; the panel file has no column {name!r}.")
        names.append(name)
    return names
