"""``didmem power``: power, minimum detectable effect and cost of study designs.

One subcommand in one module, in the shape of every module of :mod:`didmem.cli`.
"""

from __future__ import annotations

from pathlib import Path

from .._validation import check, constraints_of, defaults_of
from ..errors import ParameterError
from ._options import (bootstrap_option, panel_column_options, progress_option,
                       read_panel_frame, seed_option)

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run", "OUTPUTS"]

PLANNED = {"did": "DiDEstimator", "random-timing": "RandomTimingEstimator"}
"""``--estimator``: the estimators :func:`didmem.power_analysis` plans, by their command-line
names (those of ``didmem estimate --estimator``) and class names."""

OUTPUTS = ("power.csv", "power.png")
"""The files ``didmem power`` writes to ``--out``."""

HELP = "power analysis of a study: power, minimum detectable effect and scoring cost per design"
DESCRIPTION = (
    "Plan a memorisation study before scoring it. From a pilot panel (--pilot; simulated: "
    "resample its instances and fit the estimator) or from stated assumptions (--cohorts, "
    "--checkpoints, --effect, --outcome-sd, ...; analytic), print for every design the power "
    "for the target under the estimator's band, the minimum detectable effect and the "
    "scoring cost, recommend the cheapest design reaching --power, and write power.csv and "
    "power.png (power and cost against instances per cohort) to --out.")


def _ints(text) -> list[int]:
    """Comma-separated integers (an option's ``type``: argparse names the option when it
    refuses; a list already read passes through)."""
    import argparse

    if isinstance(text, list):
        return text
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got "
                                         f"{text!r}") from None


def add_arguments(p) -> None:
    """Add the ``didmem power`` options to ``p``."""
    from .._validation import add_option
    from ..power import Assumptions, PowerAnalysis, power_analysis

    src = p.add_argument_group("source (a pilot, or assumptions)")
    src.add_argument("--pilot", help="pilot panel file (.parquet or .csv), one row per unit "
                                     "and checkpoint")
    src.add_argument("--outcome", help="the pilot's outcome column")
    panel_column_options(src)
    src.add_argument("--lower-is-better", action="store_true",
                     help="the outcome is lower-is-better: flip its sign")
    src.add_argument("--cohorts", type=int, help="assumed number of cohorts (macro-batches)")
    src.add_argument("--checkpoints", type=int, help="assumed number of checkpoints")
    add_option(src, Assumptions, "outcome_sd", type=float,
               help="assumed outcome SD at a checkpoint")
    add_option(src, Assumptions, "unit_share", type=float,
               help="assumed share of variance from instance effects")
    add_option(src, Assumptions, "ar1", type=float,
               help="assumed AR(1) correlation of the rest")
    des = p.add_argument_group("designs")
    des.add_argument("--units", default="10,20,50,100", type=_ints,
                     help="instances per cohort, comma-separated (default: %(default)s)")
    des.add_argument("--validation", type=_ints,
                     help="validation instances, comma-separated (default: the pilot's, or 2000)")
    des.add_argument("--checkpoint-every", default="1", type=_ints,
                     help="keep every k-th checkpoint, comma-separated (default: 1)")
    add_option(des, power_analysis, "target", help="what to detect")
    des.add_argument("--estimator", choices=list(PLANNED), default=None,
                     help="the estimator the study will use (default: did): "
                          "difference-in-differences, or Roth & Sant'Anna's efficient estimator "
                          "under random timing (a shuffled training order; needs --pilot and "
                          "--target overall), to see how many fewer instances it needs")
    des.add_argument("--effect", type=float, help="effect to detect (default with a pilot: "
                                                  "the pilot's own estimates)")
    add_option(des, PowerAnalysis.recommend, "power", type=float, help="target power")
    add_option(des, power_analysis, "n_simulations", "--simulations", type=int,
               help="simulated studies per design")
    bootstrap_option(des)
    seed_option(des)
    add_option(des, power_analysis, "tokens_per_instance", type=int,
               help="tokens scored per instance and checkpoint (a lab run's pilot: its seq_len)")
    des.add_argument("--tokens-per-second", type=float, help="scoring throughput, for GPU hours")
    des.add_argument("--out", default="didmem-power", help="output directory (default: %(default)s)")
    des.add_argument("--overwrite", action="store_true",
                     help="replace the power.csv and power.png of an earlier run in --out")
    progress_option(des)


def _tokens_per_instance(args) -> int:
    """The tokens scored per instance: the option, or a lab pilot's instance length."""
    import inspect
    import json

    from ..power import power_analysis

    default = inspect.signature(power_analysis).parameters["tokens_per_instance"].default
    manifest = Path(args.pilot).parent / "manifest.json" if args.pilot else None
    if args.tokens_per_instance != default or manifest is None or not manifest.exists():
        return args.tokens_per_instance
    try:  # a lab run's panel: its instances are seq_len tokens long
        return int(json.loads(manifest.read_text())["settings"]["config"]["seq_len"])
    except (KeyError, TypeError, ValueError):
        return args.tokens_per_instance


def run(args) -> int:
    """Run ``didmem power`` with parsed arguments; return the exit status."""
    import didmem
    from ..power import Assumptions, PowerAnalysis

    # the recommendation's power is checked before the (long) simulation, not after it
    check("didmem power", "power", args.power, constraints_of(PowerAnalysis.recommend)["power"])
    if args.pilot:
        if not args.outcome:
            raise ParameterError("--pilot needs --outcome (the outcome column).")
        stated = [f"--{n.replace('_', '-')}" for n in ("cohorts", "checkpoints")
                  if getattr(args, n) is not None]
        stated += [f"--{n.replace('_', '-')}" for n in ("outcome_sd", "unit_share", "ar1")
                   if getattr(args, n) != defaults_of(Assumptions)[n]]
        if stated:
            raise ParameterError(f"--pilot takes the outcome's structure from the pilot; "
                                 f"{', '.join(stated)} would be ignored: give either --pilot "
                                 "or the assumptions.")
        frame = read_panel_frame(args.pilot, option="--pilot")
        source = didmem.Panel(frame, unit=args.unit, time=args.time, cohort=args.cohort,
                              outcome=args.outcome)
    else:
        if args.cohorts is None or args.checkpoints is None or args.effect is None:
            raise ParameterError("Give --pilot FILE, or the assumptions --cohorts, "
                                 "--checkpoints and --effect.")
        source = didmem.Assumptions(n_cohorts=args.cohorts, n_checkpoints=args.checkpoints,
                                    outcome_sd=args.outcome_sd, unit_share=args.unit_share,
                                    ar1=args.ar1)
    earlier = [name for name in OUTPUTS if (Path(args.out) / name).exists()]
    if earlier and not args.overwrite:  # before the (long) simulation, after the source's check
        raise ParameterError(f"The option --out {args.out!r} holds {' and '.join(earlier)} of an "
                             "earlier run; pass --overwrite to replace them, or choose another "
                             "--out.")
    tokens = _tokens_per_instance(args)
    if tokens is None:  # power_analysis's default: Pythia's rows
        from ..power import PAPER_TOKENS_PER_INSTANCE

        tokens = PAPER_TOKENS_PER_INSTANCE
    if args.estimator == "random-timing":  # its overall interval needs no bootstrap
        if not args.pilot:
            raise ParameterError("--estimator random-timing plans from a pilot (--pilot FILE): "
                                 "it resamples the pilot's instances and fits the estimator.")
        if args.target != "overall":
            raise ParameterError(f"--estimator random-timing plans --target overall (the "
                                 f"overall effect's interval); got --target {args.target}.")
        estimator = didmem.RandomTimingEstimator(lower_is_better=args.lower_is_better)
    else:
        estimator = didmem.DiDEstimator(n_bootstrap=args.n_bootstrap,
                                        lower_is_better=args.lower_is_better)
    n_designs = len(_ints(args.units)) * len(_ints(args.checkpoint_every)) * (
        1 if args.validation is None else len(_ints(args.validation)))
    print(f"didmem power: {n_designs} design(s), "
          + (f"{args.n_simulations} simulated studies each resampled from the pilot "
             f"({n_designs * args.n_simulations} fits; --progress shows how far)"
             if args.pilot else "analytic") + " ...", flush=True)
    analysis = didmem.power_analysis(
        source, units_per_cohort=_ints(args.units),
        n_validation=None if args.validation is None else _ints(args.validation),
        checkpoint_every=_ints(args.checkpoint_every), target=args.target, effect=args.effect,
        estimator=estimator, n_simulations=args.n_simulations, seed=args.seed,
        tokens_per_instance=tokens, tokens_per_second=args.tokens_per_second,
        progress=args.progress)
    table = analysis.to_frame()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "power.csv", index=False)
    print(f"{type(estimator).__name__}: "
          f"{analysis.target} memorisation, {analysis.method} power ({analysis.effect_source} effect); "
          f"mde at power {analysis.mde_power:g}:")
    cols = ["units_per_cohort", "n_validation", "checkpoint_every", "checkpoints", "tokens",
            "gpu_hours", "effect", "power", "power_mc_error", "mde"]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"tokens: {tokens} per instance and checkpoint (--tokens-per-instance)"
          + ("; gpu_hours: give --tokens-per-second, the scoring throughput, to fill it"
             if args.tokens_per_second is None else ""))
    try:
        best = analysis.recommend(args.power)
        print(f"\nrecommended (cheapest with power >= {args.power:g}): "
              f"{int(best['units_per_cohort'])} instances per cohort, "
              f"{int(best['n_validation'])} validation, every {int(best['checkpoint_every'])} "
              f"checkpoint(s): {best['tokens']:.3g} tokens, power {best['power']:.3f}")
    except ParameterError as exc:  # no design reaches the power: the table is still written
        print(f"\n{exc}")
    written = [out / "power.csv"]
    try:
        from ..results.plotting import plot_power_analysis

        ax = plot_power_analysis(analysis, power=args.power)
        ax.figure.savefig(out / "power.png", dpi=110)
        written.append(out / "power.png")
        import matplotlib.pyplot as plt

        plt.close(ax.figure)
    except didmem.MissingDependencyError as exc:
        print(f"no figure: {exc}")
    print("wrote:\n" + "\n".join(f"  {p}" for p in written))
    return 0
