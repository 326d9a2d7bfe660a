"""Monte Carlo size and power of the pre-tests of parallel trends at many restrictions.

Panels from :func:`didmem.datasets.simulate_panel` (100 instances per cohort, cohort ``j``
treated at the ``j``-th period); parallel trends hold, or the treated units' outcomes drift
away from the controls' by ``drift`` standard errors of one pre-treatment cell per period
(a linear pre-trend: every short-difference pre-treatment cell then has mean
``drift * SE``). Each replication fits ``DiDEstimator(n_bootstrap=1000)`` (defaults: the
small-sample correction) and runs ``pretrend_test`` with the three methods.

Shapes: ``--cohorts 40`` (42 periods, 1,000 never-treated) has 780 pre-treatment cells;
``--cohorts 95 --times 96 --never 2000`` is the paper's (4,465 pre-treatment cells).

Usage (the figures in docs/inference.rst and benchmarks/RESULTS.md)::

    nice -n 10 python benchmarks/pretest_size_power.py --cohorts 40 --reps 200 --drift 0 0.25
    nice -n 10 python benchmarks/pretest_size_power.py --cohorts 95 --times 96 --never 2000 \\
        --reps 60 --drift 0 0.25

Rejection rates are at the 5% level; their Monte Carlo standard error is
``sqrt(p (1 - p) / reps)`` (``mc_se``).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

import didmem
from _provenance import write_rows

METHODS = ("event", "max_t", "wald")


def one_panel(n_cohorts, units, n_never, n_times, drift, noise_sd, seed, dgp="normal"):
    if dgp == "hetero":  # AR(1), t(5), heteroskedastic: see small_sample_coverage.py
        if drift:
            raise ValueError("the hetero DGP is for the size only (--drift 0)")
        from small_sample_coverage import simulate_hetero

        df, _ = simulate_hetero(n_cohorts, units, n_never, n_times, seed)
        return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    df, _ = didmem.datasets.simulate_panel(n_cohorts=n_cohorts, units_per_cohort=units,
                                           n_never_treated=n_never, n_times=n_times,
                                           noise_sd=noise_sd, seed=seed)
    if drift:
        # SE of one short-difference pre-treatment cell: Var(dY) = 2 noise_sd^2 per unit
        se = np.sqrt(2 * noise_sd**2 / units + 2 * noise_sd**2 / n_never)
        period = df["time"].rank(method="dense").to_numpy() - 1
        treated = np.isfinite(df["cohort"].to_numpy())
        df = df.assign(y=df["y"] + drift * se * period * treated)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohorts", type=int, default=40)
    parser.add_argument("--times", type=int, default=None, help="default: cohorts + 2")
    parser.add_argument("--units", type=int, default=100)
    parser.add_argument("--never", type=int, default=1000)
    parser.add_argument("--noise", type=float, default=0.5)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--drift", type=float, nargs="+", default=[0.0, 0.25])
    parser.add_argument("--draws", type=int, default=1000,
                        help="bootstrap draws of the fit (0: max_t draws 999 of its own)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dgp", default="normal", choices=("normal", "hetero"))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--json", help="write the rows to this JSON file")
    args = parser.parse_args(argv)
    n_times = args.times or args.cohorts + 2
    warnings.simplefilter("ignore", didmem.DidmemWarning)
    out = []
    for drift in args.drift:
        # normal keeps the key it has always had; hetero shared it until 2026-11-25 (the
        # same panels' random numbers and bootstrap seeds) and now has its own stream.
        key = [args.seed, args.cohorts, int(drift * 1000)]
        if args.dgp != "normal":
            from small_sample_coverage import DGP_STREAMS
            key.append(DGP_STREAMS[args.dgp])
        rng = np.random.default_rng(key)
        methods = args.methods
        rejected = {m: 0 for m in methods}
        stats = {m: [] for m in methods}
        stated_power = []
        n_pre = 0
        t0 = time.perf_counter()
        for _ in range(args.reps):
            panel = one_panel(args.cohorts, args.units, args.never, n_times, drift, args.noise,
                              int(rng.integers(2**62)), args.dgp)
            res = didmem.DiDEstimator(n_bootstrap=args.draws,
                                      seed=int(rng.integers(2**62))).fit(panel)
            for m in methods:
                test = res.pretrend_test(m)
                rejected[m] += test.pvalue < 0.05
                stats[m].append(test.statistic / (test.df or 1.0))
                if m == "event":
                    stated_power.append(test.power)
                n_pre = int((res.cohorts > res.times).sum())
        for m in methods:
            p = rejected[m] / args.reps
            row = {"method": m, "dgp": args.dgp, "drift_se_per_period": drift,
                   "cohorts": args.cohorts,
                   "times": n_times, "units_per_cohort": args.units, "never_treated": args.never,
                   "pre_cells": n_pre, "reps": args.reps, "rejection_rate": round(p, 4),
                   "mc_se": round(float(np.sqrt(p * (1 - p) / args.reps)), 4),
                   "mean_stat_per_df": round(float(np.nanmean(stats[m])), 3),
                   "seconds": round(time.perf_counter() - t0, 1)}
            if m == "event":
                row["mean_stated_power"] = round(float(np.nanmean(stated_power)), 3)
            print(json.dumps(row), flush=True)
            out.append(row)
        if args.json:
            write_rows(args.json, out)


if __name__ == "__main__":
    main()
