"""Speed of the second exposure's fit at the paper's scale against the first exposure's.

The paper's shape (Lesci et al. 2024): 95 first-exposure cohorts of 150 instances, 2,000
never-seen instances, 96 checkpoints; a third of the instances is seen a second time, at a
checkpoint drawn uniformly among the next 47 (none when that falls after the last one), from
:func:`didmem.datasets.simulate_exposures`. Each timing is the median of ``--repeat`` warm
runs (numba compiled by a first fit) of ``DiDEstimator(n_bootstrap=1000, exposure=k)
.fit(panel)`` (cells, standard errors, the bootstrap and the band), for ``k = 1`` and ``2``,
with never-treated controls (the default) and with not-yet-treated controls.

Target of issue 26: the second exposure's fit within 2x the first's.

Usage (figures in benchmarks/RESULTS.md)::

    python benchmarks/exposure_speed.py --repeat 3 --json benchmarks/results/exposure_speed.json
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
import warnings

import didmem
from didmem.datasets import simulate_exposures
from _provenance import write_rows


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cohorts", type=int, default=95)
    parser.add_argument("--units", type=int, default=150)
    parser.add_argument("--never", type=int, default=2000)
    parser.add_argument("--share", type=float, default=1 / 3)
    parser.add_argument("--max-gap", type=int, default=47)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--controls", nargs="+", default=["never_treated", "not_yet_treated"])
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", didmem.DidmemWarning)
    df, _ = simulate_exposures(n_first=args.cohorts, units_per_cohort=args.units,
                               n_never_treated=args.never, n_times=args.cohorts + 1,
                               repeat_share=args.share, gaps=range(1, args.max_gap + 1),
                               seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort=["cohort", "cohort_2"],
                         outcome="y")
    n_second = int((panel.exposure_cohorts[:, 1] < float("inf")).sum())
    rows = []
    for controls in args.controls:
        row = {"controls": controls, "panel": repr(panel), "second_exposures": n_second,
               "draws": args.draws, "repeat": args.repeat,
               "load_avg_1min_before": round(os.getloadavg()[0], 2)}
        for k in (1, 2):
            est = didmem.DiDEstimator(n_bootstrap=args.draws, seed=1, exposure=k,
                                      control_group=controls)
            est.with_params(n_bootstrap=20).fit(panel)  # compile
            sec, res = timed(lambda: est.fit(panel), args.repeat)
            row[f"exposure {k} fit s"] = round(sec, 3)
            row[f"exposure {k} cells"] = int(res.cells.size)
        row["ratio"] = round(row["exposure 2 fit s"] / row["exposure 1 fit s"], 2)
        row["max_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
        row["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
        rows.append(row)
        print(row, flush=True)
    if args.json:
        write_rows(args.json, {"args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
