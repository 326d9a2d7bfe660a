"""The three estimands across runs against the lab's exact truth (``didmem lab --runs R``).

Reads a lab folder of several runs (``DIR/panel.parquet`` and ``DIR/truth.parquet``, both
with a ``run`` column), fits :class:`didmem.RunsEstimator` on one metric and reports

* the share of post-treatment cells in which the pooled band covers the mean truth over the
  runs (target: at least 90%);
* the Pearson correlation with the truth, over post-treatment cells, of the within-instance
  estimates (truth: the mean over runs, and the pair-weighted mean over the runs whose pairs
  enter each cell, counted from the panel's cohorts) and of each run's DiD (truth: that run's
  own), on the cells the within-instance comparison has (the same cells for both) and, for
  the runs, on all their post-treatment cells; and their RMSEs;
* the standard errors: within-instance over the pooled DiD's with the runs held fixed, and
  over one run's DiD, median over the shared cells.

Usage (figures in benchmarks/RESULTS.md)::

    didmem lab --runs 3 --out lab-runs3
    nice -n 15 python benchmarks/runs_lab_check.py --lab lab-runs3 \\
        --json benchmarks/results/runs_lab_check.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

import didmem
from _provenance import provenance


def pair_weighted_truth(cells, cohorts, truth):
    """Each cell's truth as the within-instance comparison weighs the runs: the mean of
    tau_r(g, c) over the (run, instance) pairs with a control run (runs x instances cohorts)."""
    tau = truth.set_index(["run", "cohort", "time"])["tau"]
    runs = list(truth["run"].drop_duplicates().sort_values())
    coh = np.where(np.isnan(cohorts), np.inf, cohorts)
    out = []
    for g, c, b in zip(cells["cohort"], cells["time"], cells["base_time"]):
        later = coh > max(c, b)
        w = np.array([((coh[j] == g) & (later.sum(axis=0) - later[j] > 0)).sum()
                      for j in range(len(runs))], dtype=float)
        out.append(np.nan if w.sum() == 0 else
                   sum(wj * tau.get((r, g, c), np.nan) for r, wj in zip(runs, w)) / w.sum())
    return np.array(out)


def corr(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    keep = np.isfinite(a) & np.isfinite(b)
    return float(np.corrcoef(a[keep], b[keep])[0, 1]) if keep.sum() > 2 else float("nan")


def rmse(a, b) -> float:
    d = np.asarray(a, float) - np.asarray(b, float)
    return float(np.sqrt(np.nanmean(d ** 2)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab", required=True, help="a lab folder written with --runs R")
    parser.add_argument("--metric", default="mean_token_loglik")
    parser.add_argument("--draws", type=int, default=999)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    lab = Path(args.lab)
    frame = pd.read_parquet(lab / "panel.parquet")
    truth = pd.read_parquet(lab / "truth.parquet")
    truth = truth[truth["metric"] == args.metric][["run", "cohort", "time", "tau"]]
    start = time.perf_counter()
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort",
                         outcome=args.metric, run="run")
    res = didmem.RunsEstimator(n_bootstrap=args.draws, seed=0).fit(panel)
    seconds = time.perf_counter() - start
    mean_truth = truth.groupby(["cohort", "time"], as_index=False)["tau"].mean()
    pooled = res.pooled.to_frame().merge(mean_truth, on=["cohort", "time"], how="inner")
    post = pooled[pooled["post"]]
    covered = (post["ci_lower"] <= post["tau"]) & (post["tau"] <= post["ci_upper"])

    within = res.within.to_frame()
    cohorts = np.stack([panel.run_panel(r).cohorts for r in panel.runs])
    within["tau_pairs"] = pair_weighted_truth(within, cohorts, truth)
    within = within.merge(mean_truth, on=["cohort", "time"], how="left")
    w_post = within[within["post"] & np.isfinite(within["estimate"])]
    keys = w_post[["cohort", "time"]]
    runs = {}
    for r in panel.runs:
        est = res.per_run[r].to_frame().merge(truth[truth["run"] == r], on=["cohort", "time"])
        est_post = est[est["post"]]
        shared = est_post.merge(keys, on=["cohort", "time"])
        runs[str(r)] = {
            "corr_all_post": corr(est_post["estimate"], est_post["tau"]),
            "rmse_all_post": rmse(est_post["estimate"], est_post["tau"]),
            "n_all_post": int(len(est_post)),
            "corr_within_cells": corr(shared["estimate"], shared["tau"]),
            "rmse_within_cells": rmse(shared["estimate"], shared["tau"]),
        }
    shared_se = w_post[["cohort", "time", "std_error"]].merge(
        res.pooled.to_frame()[["cohort", "time", "instance_se"]], on=["cohort", "time"]).merge(
        res.per_run[panel.runs[0]].to_frame()[["cohort", "time", "std_error"]].rename(
            columns={"std_error": "run_se"}), on=["cohort", "time"])
    row = {
        "lab": str(lab), "metric": args.metric, "runs": len(panel.runs),
        "instances": panel.n_units, "fit_seconds": round(seconds, 2),
        "pooled_post_cells": int(len(post)),
        "pooled_band_covers_mean_truth": float(covered.mean()),
        "pooled_band": res.pooled.band,
        "between_runs": res.between_runs(),
        "within_post_cells": int(len(w_post)),
        "within_corr_pair_truth": corr(w_post["estimate"], w_post["tau_pairs"]),
        "within_corr_mean_truth": corr(w_post["estimate"], w_post["tau"]),
        "within_rmse_pair_truth": rmse(w_post["estimate"], w_post["tau_pairs"]),
        "within_band_covers_pair_truth": float(
            ((w_post["ci_lower"] <= w_post["tau_pairs"])
             & (w_post["tau_pairs"] <= w_post["ci_upper"])).mean()),
        "within_pretest": list(res.within.pretest),
        "per_run": runs,
        "within_se_over_pooled_fixed_se": float(np.median(shared_se["std_error"]
                                                          / shared_se["instance_se"])),
        "within_se_over_one_run_se": float(np.median(shared_se["std_error"]
                                                     / shared_se["run_se"])),
        "load_average": os.getloadavg(),
    }
    print(res.summary())
    print(json.dumps(row, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"provenance": provenance(), "rows": [row]}, fh, indent=1)


if __name__ == "__main__":
    main()
