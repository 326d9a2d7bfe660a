"""``didmem plan``: power, minimum detectable effect and cost of study designs.

One subcommand in one module (``add_arguments`` and ``main_from_args``), so that it moves
as it is into the ``didmem/cli/`` package.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .errors import ParameterError

HELP = "plan a study: power, minimum detectable effect and scoring cost per design"
DESCRIPTION = (
    "Plan a memorisation study before scoring it. From a pilot panel (--pilot; simulated: "
    "resample its instances and fit the estimator) or from stated assumptions (--cohorts, "
    "--checkpoints, --effect, --outcome-sd, ...; analytic), print for every design the power "
    "for the target under the estimator's band, the minimum detectable effect and the "
    "scoring cost, recommend the cheapest design reaching --power, and write plan.csv and "
    "plan.png (power and cost against instances per cohort) to --out.")


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ParameterError(f"expected comma-separated integers, got {text!r}") from None


def add_arguments(p) -> None:
    src = p.add_argument_group("source (a pilot, or assumptions)")
    src.add_argument("--pilot", help="pilot panel file (.parquet or .csv), one row per unit "
                                     "and checkpoint")
    src.add_argument("--outcome", help="the pilot's outcome column")
    src.add_argument("--unit", default="unit", help="unit column (default: %(default)s)")
    src.add_argument("--time", default="time", help="checkpoint column (default: %(default)s)")
    src.add_argument("--cohort", default="cohort", help="cohort column (default: %(default)s)")
    src.add_argument("--lower-is-better", action="store_true",
                     help="the outcome is lower-is-better: flip its sign")
    src.add_argument("--cohorts", type=int, help="assumed number of cohorts (macro-batches)")
    src.add_argument("--checkpoints", type=int, help="assumed number of checkpoints")
    src.add_argument("--outcome-sd", type=float, default=1.0,
                     help="assumed outcome SD at a checkpoint (default: %(default)s)")
    src.add_argument("--unit-share", type=float, default=0.0,
                     help="assumed share of variance from instance effects (default: %(default)s)")
    src.add_argument("--ar1", type=float, default=0.0,
                     help="assumed AR(1) correlation of the rest (default: %(default)s)")
    des = p.add_argument_group("designs")
    des.add_argument("--units", default="10,20,50,100",
                     help="instances per cohort, comma-separated (default: %(default)s)")
    des.add_argument("--validation", help="validation instances, comma-separated (default: the "
                                          "pilot's, or 2000)")
    des.add_argument("--checkpoint-every", default="1", help="keep every k-th checkpoint, "
                                                             "comma-separated (default: 1)")
    des.add_argument("--target", choices=["instantaneous", "persistent", "overall"],
                     default="instantaneous", help="what to detect (default: %(default)s)")
    des.add_argument("--effect", type=float, help="effect to detect (default with a pilot: "
                                                  "the pilot's own estimates)")
    des.add_argument("--power", type=float, default=0.8, help="target power (default: %(default)s)")
    des.add_argument("--simulations", type=int, default=200,
                     help="simulated studies per design (default: %(default)s)")
    des.add_argument("--draws", type=int, default=1000,
                     help="bootstrap draws of each simulated fit (default: %(default)s)")
    des.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    des.add_argument("--tokens-per-instance", type=int, default=2049,
                     help="tokens scored per instance and checkpoint (default: %(default)s)")
    des.add_argument("--tokens-per-second", type=float, help="scoring throughput, for GPU hours")
    des.add_argument("--out", default="didmem-plan", help="output directory (default: %(default)s)")


def main_from_args(args) -> int:
    import didmem

    if args.pilot:
        if not args.outcome:
            raise ParameterError("--pilot needs --outcome (the outcome column).")
        path = Path(args.pilot)
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
        source = didmem.Panel(frame, unit=args.unit, time=args.time, cohort=args.cohort,
                              outcome=args.outcome)
    else:
        if args.cohorts is None or args.checkpoints is None or args.effect is None:
            raise ParameterError("Give --pilot FILE, or the assumptions --cohorts, "
                                 "--checkpoints and --effect.")
        source = didmem.Assumptions(n_cohorts=args.cohorts, n_checkpoints=args.checkpoints,
                                    outcome_sd=args.outcome_sd, unit_share=args.unit_share,
                                    ar1=args.ar1)
    estimator = didmem.DiDEstimator(n_bootstrap=args.draws, lower_is_better=args.lower_is_better)
    plan = didmem.plan_design(
        source, units_per_cohort=_ints(args.units),
        n_validation=None if args.validation is None else _ints(args.validation),
        checkpoint_every=_ints(args.checkpoint_every), target=args.target, effect=args.effect,
        estimator=estimator, n_simulations=args.simulations, random_state=args.seed,
        tokens_per_instance=args.tokens_per_instance, tokens_per_second=args.tokens_per_second)
    table = plan.to_frame()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "plan.csv", index=False)
    print(f"{plan.target} memorisation, {plan.method} power ({plan.effect_source} effect); "
          f"mde at power {plan.mde_power:g}:")
    cols = ["units_per_cohort", "n_validation", "checkpoint_every", "checkpoints", "tokens",
            "gpu_hours", "effect", "power", "power_mc_error", "mde"]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    try:
        best = plan.recommend(args.power)
        print(f"\nrecommended (cheapest with power >= {args.power:g}): "
              f"{int(best['units_per_cohort'])} instances per cohort, "
              f"{int(best['n_validation'])} validation, every {int(best['checkpoint_every'])} "
              f"checkpoint(s): {best['tokens']:.3g} tokens, power {best['power']:.3f}")
    except ParameterError as exc:
        print(f"\n{exc}")
    written = [out / "plan.csv"]
    try:
        from .plotting import plot_plan

        ax = plot_plan(plan, power=args.power)
        ax.figure.savefig(out / "plan.png", dpi=110)
        written.append(out / "plan.png")
        import matplotlib.pyplot as plt

        plt.close(ax.figure)
    except didmem.MissingDependencyError as exc:
        print(f"no figure: {exc}")
    print("wrote:\n" + "\n".join(f"  {p}" for p in written))
    return 0
