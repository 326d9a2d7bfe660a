"""Coverage of RandomTimingEstimator's simultaneous band over all cells (issue 47).

Instances are assigned to cohorts at random (fixed sizes); each DGP has a known mean effect
``tau(g, c)`` per cell (0 before treatment), and the band of every replication is checked
against the whole profile at once. Also reported: the mean ratio of the cells' design-based
standard error to DiD's (the efficient beta vs beta = 1, R staggered vs staggered_cs) on the
same panels.

* ``iid``: normal instance effects plus i.i.d. normal noise, effect 1 + 0.3 e;
* ``ar1_persistent``: persistent instance effects (sd 2), an AR(1) path (0.9) with
  Student-t(4) innovations, heterogeneous effects across instances (sd 0.5) around
  0.5 + 0.2 e.

6 cohorts of ``--per-cohort`` instances (30; first treated at checkpoints 3-8) and twice as
many never-treated, 10
checkpoints (60 cells: every cohort at every checkpoint, the never-treated being the last control).

    python benchmarks/random_timing_coverage.py --reps 300 [--per-cohort 30] [--chunk-draws 100]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

import didmem

N_T = 10


def cohorts(per_cohort):
    return np.r_[np.repeat(np.arange(3.0, 9.0), per_cohort), np.full(2 * per_cohort, np.inf)]


def draw(dgp, rng, per_cohort=30):
    g = rng.permutation(cohorts(per_cohort))
    n = g.size
    t = np.arange(1.0, N_T + 1)
    e = t[None, :] - g[:, None]
    treated = e >= 0
    if dgp == "iid":
        y = rng.standard_normal((n, 1)) + rng.standard_normal((n, N_T))
        effect = np.where(treated, 1.0 + 0.3 * np.where(treated, e, 0), 0.0)
        return g, y + effect
    alpha = 2.0 * rng.standard_normal(n)
    u = np.zeros(n)
    y = np.empty((n, N_T))
    for s in range(N_T):
        u = 0.9 * u + rng.standard_t(4, n)
        y[:, s] = alpha + u
    slope = 0.5 + 0.5 * rng.standard_normal(n)
    effect = np.where(treated, slope[:, None] + 0.2 * np.where(treated, e, 0), 0.0)
    return g, y + effect


def truth(dgp, cohort, time):
    e = time - cohort
    base = 1.0 + 0.3 * e if dgp == "iid" else 0.5 + 0.2 * e
    return np.where(e >= 0, base, 0.0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=4747)
    parser.add_argument("--per-cohort", type=int, default=30)
    parser.add_argument("--chunk-draws", type=int, default=0,
                        help="draw the band in chunks of this many draws (as at the paper's "
                             "scale, where 1,000 draws of K x T numbers exceed one chunk); "
                             "0: the library's chunks (here all draws in one)")
    args = parser.parse_args()
    if args.chunk_draws:
        from didmem.inference import bootstrap

        bootstrap._CHUNK_ELEMENTS = args.chunk_draws * 7 * N_T  # 7 cohorts x N_T checkpoints
    for k, dgp in enumerate(("iid", "ar1_persistent")):
        rng = np.random.default_rng([args.seed, k])
        covered, ratios = 0, []
        t0 = time.perf_counter()
        for _ in range(args.reps):
            g, y = draw(dgp, rng, args.per_cohort)
            frame = pd.DataFrame({"i": np.repeat(np.arange(g.size), N_T),
                                  "t": np.tile(np.arange(1.0, N_T + 1), g.size),
                                  "g": np.repeat(g, N_T), "y": y.ravel()})
            panel = didmem.Panel(frame, unit="i", time="t", cohort="g", outcome="y")
            cells = didmem.RandomTimingEstimator(seed=rng).fit(panel).to_frame()
            did = didmem.RandomTimingEstimator(beta=1, n_draws=0).fit(panel).to_frame()
            tau = truth(dgp, cells["cohort"].to_numpy(), cells["time"].to_numpy())
            covered += bool(np.all((cells["ci_lower"] <= tau) & (tau <= cells["ci_upper"])))
            post = (cells["time"] >= cells["cohort"]).to_numpy()
            ratios.append(np.mean(cells["std_error"].to_numpy()[post]
                                  / did["std_error"].to_numpy()[post]))
        p = covered / args.reps
        print(json.dumps({"dgp": dgp, "reps": args.reps, "per_cohort": args.per_cohort,
                          "chunk_draws": args.chunk_draws or "one chunk",
                          "cells": int(len(cells)),
                          "band_coverage": round(p, 4),
                          "mc_se": round(float(np.sqrt(p * (1 - p) / args.reps)), 4),
                          "se_ratio_efficient_to_did_post_cells": round(float(np.mean(ratios)), 4),
                          "seconds": round(time.perf_counter() - t0, 1)}))


if __name__ == "__main__":
    main()
