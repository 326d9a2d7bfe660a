"""Monte Carlo bias and coverage of the second exposure's effect: history-matched controls
against the naive comparison with any once-seen instance.

Each replication draws a panel of :func:`didmem.datasets.simulate_exposures` (half the
instances of each of 4 first cohorts seen again 2 or 4 checkpoints later; the second
effect depends on the gap, so histories differ) under one of two data-generating processes
in which the first exposure's effect still changes when the second comes:

* ``decay``: the first effect jumps to 1 and decays to 0.2 (half-life one checkpoint);
* ``growth``: the first effect keeps growing from 0.4 towards 1;
* ``heterogeneous``: the first effect's size (0.6 to 1.4) and half-life (1 to 4
  checkpoints) differ by first cohort and its size by instance (a factor
  ``max(1 + 0.5 z, 0)``), the second effect scales with the first cohort's size; run it with
  varying gaps (``--gaps 1 2 3 4 5``). Unlike the two above, the history-matched
  comparison's rows are not those of another DGP: treated and controls of a history share
  the first effect only in expectation.

It fits ``DiDEstimator(exposure=2)`` with ``history="matched"`` (the default) and
``history="ignored"`` (the naive comparison) on the same panel and bootstrap seed, and
compares every cell with the exact ``tau_2(g, c)`` (0 before the second exposure).

Reported per DGP and comparison: the bias of each cell over the replications in units of
its Monte Carlo standard error (root mean square and maximum over the cells; about 1 and
about 3 without bias), the mean absolute bias, the pointwise coverage of the 95% intervals
(estimate +- 1.96 SE, averaged over cells), and the coverage of the simultaneous 95% band
over all cells (with its Monte Carlo standard error ``sqrt(p (1 - p) / R)``).

Usage (the figures in benchmarks/RESULTS.md and docs/repeated_exposure.rst)::

    nice -n 10 python benchmarks/exposure_montecarlo.py --reps 500 --dgp decay growth \\
        --json benchmarks/results/exposure_montecarlo.json
    nice -n 10 python benchmarks/exposure_montecarlo.py --reps 500 --dgp heterogeneous \\
        --gaps 1 2 3 4 5 --json benchmarks/results/exposure_montecarlo_heterogeneous.json
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import didmem
from didmem.datasets import simulate_exposures
from _provenance import write_rows

COMPARISONS = ("matched", "ignored")


def one_replication(dgp: str, seed: int, args):
    df, truth = simulate_exposures(n_first=args.first, units_per_cohort=args.units,
                                   n_never_treated=args.never, gaps=tuple(args.gaps),
                                   repeat_share=args.share, gap_slope=args.gap_slope,
                                   dgp=dgp, seed=seed)
    panel = didmem.Panel(df, unit="unit", time="time", cohort=["cohort", "cohort_2"],
                         outcome="y")
    truth = truth[truth["exposure"] == 2].set_index(["cohort", "time"])["tau"]
    out = {}
    for history in COMPARISONS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", didmem.SmallCohortWarning)
            res = didmem.DiDEstimator(exposure=2, history=history, n_bootstrap=args.draws,
                                      seed=seed).fit(panel)
        frame = res.to_frame().set_index(["cohort", "time"])
        tau = truth.reindex(frame.index).to_numpy()
        tau = np.where(frame["post"].to_numpy(), tau, 0.0)
        est, se = frame["estimate"].to_numpy(), frame["std_error"].to_numpy()
        live = np.isfinite(se)
        lo, hi = frame["ci_lower"].to_numpy(), frame["ci_upper"].to_numpy()
        out[history] = {
            "index": frame.index,
            "error": est - tau,
            "pointwise": (np.abs(est - tau) <= 1.959963984540054 * se)[live].mean(),
            "band": bool(np.all(((lo <= tau) & (tau <= hi))[live])),
        }
    return out


def summarise(reps):
    """Bias and coverage per comparison; cells are aligned by (cohort, time), so a cohort
    that some replications lack (drawn gaps put no instance there) counts where present."""
    import pandas as pd

    rows = {}
    for history in COMPARISONS:
        errors = pd.DataFrame([pd.Series(r[history]["error"], index=r[history]["index"])
                               for r in reps]).to_numpy()
        n = np.isfinite(errors).sum(axis=0)
        bias = np.nanmean(errors, axis=0)
        mcse = np.nanstd(errors, axis=0, ddof=1) / np.sqrt(n)
        t = bias / mcse
        band = np.array([r[history]["band"] for r in reps], dtype=float)
        pointwise = np.array([r[history]["pointwise"] for r in reps])
        rows[history] = {
            "reps": len(reps), "cells": int(errors.shape[1]),
            "min_reps_per_cell": int(n.min()),
            "bias_over_mcse_rms": float(np.sqrt(np.nanmean(t**2))),
            "bias_over_mcse_max": float(np.nanmax(np.abs(t))),
            "mean_abs_bias": float(np.nanmean(np.abs(bias))),
            "pointwise_coverage": float(pointwise.mean()),
            "pointwise_coverage_mc_se": float(pointwise.std(ddof=1) / np.sqrt(len(reps))),
            "band_coverage": float(band.mean()),
            "band_coverage_mc_se": float(np.sqrt(band.mean() * (1 - band.mean()) / len(reps))),
        }
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--dgp", nargs="+", default=["decay", "growth"],
                        choices=list(didmem.datasets.EXPOSURE_DGPS))
    parser.add_argument("--first", type=int, default=4, help="first-exposure cohorts")
    parser.add_argument("--units", type=int, default=60, help="instances per first cohort")
    parser.add_argument("--never", type=int, default=100, help="never-seen instances")
    parser.add_argument("--share", type=float, default=0.5, help="share seen again")
    parser.add_argument("--gaps", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--gap-slope", type=float, default=0.5)
    parser.add_argument("--draws", type=int, default=199, help="bootstrap draws per fit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args(argv)
    rows = []
    for dgp in args.dgp:
        start = time.perf_counter()
        reps = [one_replication(dgp, args.seed * 100_000 + r, args) for r in range(args.reps)]
        summary = summarise(reps)
        for history, row in summary.items():
            row = {"dgp": dgp, "history": history, **row,
                   "seconds": round(time.perf_counter() - start, 1)}
            rows.append(row)
            print(f"{dgp:7s} {history:8s} reps {row['reps']}  cells {row['cells']}  "
                  f"bias/MCSE rms {row['bias_over_mcse_rms']:.2f} max "
                  f"{row['bias_over_mcse_max']:.2f}  mean |bias| {row['mean_abs_bias']:.4f}  "
                  f"pointwise {row['pointwise_coverage']:.3f} "
                  f"({row['pointwise_coverage_mc_se']:.3f})  band {row['band_coverage']:.3f} "
                  f"({row['band_coverage_mc_se']:.3f})", flush=True)
    if args.json:
        write_rows(args.json, {"args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
