"""
How robust is a memorisation profile? The sensitivity analysis on the lab
=========================================================================

The lab knows the exact effect of training on its instances, so the sensitivity analysis of
Rambachan & Roth (2023) can be set beside the truth. This example trains two lab runs at the
demo scale (tiny GPT-NeoX models on this CPU, each with an exact counterfactual run per
cohort): one whose validation instances come from the training distribution, and one whose
validation instances' trends bend away from the training instances' (``validation_shift``),
where parallel trends fail. On each it fits DiD with a universal base period and computes, for
instantaneous memorisation (event time 0), the original interval and the intervals under
relative magnitudes and smoothness, with the breakdown values, and says which intervals cover
the exact truth. Run::

    python examples/sensitivity_on_the_lab.py --out lab-sensitivity

It took 39.5 s on this project's 2-core machine at a load of about 1 (2026-11-23,
benchmarks/RESULTS.md) and writes ``sensitivity.csv`` and one figure per
run into ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

import didmem
from didmem import lab

METRIC = "mean_token_loglik"
RUNS = {"same distribution": {}, "bent validation trends": {"validation_shift": 0.5}}
# Mbar is relative; M is in outcome units (mean token log-likelihood) per period squared
BOUNDS = {"relative_magnitudes": [0.0, 0.25, 0.5, 1.0, 2.0],
          "smoothness": [0.0, 0.005, 0.01, 0.02, 0.05, 0.1]}


def truth_at_event_time_0(run) -> float:
    """The exact effect at event time 0, cohorts weighted by their sizes (as the dynamic
    aggregation weights them)."""
    t = run.truth[(run.truth["metric"] == METRIC) & (run.truth["time"] == run.truth["cohort"])]
    return float(np.average(t["tau"], weights=t["n_units"]))


def event_study(run):
    panel = didmem.Panel(run.panel, unit="unit", time="time", cohort="cohort", outcome=METRIC)
    res = didmem.DiDEstimator(base_period="universal", n_bootstrap=0).fit(panel)
    return res.aggregate("dynamic")


def analyse(name, run, out: Path, seed: int):
    ev = event_study(run)
    truth = truth_at_event_time_0(run)
    rows = []
    for restriction, ms in BOUNDS.items():
        s = didmem.sensitivity(ev, restriction=restriction, m=ms, event_time=0, seed=seed)
        frame = s.to_frame().assign(run=name, restriction=restriction, truth=truth,
                                    breakdown=s.breakdown)
        frame["covers_truth"] = (frame["lower"] <= truth) & (truth <= frame["upper"])
        rows.append(frame)
        _figure(s, truth, out / f"{name.replace(' ', '_')}_{restriction}.png")
    return pd.concat(rows, ignore_index=True)


def _figure(s, truth, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = didmem.results.plotting.plot_sensitivity(s)
    ax.axhline(truth, color="tab:red", linewidth=1, label="exact truth")
    ax.legend(fontsize=8)
    ax.figure.savefig(path, dpi=110)
    plt.close(ax.figure)


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--out", default="lab-sensitivity", help="directory for the lab runs, "
                                                                 "the table and the figures")
    parser.add_argument("--seed", type=int, default=0, help="seed of the lab runs")
    parser.add_argument("--quick", action="store_true",
                        help="the quick lab scale (a smoke run in seconds; few periods)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables = []
    for name, changes in RUNS.items():
        run = lab.run(out / name.replace(" ", "_"), quick=args.quick, seed=args.seed,
                      **changes)
        tables.append(analyse(name, run, out, args.seed))
    table = pd.concat(tables, ignore_index=True)
    table.to_csv(out / "sensitivity.csv", index=False)
    with pd.option_context("display.width", 120):
        for (name, restriction), part in table.groupby(["run", "restriction"], sort=False):
            print(f"\n{name}, {restriction}: exact truth {part['truth'].iloc[0]:.4f}, "
                  f"breakdown {part['breakdown'].iloc[0]:.4g}")
            print(part[["m", "lower", "upper", "method", "covers_truth"]].to_string(
                index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"\nwrote {out / 'sensitivity.csv'} and the figures beside it")
    return table


if __name__ == "__main__":
    main()
