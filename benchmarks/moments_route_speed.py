"""Issue 37: the in-memory route of ``DiDEstimator().fit(panel)`` against the fit from the
panel's per-cohort moments, warm, in one process, on panels of the paper's shape with SCALE
times its units (95 cohorts x 150 + 2,000 never-treated, 96 periods; 1,000 Gaussian draws,
the default small-sample rule, then the dynamic aggregation).

Both routes are imported and run once on a small panel first (numba's kernels loaded), then
alternate for two rounds; each line has the wall time, the process's CPU time over the fit
(all threads), and the load. On a loaded shared machine read the CPU time.

Usage::

    nice -n 12 python benchmarks/moments_route_speed.py 1 10 --json benchmarks/results/moments_route_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np
import pandas as pd

import didmem
from _provenance import write_rows
from didmem.estimators._moments_route import fit_moments, panel_moments

N_COHORTS, PER_COHORT, NEVER, N_TIMES = 95, 150, 2000, 96


def cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def panel_of(scale: int) -> didmem.Panel:
    rng = np.random.default_rng(0)
    times = np.arange(1, N_TIMES + 1, dtype=float)
    n_treated = N_COHORTS * PER_COHORT * scale
    n_units = n_treated + NEVER * scale
    cohort = np.full(n_units, np.inf)
    cohort[:n_treated] = np.repeat(times[1:N_COHORTS + 1], PER_COHORT * scale)
    y = rng.normal(0, 1, n_units)[:, None] + rng.normal(0, 0.5, (n_units, N_TIMES))
    frame = pd.DataFrame({"unit": np.repeat(np.arange(n_units), N_TIMES),
                          "time": np.tile(times, n_units),
                          "cohort": np.repeat(cohort, N_TIMES), "y": y.ravel()})
    return didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scales", type=int, nargs="+")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    small, _ = didmem.datasets.simulate_panel(seed=0)
    warm = didmem.Panel(small, unit="unit", time="time", cohort="cohort", outcome="y")
    est = didmem.DiDEstimator(n_bootstrap=1000, seed=0)
    est.fit(warm).aggregate("dynamic")
    fit_moments(est, panel_moments(warm), outcome="y").aggregate("dynamic")
    rows = []
    for scale in args.scales:
        panel = panel_of(scale)
        for rnd in range(args.rounds):
            for via in ("memory", "moments"):
                start, cpu0 = time.perf_counter(), cpu()
                if via == "memory":
                    res = est.fit(panel)
                else:
                    res = fit_moments(est, panel_moments(panel), outcome="y")
                res.aggregate("dynamic")
                row = {"scale": scale, "units": int(panel.n_units), "via": via, "round": rnd,
                       "wall_s": round(time.perf_counter() - start, 2),
                       "cpu_s": round(cpu() - cpu0, 2), "load_1min": os.getloadavg()[0]}
                print(json.dumps(row), flush=True)
                rows.append(row)
                if args.json:
                    write_rows(args.json, rows)
        del panel
    return 0


if __name__ == "__main__":
    sys.exit(main())
