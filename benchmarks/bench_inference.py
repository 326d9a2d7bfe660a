"""Time the paper-scale fit with and without the small-sample correction, and the pre-tests.

The paper's shape (Lesci et al. 2024): 95 cohorts of 150 instances, 2,000 never-treated,
96 checkpoints (9,025 cells, 4,465 of them pre-treatment), from
:func:`didmem.datasets.simulate_panel`. Each timing is the median of ``--repeat`` warm runs
(numba compiled by a first fit) of ``DiDEstimator(n_bootstrap=1000).fit(panel)``, then of
each ``pretrend_test`` method on the fitted result (its first call; the result caches
nothing for the event and max-|t| tests).

Usage (figures in benchmarks/RESULTS.md)::

    python benchmarks/bench_inference.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings

import didmem


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cohorts", type=int, default=95)
    parser.add_argument("--units", type=int, default=150)
    parser.add_argument("--never", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", didmem.DidmemWarning)
    df, _ = didmem.datasets.simulate_panel(n_cohorts=args.cohorts, units_per_cohort=args.units,
                                           n_never_treated=args.never, n_times=args.cohorts + 1,
                                           seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    didmem.DiDEstimator(n_bootstrap=50, seed=0).fit(panel)  # compile
    didmem.DiDEstimator(n_bootstrap=50, seed=0, small_sample=False).fit(panel)
    rows = {"machine": f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}",
            "load_avg_1min": round(os.getloadavg()[0], 2), "panel": f"{panel}",
            "draws": args.draws, "repeat": args.repeat}
    for small in (True, False):
        est = didmem.DiDEstimator(n_bootstrap=args.draws, seed=1, small_sample=small)
        sec, res = timed(lambda: est.fit(panel), args.repeat)
        key = "default (small_sample=True)" if small else "small_sample=False (R)"
        rows[f"fit {key} s"] = round(sec, 3)
        if small:
            for method in ("event", "max_t", "wald"):
                sec_t, _ = timed(lambda: res.pretrend_test(method), 1 if method == "wald" else
                                 args.repeat)
                rows[f"pretrend_test({method!r}) s"] = round(sec_t, 3)
            sec_f, _ = timed(lambda: (est.fit(panel).pretrend_test()), args.repeat)
            rows["fit + default pre-test s"] = round(sec_f, 3)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
