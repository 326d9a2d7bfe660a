"""Monte Carlo bias and band coverage of :func:`didmem.dose_response` (Hubble's design).

Each replication draws :func:`didmem.datasets.simulate_doses` (doses 0, 1, 2, 4, ..., 64,
``--units`` instances each, 6 checkpoints with the first before training; instances memorise by a factor
``1 + 0.5 z``, so the outcome's spread grows with the dose) under two data-generating
processes, a log-linear and a saturating dose-response, fits
``dose_response(df, base=0)`` and compares every (dose, checkpoint) row with the true
``theta(d, c)``. Reported per DGP: the bias of each row in units of its Monte Carlo
standard error (root mean square and maximum over the 35 rows; about 1 and 2.5 without
bias), the pointwise coverage of the 95% intervals (estimate +- 1.96 SE) and the coverage
of the simultaneous 95% band over all rows, each with its Monte Carlo standard error; and
the slope of the last checkpoint's estimates on ``log2(1 + d)`` (true 0.1 for the
log-linear DGP) with its spread over replications.

Usage (the figures in benchmarks/RESULTS.md and docs/repeated_exposure.rst)::

    nice -n 10 python benchmarks/dose_montecarlo.py --reps 1000 \\
        --json benchmarks/results/dose_montecarlo.json
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import didmem
from didmem.datasets import DOSE_DGPS, simulate_doses
from _provenance import write_rows

Z = 1.959963984540054


def one_replication(dgp, seed, args):
    df, truth = simulate_doses(units_per_dose=args.units, dgp=dgp, seed=seed)
    frame = didmem.dose_response(df, base=0.0, n_bootstrap=args.draws,
                                 seed=seed).to_frame().merge(truth)
    err = (frame["estimate"] - frame["theta"]).to_numpy()
    se = frame["std_error"].to_numpy()
    inside = (frame["ci_lower"] <= frame["theta"]) & (frame["theta"] <= frame["ci_upper"])
    last = frame[frame["time"] == frame["time"].max()]
    slope = np.polyfit(np.log2(1 + last["dose"]), last["estimate"], 1)[0]
    return err, float((np.abs(err) <= Z * se).mean()), bool(inside.all()), slope


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--dgp", nargs="+", default=list(DOSE_DGPS), choices=list(DOSE_DGPS))
    parser.add_argument("--units", type=int, default=40, help="instances per dose")
    parser.add_argument("--draws", type=int, default=499, help="bootstrap draws per fit")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = []
    for dgp in args.dgp:
        start = time.perf_counter()
        out = [one_replication(dgp, 10_000 + r, args) for r in range(args.reps)]
        errors = np.array([o[0] for o in out])
        pointwise = np.array([o[1] for o in out])
        band = np.array([o[2] for o in out], dtype=float)
        slopes = np.array([o[3] for o in out])
        n = args.reps
        t = errors.mean(axis=0) / (errors.std(axis=0, ddof=1) / np.sqrt(n))
        row = {"dgp": dgp, "reps": n, "rows": int(errors.shape[1]),
               "bias_over_mcse_rms": float(np.sqrt(np.mean(t**2))),
               "bias_over_mcse_max": float(np.abs(t).max()),
               "pointwise_coverage": float(pointwise.mean()),
               "pointwise_coverage_mc_se": float(pointwise.std(ddof=1) / np.sqrt(n)),
               "band_coverage": float(band.mean()),
               "band_coverage_mc_se": float(np.sqrt(band.mean() * (1 - band.mean()) / n)),
               "slope_mean": float(slopes.mean()), "slope_sd": float(slopes.std(ddof=1)),
               "seconds": round(time.perf_counter() - start, 1)}
        rows.append(row)
        print(row, flush=True)
    if args.json:
        write_rows(args.json, {"args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
