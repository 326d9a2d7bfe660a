"""The lab with repeats: does DiD for the second exposure find the exact truth?

Runs ``didmem lab --exposures 2`` (the demo scale by default, ``--quick`` for the quick
one), fits ``DiDEstimator(exposure=2)`` (history-matched; and the naive ``history="ignored"``
beside it) on ``panel.parquet`` and compares every post-treatment cell with the exact truth
of ``truth.parquet`` (``exposure == 2``: retrainings without the second exposures of the
cohort's instances). Reports the correlation of the estimates with the truth over the
post-treatment cells, the share of them that the simultaneous 95% band covers, and the lab's
wall-clock time per stage.

Targets of issue 26: at the demo scale correlation >= 0.8 and band coverage >= 90%; the
quick scale in <= 30 s.

Usage (the figures in benchmarks/RESULTS.md)::

    cd benchmarks && nice -n 10 python lab_exposures.py --out /tmp/labx_big \\
        --seeds 0 1 2 3 --json results/lab_exposures.json
    nice -n 10 python benchmarks/lab_exposures.py --quick --out /tmp/lab_exposures_quick
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import didmem
from didmem.lab import run as run_lab
from _provenance import write_rows


def evaluate(lab, metric: str, draws: int) -> list[dict]:
    panel = didmem.Panel(lab.panel, unit="unit", time="time",
                         cohort=["cohort", "cohort_2"], outcome=metric)
    truth = lab.truth[(lab.truth["exposure"] == 2) & (lab.truth["metric"] == metric)]
    rows = []
    for history in ("matched", "ignored"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", didmem.SmallCohortWarning)
            res = didmem.DiDEstimator(exposure=2, history=history, n_bootstrap=draws,
                                      seed=0).fit(panel)
        frame = res.to_frame().merge(truth, on=["cohort", "time"], validate="one_to_one")
        post = frame[frame["post"]]
        covered = (post["ci_lower"] <= post["tau"]) & (post["tau"] <= post["ci_upper"])
        rows.append({
            "history": history, "metric": metric, "post_cells": int(len(post)),
            "correlation": float(np.corrcoef(post["estimate"], post["tau"])[0, 1]),
            "correlation_total": float(np.corrcoef(post["estimate"], post["tau_total"])[0, 1]),
            "band_coverage_total": float(((post["ci_lower"] <= post["tau_total"])
                                          & (post["tau_total"] <= post["ci_upper"])).mean()),
            "spillover_abs_mean": float(post["spillover"].abs().mean()),
            "band_coverage": float(covered.mean()),
            "mean_abs_error": float(np.abs(post["estimate"] - post["tau"]).mean()),
            "mean_tau": float(post["tau"].mean()),
        })
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory of the lab runs")
    parser.add_argument("--quick", action="store_true", help="the quick scale")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--repeat-share", type=float, default=None,
                        help="LabConfig.repeat_share (default: the lab's)")
    parser.add_argument("--repeat-gap", default=None,
                        help="LabConfig.repeat_gap (default: the lab's)")
    parser.add_argument("--metric", default="mean_token_loglik")
    parser.add_argument("--draws", type=int, default=999)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = []
    for seed in args.seeds:
        start = time.perf_counter()
        design = {name: value for name, value in (("repeat_share", args.repeat_share),
                                                  ("repeat_gap", args.repeat_gap))
                  if value is not None}
        lab = run_lab(Path(args.out) / f"seed{seed}", quick=args.quick, seed=seed,
                      overwrite=True, exposures=2, **design)
        seconds = time.perf_counter() - start
        for row in evaluate(lab, args.metric, args.draws):
            cohorts = lab.panel.groupby("unit")["cohort_2"].first().value_counts()
            row.update(seed=seed, scale="quick" if args.quick else "demo",
                       second_cohort_sizes={str(k): int(v) for k, v in cohorts.sort_index().items()},
                       lab_seconds=round(seconds, 1),
                       stages={k: round(v, 1) for k, v in lab.timings.items()})
            rows.append(row)
            print(f"seed {seed} {row['scale']} {row['history']:8s} cells {row['post_cells']}  "
                  f"correlation {row['correlation']:.3f}  band coverage "
                  f"{row['band_coverage']:.3f}  (total effect: {row['correlation_total']:.3f}, "
                  f"{row['band_coverage_total']:.3f})  mean |error| {row['mean_abs_error']:.4f} "
                  f"(mean tau {row['mean_tau']:.4f})  lab {seconds:.1f} s {row['stages']}",
                  flush=True)
    summary = pd.DataFrame(rows).groupby("history")[
        ["correlation", "band_coverage", "correlation_total", "band_coverage_total"]].agg(
        ["mean", "std", "min", "max"])
    print(summary.to_string())
    if args.json:
        write_rows(args.json, {"args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
