"""``didmem estimate``: the profile of a panel file, written as a results parquet."""

from __future__ import annotations

from pathlib import Path

from .._validation import choices_of, defaults_of
from ..errors import ParameterError
from ._options import bootstrap_option, panel_column_options, read_panel_frame, seed_option

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run", "FLAG_ADVICE", "estimator_choices"]

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

JOIN_FOLDER = ("join the folder's files into one parquet file (in Python: pandas.concat("
               "[pandas.read_parquet(f) for f in sorted(pathlib.Path({folder}).glob('*.parquet'))])"
               ".to_parquet('panel.parquet')) and pass that file")
"""What to do with a folder that the folder route cannot fit: read it as one file."""

FOLDER_ADVICE = (
    ("load a panel with holes in memory (didmem.Panel(..., balance='keep')).",
     f"{JOIN_FOLDER.format(folder='DIR')} (DIR: the folder) with --balance keep (every "
     "observed row, as R did's allow_unbalanced_panel) or --balance drop_incomplete_units."),
)
"""The folder reader's advice on the command line (a folder with holes)."""


def estimator_choices() -> tuple:
    """``--estimator``'s choices: a study's estimators (:data:`didmem.study.estimate.ESTIMATORS`,
    ``"random-timing"`` among them), then the command line's own, whose result is no profile
    a study reports: ``"membership"`` (:class:`~didmem.MembershipInferenceEstimator`)."""
    from ..study.estimate import ESTIMATORS

    return (*ESTIMATORS, "membership")


RANDOM_TIMING_FLAGS = (("--beta", "beta", None), ("--fisher", "n_fisher", 0),
                       ("--randomised", "randomised", "training"))
"""``--estimator random-timing``'s own options: (flag, keyword, value when not given)."""


def _beta(text: str):
    """``--beta``: ``efficient`` (None, the plug-in efficient coefficient) or a number."""
    import argparse

    if text == "efficient":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'efficient' or a number (1: Callaway & "
                                         f"Sant'Anna, 0: the difference in means), got "
                                         f"{text!r}") from None


def _control_option(parser) -> None:
    """``--control``: the choices of every estimator it configures (did and difference,
    random-timing); not given, each estimator's own default."""
    from .._validation import add_option
    from ..estimators.did import DiDEstimator
    from ..estimators.random_timing import RandomTimingEstimator

    choices = choices_of(DiDEstimator, "control_group")
    choices += [c for c in choices_of(RandomTimingEstimator, "control_group")
                if c not in choices]
    add_option(parser, DiDEstimator, "control_group", "--control", default=None,
               choices=choices,
               help="control group (default: never_treated for did and difference, "
                    "not_yet_treated for random-timing; last_treated: random-timing only)")


def _random_timing_options(parser) -> None:
    """``--beta``, ``--fisher`` and ``--randomised`` from :class:`~didmem.RandomTimingEstimator`'s
    declarations (its module imports its numerics only at fit)."""
    from .._validation import add_option
    from ..estimators.random_timing import RandomTimingEstimator

    add_option(parser, RandomTimingEstimator, "beta", type=_beta,
               metavar="{efficient,1,0,B}",
               help="--estimator random-timing only: the coefficient on the pre-treatment "
                    "difference; efficient (the default: the plug-in efficient one), 1 "
                    "(Callaway & Sant'Anna; with --control last_treated Sun & Abraham) or 0 "
                    "(the difference in means)")
    add_option(parser, RandomTimingEstimator, "n_fisher", "--fisher", metavar="N",
               help="--estimator random-timing only: N permutations of the Fisher "
                    "randomisation test (exact p-values for the sharp null of no effect); a "
                    "panel file only, not a folder")
    add_option(parser, RandomTimingEstimator, "randomised",
               help="--estimator random-timing only: whose cohorts the training order "
                    "assigned at random: the training instances among themselves, or all "
                    "(the validation split was random too)")


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
    add_option(parser, EstimateSettings, "estimator", choices=list(estimator_choices()),
               help="difference-in-differences, the plain difference, Roth & Sant'Anna's "
                    "efficient estimator under random timing (design-based standard errors; "
                    "its band from --n-bootstrap Gaussian draws), or membership "
                    "inference (the outcome is the attack's score: its AUC per checkpoint "
                    "and implied profile)")
    _control_option(parser)
    _random_timing_options(parser)
    parser.add_argument("--base-period", choices=choices_of(DiDEstimator, "base_period"),
                        help="did only: the pre-treatment cells' base period (default: varying); "
                             "'didmem sensitivity' needs universal")
    panel_column_options(parser)
    add_option(parser, DiDEstimator, "exposure", metavar="K",
               help="did only: the effect of the K-th exposure of each instance, from the "
                    "cohort columns COHORT, COHORT_2, ..., COHORT_K (the --cohort name with "
                    "_2 ... _K), with controls of the same exposure history")
    parser.add_argument("--by", default=None, metavar="FEATURE",
                        help="did only: a profile per subgroup of this instance feature (a "
                             "column constant within each unit), each with its own controls; "
                             "writes the subgroups' profiles to OUT and their differences and "
                             "equality tests beside it (OUT's stem + .differences.parquet, "
                             ".equality.parquet)")
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
    # its choices are checked by the estimator at fit (reading its declaration here would
    # load the estimator's numerics for every 'didmem estimate --help')
    parser.add_argument("--members", default=None, metavar="{trained,all}",
                        help="--estimator membership only: members at checkpoint c are the "
                             "instances trained on by c (trained, the default), or every "
                             "training instance (all: MIMIR's split)")
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
    if args.by is not None:
        from ._estimate_by import run_by

        return run_by(args, RANDOM_TIMING_FLAGS)
    if args.estimator == "membership" or args.members is not None:
        return _run_membership(args)
    if args.estimator == "random-timing":
        return _run_random_timing(args)
    given = [flag for flag, name, unset in RANDOM_TIMING_FLAGS if getattr(args, name) != unset]
    if given:
        raise ParameterError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} "
                             f"to --estimator random-timing only; got --estimator "
                             f"{args.estimator}.")
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
    if args.control_group is not None:
        options["control_group"] = args.control_group
    estimator = cls(n_bootstrap=args.n_bootstrap,
                    seed=args.seed, lower_is_better=args.lower_is_better,
                    outcome=args.outcome, small_sample=not args.r_inference, **options)
    if args.memorised:
        res = _fit_memorised(estimator, args)
    elif Path(args.panel).is_dir():
        res = _fit_folder(estimator, args)
    else:
        panel = _file_panel(
            args, lambda columns: _cohort_columns(columns, args.cohort, args.exposure))
        res = estimator.fit(panel)
    compute_saved(res)  # the summary's and the file's quantities, two at a time
    print(res.summary())
    if not res.settings.source and _route(args):  # until the fit records it in the result
        print(f"  source: {_route(args)}")
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
    if args.control_group is not None:
        options["control_group"] = args.control_group
    estimator = RunsEstimator(n_bootstrap=args.n_bootstrap,
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


def _route(args) -> str:
    """Where the data came from and by which route, in words ("" for a panel file)."""
    if args.memorised:
        return (f"the memorised-index lists in {args.panel!r}, fitted from the counts of "
                "their patterns")
    if not Path(args.panel).is_dir():
        return ""
    where = ("read here" if args.runner == "local" else
             "read as tasks on Ray " + (f"at {args.address!r}" if args.address
                                        else "started on this machine"))
    return (f"the parquet folder {args.panel!r}, {where} in bounded memory and fitted from its "
            "moments")


def _run_random_timing(args) -> int:
    """``--estimator random-timing``: Roth & Sant'Anna's estimator, its design-based standard
    errors and, with ``--fisher N``, the Fisher randomisation test, on a panel file or a
    folder (from its moments: no Fisher test there)."""
    from ..estimators.random_timing import RandomTimingEstimator

    given = [flag for flag, value, unset in (
        ("--base-period", args.base_period, None), ("--exposure", args.exposure, 1),
        ("--run", args.run, None), ("--r-inference", args.r_inference, False),
        ("--memorised", args.memorised, False)) if value != unset]
    if given:
        raise ParameterError(f"{', '.join(given)} do not apply to --estimator random-timing "
                             "(Roth & Sant'Anna's estimator of one balanced panel, "
                             "first exposure); drop them, or use --estimator did.")
    folder = Path(args.panel).is_dir()
    if folder and args.n_fisher:
        raise ParameterError(f"--fisher permutes the instances' outcome paths, which a folder's "
                             f"moments do not keep; got the folder {args.panel!r}. Drop --fisher "
                             f"(the design-based standard errors need only the moments), or "
                             f"{JOIN_FOLDER.format(folder=repr(str(args.panel)))}.")
    options = {} if args.control_group is None else {"control_group": args.control_group}
    estimator = RandomTimingEstimator(
        beta=args.beta, randomised=args.randomised, n_fisher=args.n_fisher,
        n_draws=args.n_bootstrap, seed=args.seed, outcome=args.outcome,
        lower_is_better=args.lower_is_better, **options)
    if folder:
        res = _fit_folder(estimator, args)
    else:
        panel = _file_panel(args, lambda columns: args.cohort)
        res = estimator.fit(panel)
    print(res.summary())
    if _route(args):
        print(f"  source: {_route(args)}")
    print(f"\nwrote {res.save(Path(args.out))}")
    return 0


def _run_membership(args) -> int:
    """``--estimator membership``: the AUC per checkpoint and implied profile of a score."""
    from ..estimators.membership import MembershipInferenceEstimator
    from ..panel import Panel

    if args.estimator != "membership":
        raise ParameterError(f"--members applies to --estimator membership only; got "
                             f"--estimator {args.estimator}.")
    given = [flag for flag, value, unset in (
        ("--control", args.control_group, None),
        ("--base-period", args.base_period, None), ("--exposure", args.exposure, 1),
        ("--run", args.run, None), ("--r-inference", args.r_inference, False),
        ("--memorised", args.memorised, False), ("--runner", args.runner, "local"),
        ("--address", args.address, None),
        *((flag, getattr(args, name), unset) for flag, name, unset in RANDOM_TIMING_FLAGS))
        if value != unset]
    if given:
        raise ParameterError(f"{', '.join(given)} do not apply to --estimator membership (it "
                             "compares members' and non-members' scores at each checkpoint of "
                             "one panel file); drop them, or use --estimator did.")
    if Path(args.panel).is_dir():
        raise ParameterError(f"--estimator membership reads one panel file (.parquet or .csv); "
                             f"got the folder {args.panel!r}. Join its files into one (for "
                             "example pandas.concat of pandas.read_parquet of each) and pass "
                             "that file.")
    frame = read_panel_frame(Path(args.panel))
    panel = Panel(frame, unit=args.unit, time=args.time, cohort=args.cohort,
                  outcome=args.outcome, never_treated=args.never_treated, balance=args.balance)
    options = {} if args.members is None else {"members": args.members}
    res = MembershipInferenceEstimator(score=args.outcome, lower_is_better=args.lower_is_better,
                                       **options).fit(panel)
    text = res.summary()
    path = res.save(Path(args.out))
    print(text)
    print(f"\nwrote {path}")
    return 0


def _file_panel(args, cohort_of):
    """The panel of the file ``args.panel`` (the cohort column(s) ``cohort_of(columns)``);
    Ray is refused here, as it reads folders only."""
    from ..panel import Panel

    if args.runner != "local" or args.address is not None:
        raise ParameterError("--runner ray and --address apply to a folder of parquet "
                             f"files; got the file {args.panel!r}.")
    frame = read_panel_frame(Path(args.panel))
    return Panel(frame, unit=args.unit, time=args.time, cohort=cohort_of(frame.columns),
                 outcome=args.outcome, never_treated=args.never_treated, balance=args.balance)

def _fit_folder(estimator, args):
    """A folder of parquet files: read in bounded memory (here or as tasks on Ray) and fitted
    from moments by ``estimator.fit``."""
    from ..panel import Panel

    if args.exposure != 1 or args.balance != "error":
        given = [f"--{n.replace('_', '-')} {v}" for n, v, unset in (
            ("exposure", args.exposure, 1), ("balance", args.balance, "error")) if v != unset]
        raise ParameterError(
            f"A folder of parquet files is read in bounded memory and fitted from moments (one "
            f"exposure, a balanced panel); for {' '.join(given)} "
            f"{JOIN_FOLDER.format(folder=repr(str(args.panel)))} with the same options.")
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
    import re

    for api, flag in FLAG_ADVICE + FOLDER_ADVICE:
        message = message.replace(api, flag)
    if "from moments has Gaussian multipliers only" in message and "--r-inference" not in message:
        message += (" On the command line --r-inference asks for R's Rademacher multipliers: on a "
                    "folder pass --n-bootstrap 0 with it (R's analytic standard errors), drop "
                    f"--r-inference (the default band), or {JOIN_FOLDER.format(folder='DIR')} "
                    "(DIR: the folder) with the same options.")
    csv = re.match(r"File '([^']+\.(?:csv|CSV|tsv|txt))' is not a readable parquet file", message)
    if csv:  # a CSV among a folder's parquet parts
        message = (f"The folder holds the text file {csv.group(1)!r}; a folder is read as "
                   "parquet files only. Convert it (in Python: pandas.read_csv(path).to_parquet("
                   "path with the suffix .parquet)) and move the text file out of the folder, or "
                   "pass a CSV panel as one file (didmem estimate FILE.csv).")
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
