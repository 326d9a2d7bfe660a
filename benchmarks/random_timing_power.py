"""Instances needed for 80% power: difference-in-differences vs random timing (issue 47).

``didmem.power_analysis`` with ``target="overall"`` (the overall effect's interval) on a
pilot panel from :func:`didmem.datasets.simulate_panel` (3 cohorts of 30 + 60 validation
instances, 5 checkpoints), for three estimators with the same seed (the same draws of pilot
residuals; the random-timing plan's population has exchangeable group means, its null):

* ``DiD``: ``DiDEstimator()`` (never-treated controls, the default; analytic SEs);
* ``DiD nyt``: ``DiDEstimator(control_group="not_yet_treated")``;
* ``random timing``: ``RandomTimingEstimator()`` (the plug-in efficient beta, not-yet-treated
  controls, the interval from the Neyman standard error).

Designs: ``u`` instances per cohort and ``2u`` validation instances (``instances = 3u +
2u``), ``u`` on a grid; the instances needed for 80% power are interpolated linearly
between the two grid designs whose power brackets 0.8 (their powers and Monte Carlo errors
are printed). Two data-generating processes: ``weak`` (instance effects small against the
noise: unit_sd 0.3, noise_sd 1.0, effect 0.3) and ``persistent`` (large persistent instance
effects: unit_sd 2.0, noise_sd 0.5, effect 0.2).

    python benchmarks/random_timing_power.py [--sims 150] [--seed 5]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import didmem
from didmem.power import power_analysis

DGPS = {"weak": dict(unit_sd=0.3, noise_sd=1.0, effect=0.3),
        "persistent": dict(unit_sd=2.0, noise_sd=0.5, effect=0.2)}
GRID = (4, 6, 8, 10, 14, 20, 28, 40, 56, 80)


def pilot(unit_sd, noise_sd, seed=1):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=30, n_never_treated=60,
                                           n_times=5, unit_sd=unit_sd, noise_sd=noise_sd,
                                           seed=seed)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


def needed(panel, estimator, effect, sims, seed, target_power=0.8):
    """(instances at 80% power, the bracketing rows' (instances, power, MC error))."""
    rows = []
    for u in GRID:
        t = power_analysis(panel, estimator=estimator, units_per_cohort=u, n_validation=2 * u,
                           target="overall", effect=effect, n_simulations=sims,
                           seed=seed).to_frame().iloc[0]
        rows.append((int(t["instances"]), float(t["power"]), float(t["power_mc_error"])))
        if t["power"] >= target_power:
            break
    if rows[-1][1] < target_power:
        return np.nan, rows[-1:]
    if len(rows) == 1:
        return float(rows[0][0]), rows
    (n0, p0, _), (n1, p1, _) = rows[-2], rows[-1]
    return n0 + (target_power - p0) / (p1 - p0) * (n1 - n0), rows[-2:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=150)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    estimators = {"DiD": didmem.DiDEstimator(n_bootstrap=0),
                  "DiD nyt": didmem.DiDEstimator(n_bootstrap=0,
                                                 control_group="not_yet_treated"),
                  "random timing": didmem.RandomTimingEstimator()}
    print(f"# {platform.processor() or platform.machine()}, {args.sims} simulated studies per "
          f"design, seed {args.seed}")
    print("| DGP | effect | estimator | instances for 80% power | bracketing designs: "
          "instances, power (MC error) | time |")
    print("|---|---:|---|---:|---|---:|")
    for name, dgp in DGPS.items():
        panel = pilot(dgp["unit_sd"], dgp["noise_sd"])
        for label, est in estimators.items():
            start = time.perf_counter()
            n, rows = needed(panel, est, dgp["effect"], args.sims, args.seed)
            took = time.perf_counter() - start
            brackets = "; ".join(f"{i}: {p:.3f} ({m:.3f})" for i, p, m in rows)
            print(f"| {name} | {dgp['effect']} | {label} | {n:.0f} | {brackets} | "
                  f"{took:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
