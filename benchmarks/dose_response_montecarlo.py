"""Monte Carlo bias and band coverage of the dose-response (DoseResponseEstimator).

Each replication draws :func:`didmem.datasets.simulate_doses` (doses 0, 1, 2, 4, 8, 16, 32
assigned at random, ``--units`` instances each, exposures at random times, 6 checkpoints)
with a log-linear (``tau(d) = 0.3 log(1 + d)``) or a saturating (``0.9 (1 - 0.8**d)``) true
dose-response, fits ``DoseResponseEstimator(n_bootstrap=--draws)`` and compares each dose's
estimate with the truth. Reported per DGP: bias of each dose in units of its Monte Carlo
standard error (root mean square and maximum over the 6 doses), pointwise 95% coverage and
the coverage of the simultaneous 95% band over the doses, with MC standard errors.

Usage (figures in benchmarks/RESULTS.md and docs/repeated_exposure.rst)::

    nice -n 10 python benchmarks/dose_response_montecarlo.py --reps 500 \\
        --json benchmarks/results/dose_response_montecarlo.json
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import didmem
from didmem.datasets import DOSE_SHAPES, simulate_doses
from _provenance import write_rows


def one_replication(shape, seed, args):
    df, truth = simulate_doses(units_per_dose=args.units, shape=shape, seed=seed)
    cohorts = [c for c in df.columns if c.startswith("cohort")]
    panel = didmem.Panel(df, unit="unit", time="time", cohort=cohorts, outcome="y")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", didmem.InferenceWarning)
        res = didmem.DoseResponseEstimator(n_bootstrap=args.draws, random_state=seed).fit(panel)
    frame = res.to_frame().merge(truth, on="dose", validate="one_to_one")
    error = (frame["estimate"] - frame["tau"]).to_numpy()
    se = frame["std_error"].to_numpy()
    inside = ((frame["ci_lower"] <= frame["tau"]) & (frame["tau"] <= frame["ci_upper"]))
    return error, np.abs(error) <= 1.959963984540054 * se, bool(inside.all())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--dgp", nargs="+", default=list(DOSE_SHAPES), choices=DOSE_SHAPES)
    parser.add_argument("--units", type=int, default=60, help="instances per dose")
    parser.add_argument("--draws", type=int, default=999)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = []
    for shape in args.dgp:
        start = time.perf_counter()
        reps = [one_replication(shape, r, args) for r in range(args.reps)]
        errors = np.array([r[0] for r in reps])
        pointwise = np.array([r[1] for r in reps]).mean(axis=1)
        band = np.array([r[2] for r in reps], dtype=float)
        n = len(reps)
        t = errors.mean(axis=0) / (errors.std(axis=0, ddof=1) / np.sqrt(n))
        row = {"dgp": shape, "reps": n, "doses": int(errors.shape[1]),
               "bias_over_mcse_rms": float(np.sqrt(np.mean(t**2))),
               "bias_over_mcse_max": float(np.abs(t).max()),
               "mean_abs_bias": float(np.abs(errors.mean(axis=0)).mean()),
               "pointwise_coverage": float(pointwise.mean()),
               "pointwise_coverage_mc_se": float(pointwise.std(ddof=1) / np.sqrt(n)),
               "band_coverage": float(band.mean()),
               "band_coverage_mc_se": float(np.sqrt(band.mean() * (1 - band.mean()) / n)),
               "seconds": round(time.perf_counter() - start, 1)}
        rows.append(row)
        print(row, flush=True)
    if args.json:
        write_rows(args.json, {"args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
