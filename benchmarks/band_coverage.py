"""Monte Carlo coverage of didmem's simultaneous bands on panels with a known profile.

Each replication simulates a memorisation-like panel (``didmem.datasets.simulate_panel``),
fits ``DiDEstimator`` with a multiplier bootstrap and records whether the simultaneous band
covers the whole true profile (every cell, pre-treatment cells included, whose truth is 0).

Usage::

    python benchmarks/band_coverage.py --reps 400 --units 200            # the standard check
    python benchmarks/band_coverage.py --reps 400 --units 15 30 60 --multipliers rademacher mammen
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

import didmem


def coverage(n_units: int, multiplier: str, reps: int, *, n_cohorts=4, n_never=None,
             n_times=6, n_bootstrap=1000, control_group="never_treated", seed=0,
             noise_sd=1.0, effect_sd=0.0) -> dict:
    """Share of replications whose simultaneous band covers every true cell."""
    n_never = 2 * n_units if n_never is None else n_never
    hits = pointwise_hits = 0
    crits = []
    rng = np.random.default_rng(seed)
    for _ in range(reps):
        df, truth = didmem.datasets.simulate_panel(
            n_cohorts=n_cohorts, units_per_cohort=n_units, n_never_treated=n_never,
            n_times=n_times, noise_sd=noise_sd, effect_sd=effect_sd,
            seed=int(rng.integers(2**63)))
        panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", didmem.SmallCohortWarning)
            res = didmem.DiDEstimator(n_bootstrap=n_bootstrap, multiplier=multiplier,
                                      control_group=control_group,
                                      random_state=int(rng.integers(2**63))).fit(panel)
        frame = res.to_frame().merge(truth, on=["cohort", "time"], how="left")
        # pre-treatment cells (varying base) compare t with t-1: their truth is 0
        tau = np.where(frame["post"], frame["tau"], 0.0)
        inside = (frame["ci_lower"] <= tau) & (tau <= frame["ci_upper"])
        hits += bool(inside.all())
        z = 1.959963984540054
        pointwise = (np.abs(frame["estimate"] - tau) <= z * frame["std_error"])
        pointwise_hits += pointwise.mean()
        crits.append(res.critical_value)
    return {"units_per_cohort": n_units, "multiplier": multiplier, "reps": reps,
            "simultaneous_coverage": hits / reps, "pointwise_coverage": pointwise_hits / reps,
            "mean_critical_value": float(np.mean(crits)), "cells": int(len(frame))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--units", type=int, nargs="+", default=[200])
    parser.add_argument("--multipliers", nargs="+", default=["rademacher"])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    rows = []
    for units in args.units:
        for mult in args.multipliers:
            t0 = time.perf_counter()
            row = coverage(units, mult, args.reps, n_bootstrap=args.draws, seed=args.seed)
            row["seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
            print(json.dumps(row))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
