"""Monte Carlo coverage of the simultaneous band with small cohorts: R's rule against didmem's
small-sample correction (``DiDEstimator(small_sample=True)``, the default).

Each replication draws a panel with a known profile, fits ``DiDEstimator`` twice on it (the
same bootstrap seed; ``small_sample=False`` is R ``did``'s band) and records whether each
band covers every cell's truth (pre-treatment cells' truth is 0). Two data-generating
processes:

* ``normal``: :func:`didmem.datasets.simulate_panel` with N(0, 1) noise (the issue's panel);
* ``hetero``: unit and period effects, AR(1) errors (rho = 0.5) with t(5) innovations,
  treated units' noise 1.5 times the controls', a lognormal spread of noise scales across
  units, and a decaying profile ``1 / (1 + e)``.

Usage (the figures in docs/inference.rst and benchmarks/RESULTS.md)::

    nice -n 15 python benchmarks/small_sample_coverage.py --cohorts 8 --units 10 15 30 60 200 \\
        --reps 1000 --json benchmarks/results/small_sample_8_1000.json
    nice -n 10 python benchmarks/small_sample_coverage.py --cohorts 95 --never 2000 \\
        --units 15 60 --reps 40 --dgp normal --json benchmarks/results/small_sample_95.json

The Monte Carlo standard error of a coverage ``p`` from ``R`` replications is
``sqrt(p (1 - p) / R)`` (printed as ``mc_se``).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

import didmem
from _provenance import add_rows


def simulate_hetero(n_cohorts: int, units: int, n_never: int, n_times: int, seed: int):
    """The ``hetero`` panel and its truth (cohort, time, tau); cohort j treated at time j."""
    rng = np.random.default_rng(seed)
    cohorts = np.concatenate([np.repeat(np.arange(1, n_cohorts + 1, dtype=float), units),
                              np.full(n_never, np.inf)])
    n = cohorts.size
    treated = np.isfinite(cohorts)
    scale = np.exp(rng.normal(0.0, 0.25, n)) * np.where(treated, 1.5, 1.0)
    innov = rng.standard_t(5, (n, n_times)) / np.sqrt(5 / 3)  # unit variance
    eps = np.empty((n, n_times))
    eps[:, 0] = innov[:, 0]
    for t in range(1, n_times):
        eps[:, t] = 0.5 * eps[:, t - 1] + np.sqrt(1 - 0.25) * innov[:, t]
    times = np.arange(n_times, dtype=float)
    event = times[None, :] - cohorts[:, None]
    tau = np.where(event >= 0, 1.0 / (1.0 + np.maximum(event, 0)), 0.0)
    y = rng.normal(0, 1, n)[:, None] + np.log1p(times)[None, :] + tau + scale[:, None] * eps
    df = pd.DataFrame({"unit": np.repeat(np.arange(n), n_times), "time": np.tile(times, n),
                       "cohort": np.repeat(cohorts, n_times), "y": y.ravel()})
    g, t = np.meshgrid(np.arange(1, n_cohorts + 1, dtype=float), times, indexing="ij")
    truth = pd.DataFrame({"cohort": g.ravel(), "time": t.ravel()})
    truth["tau"] = np.where(truth["time"] >= truth["cohort"],
                            1.0 / (1.0 + truth["time"] - truth["cohort"]), 0.0)
    return df, truth


#: Each data-generating process's own random stream. ``normal`` keeps the stream it has had
#: since the first runs (it was keyed by ``len("normal") == 6``); ``hetero`` had the same key
#: (``len("hetero") == 6``), so the two shared their panels' random numbers and bootstrap
#: seeds until 2026-11-25: it now has its own.
DGP_STREAMS = {"normal": 6, "hetero": 7}


def simulate(dgp: str, n_cohorts: int, units: int, n_never: int, n_times: int, seed: int):
    if dgp == "normal":
        return didmem.datasets.simulate_panel(n_cohorts=n_cohorts, units_per_cohort=units,
                                              n_never_treated=n_never, n_times=n_times,
                                              noise_sd=1.0, seed=seed)
    if dgp == "hetero":
        return simulate_hetero(n_cohorts, units, n_never, n_times, seed)
    raise ValueError(f"unknown dgp {dgp!r}")


def covers(res, truth) -> tuple[bool, float]:
    """Whether the band covers every cell's truth; the share of cells covered."""
    frame = res.to_frame().merge(truth, on=["cohort", "time"], how="left")
    tau = np.where(frame["post"], frame["tau"], 0.0)
    inside = (frame["ci_lower"] <= tau) & (tau <= frame["ci_upper"])
    return bool(inside.all()), float(inside.mean())


def study(dgp, n_cohorts, units, n_never, n_times, reps, draws, seed):
    rng = np.random.default_rng([seed, units, n_cohorts, DGP_STREAMS[dgp]])
    hits = {True: 0, False: 0}
    crit = {True: [], False: []}
    n_cells = 0
    for _ in range(reps):
        df, truth = simulate(dgp, n_cohorts, units, n_never, n_times, int(rng.integers(2**62)))
        panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
        boot_seed = int(rng.integers(2**62))
        for small in (True, False):
            res = didmem.DiDEstimator(n_bootstrap=draws, seed=boot_seed,
                                      small_sample=small).fit(panel)
            ok, _ = covers(res, truth)
            hits[small] += ok
            crit[small].append(res.critical_value)
            n_cells = res.cells.size
    rows = []
    for small in (True, False):
        p = hits[small] / reps
        rows.append({"dgp": dgp, "cohorts": n_cohorts, "units_per_cohort": units,
                     "never_treated": n_never, "cells": int(n_cells), "reps": reps,
                     "draws": draws, "small_sample": small, "coverage": round(p, 4),
                     "mc_se": round(float(np.sqrt(p * (1 - p) / reps)), 4),
                     "mean_critical_value": round(float(np.mean(crit[small])), 3)})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohorts", type=int, default=8)
    parser.add_argument("--times", type=int, default=None,
                        help="periods (default: cohorts + 2, i.e. 10 for 8 cohorts)")
    parser.add_argument("--units", type=int, nargs="+", default=[10, 15, 30, 60, 200])
    parser.add_argument("--never", type=int, default=200, help="never-treated units")
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--dgp", nargs="+", default=list(DGP_STREAMS), choices=list(DGP_STREAMS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the rows (with their provenance) to this JSON file")
    args = parser.parse_args(argv)
    n_times = args.times or args.cohorts + 2
    warnings.simplefilter("ignore", didmem.DidmemWarning)
    out = []
    for dgp in args.dgp:
        for units in args.units:
            add_rows(out, lambda: study(dgp, args.cohorts, units, args.never, n_times,
                                        args.reps, args.draws, args.seed), args.json)


if __name__ == "__main__":
    main()
