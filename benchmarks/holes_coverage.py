"""Monte Carlo coverage of the default band on panels with holes and on repeated
cross-sections.

Each replication draws a panel with a known profile from one of the two data-generating
processes of ``small_sample_coverage.py`` (``normal``: N(0, 1) noise; ``hetero``: unit and
period effects, AR(1) t(5) errors, heteroskedastic, decaying profile), then

* ``holes``: removes a share of the (unit, period) rows at random and fits
  ``Panel(..., balance="keep")``;
* ``rcs``: draws ``units x periods`` units per cohort and keeps one random period of each
  (a genuine repeated cross-section with about ``units`` rows per cohort and period) and
  fits ``Panel(..., unit=None)``.

It fits ``DiDEstimator`` with its defaults (small-sample correction, Gaussian multipliers,
1,000 draws) and, with ``--r-rule``, R's rule as well, and records whether the band covers
every cell's truth (pre-treatment truth 0). Usage (the figures in docs/inference.rst)::

    nice -n 15 python benchmarks/holes_coverage.py --reps 1000 --units 15 \\
        --json benchmarks/results/holes_coverage_1000.json

The Monte Carlo standard error of a coverage ``p`` over ``R`` replications is
``sqrt(p (1 - p) / R)`` (``mc_se``).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

import didmem
from _provenance import write_rows
from small_sample_coverage import DGP_STREAMS, covers, simulate


#: Each layout's own random stream (the lengths of their names, as before 2026-11-25).
LAYOUT_STREAMS = {"holes": 5, "rcs": 3}


def draw_panel(layout, dgp, n_cohorts, units, n_never, n_times, missing, rng):
    seed = int(rng.integers(2**62))
    if layout == "holes":
        df, truth = simulate(dgp, n_cohorts, units, n_never, n_times, seed)
        df = df[rng.random(len(df)) >= missing]
        return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                            balance="keep"), truth
    df, truth = simulate(dgp, n_cohorts, units * n_times, n_never * n_times, n_times, seed)
    pick = rng.integers(0, n_times, df["unit"].nunique())
    times = np.sort(df["time"].unique())
    df = df[df["time"].to_numpy() == times[pick[df["unit"].to_numpy()]]]
    return didmem.Panel(df, unit=None, time="time", cohort="cohort", outcome="y"), truth


def study(layout, dgp, n_cohorts, units, n_never, n_times, missing, reps, draws, seed,
          rules):
    rng = np.random.default_rng([seed, units, n_cohorts, DGP_STREAMS[dgp], LAYOUT_STREAMS[layout]])
    hits = {rule: 0 for rule in rules}
    n_cells = 0
    for _ in range(reps):
        panel, truth = draw_panel(layout, dgp, n_cohorts, units, n_never, n_times, missing,
                                  rng)
        boot_seed = int(rng.integers(2**62))
        for rule in rules:
            res = didmem.DiDEstimator(n_bootstrap=draws, random_state=boot_seed,
                                      small_sample=rule == "default").fit(panel)
            hits[rule] += covers(res, truth)[0]
            n_cells = res.estimates.size
    rows = []
    for rule in rules:
        p = hits[rule] / reps
        rows.append({"layout": layout, "dgp": dgp, "cohorts": n_cohorts,
                     "units_per_cohort_and_period": units, "never_treated": n_never,
                     "missing": missing if layout == "holes" else None,
                     "cells": int(n_cells), "reps": reps, "draws": draws, "rule": rule,
                     "coverage": round(p, 4),
                     "mc_se": round(float(np.sqrt(p * (1 - p) / reps)), 4)})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohorts", type=int, default=8)
    parser.add_argument("--units", type=int, nargs="+", default=[15])
    parser.add_argument("--never", type=int, default=200)
    parser.add_argument("--missing", type=float, default=0.10)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--layout", nargs="+", default=list(LAYOUT_STREAMS), choices=list(LAYOUT_STREAMS))
    parser.add_argument("--dgp", nargs="+", default=list(DGP_STREAMS), choices=list(DGP_STREAMS))
    parser.add_argument("--r-rule", action="store_true", help="also R's rule (small_sample=False)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", didmem.DidmemWarning)
    rules = ["default", "R"] if args.r_rule else ["default"]
    out = []
    for layout in args.layout:
        for dgp in args.dgp:
            for units in args.units:
                t0 = time.perf_counter()
                rows = study(layout, dgp, args.cohorts, units, args.never, args.cohorts + 2,
                             args.missing, args.reps, args.draws, args.seed, rules)
                for row in rows:
                    row["seconds"] = round(time.perf_counter() - t0, 1)
                    print(json.dumps(row), flush=True)
                out.extend(rows)
                if args.json:
                    write_rows(args.json, out)


if __name__ == "__main__":
    main()
