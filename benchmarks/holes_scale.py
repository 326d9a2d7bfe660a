"""Fit time of panels with holes and of repeated cross-sections against the balanced fit.

The paper's shape (95 cohorts of 150 units, 2,000 never-treated, 96 periods: 9,025 cells),
no covariates, 1,000 Rademacher draws and the sup-t band (``small_sample=False``, R's
inference; ``--small-sample`` for the default). Three panels of the same rows:

* balanced: every (unit, period) row;
* holes: 10% of the rows removed at random (``balance="keep"``);
* cross-sections: every row its own unit (``unit=None``), as many rows as the balanced panel.

Each fit is timed ``--repeat`` times in this process (the first warms numba's cache); the
median and the fastest are reported, with the peak of the traced Python allocations of one
fit. Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/holes_scale.py --repeat 3 --json benchmarks/results/holes_scale.json
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

import numpy as np

import didmem
from _provenance import provenance, write_rows


def _panels(units_per_cohort: int, n_never: int, n_times: int, n_cohorts: int, missing: float):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=n_cohorts,
                                           units_per_cohort=units_per_cohort,
                                           n_never_treated=n_never, n_times=n_times, seed=0)
    keep = np.random.default_rng(1).random(len(df)) >= missing
    cols = dict(time="time", cohort="cohort", outcome="y")
    return {
        "balanced": lambda: didmem.Panel(df, unit="unit", **cols),
        f"holes ({missing:.0%} rows missing)": lambda: didmem.Panel(df[keep], unit="unit",
                                                                     balance="keep", **cols),
        "cross-sections": lambda: didmem.Panel(df, unit=None, **cols),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--units-per-cohort", type=int, default=150)
    parser.add_argument("--never", type=int, default=2000)
    parser.add_argument("--times", type=int, default=96)
    parser.add_argument("--missing", type=float, default=0.10)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--small-sample", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    est = didmem.DiDEstimator(n_bootstrap=args.draws, seed=0,
                              small_sample=args.small_sample)
    rows = []
    base = None
    for name, make in _panels(args.units_per_cohort, args.never, args.times, args.times - 1,
                              args.missing).items():
        t0 = time.perf_counter()
        panel = make()
        setup = time.perf_counter() - t0
        times = []
        for _ in range(args.repeat + 1):  # the first run warms numba's cache
            t0 = time.perf_counter()
            res = est.fit(panel)
            times.append(time.perf_counter() - t0)
        times = times[1:]
        tracemalloc.start()
        est.fit(panel)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        med = statistics.median(times)
        base = med if base is None else base
        row = {"panel": name, "rows": panel.n_rows, "units": panel.n_units,
               "cells": int(res.estimates.size), "setup_s": round(setup, 3),
               "fit_median_s": round(med, 3), "fit_min_s": round(min(times), 3),
               "vs_balanced": round(med / base, 2), "peak_traced_mb": round(peak, 1),
               "critical_value": round(float(res.critical_value), 3)}
        rows.append(row)
        print(row, flush=True)
    print(provenance())
    if args.json:
        write_rows(args.json, {"settings": vars(args), "fits": rows})


if __name__ == "__main__":
    main()
