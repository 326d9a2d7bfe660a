"""Monte Carlo coverage of the pooled and the within-instance bands across training runs.

Each replication draws :func:`didmem.datasets.simulate_runs` (the same instances in every
run, each run with its own random data order), fits :class:`didmem.RunsEstimator` and checks

* the pooled profile's simultaneous 95% band (runs a random factor) against the mean over
  the population of runs, ``tau(g, c)`` (``tau_mean``; 0 before treatment), over every
  cell; and, for contrast, the band a fit with the runs held fixed would draw
  (``instance_se`` times the Gaussian sup-t value of the instance part: no between-run
  variance, no run degrees of freedom);
* the within-instance comparison's simultaneous 95% band against its target given the
  runs: for each cell the mean over its (run, instance) pairs of the run's true effect
  ``tau_r(g, c)`` (0 before treatment), with the pairs counted here from the cohorts, apart
  from the estimator's code;
* the within-instance standard error against the across-instance DiD's on the same data:
  the pooled DiD's with the runs held fixed (``instance_se``, the same conditioning) and one
  run's DiD (run 0), median over the shared post-treatment cells;
* the within-instance Wald pre-test's rejection rate at 5% (its size: trends are parallel);
* the efficient combination of the pooled DiD with the runs held fixed and the
  within-instance comparison (``combined_*`` columns, issue 50): its standard error against
  the pooled fixed-run one (never above it) and the within-instance one, and the pointwise
  coverage of its 95% intervals (normal quantile) over the post-treatment cells, against the
  runs' true effects averaged with equal weights and with the cell's pair weights.

DGPs: ``order`` (runs differ by data order only, mild instance paths), ``difficulty``
(instance difficulty and instance learning paths vary strongly, and each run has its own
shift per checkpoint, as weight seeds would), ``few_runs`` (three runs whose memorisation
differs much: the between-run part dominates the pooled band).

Usage (the figures in benchmarks/RESULTS.md and docs/runs.rst)::

    nice -n 15 python benchmarks/runs_montecarlo.py --reps 200 --draws 999 --seed0 80000 \\
        --json benchmarks/results/runs_montecarlo.json

The pooled band's plug-in rule was chosen on seeds 20000-20399 (the default ``--seed0``);
report figures on other seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import didmem
from didmem.datasets import simulate_runs
from didmem.estimators._runs_fit import _run_cells
from didmem.inference.bands import simultaneous_band
from didmem.inference.runs.pooled import _psd_root, pooled_cells
from _provenance import provenance

DGPS = {
    "order": dict(n_runs=5, n_cohorts=4, units_per_cohort=40, n_never_treated=80, n_times=6,
                  unit_sd=1.0, path_sd=0.2, noise_sd=0.3, effect_sd=0.2, run_effect_sd=0.1,
                  run_shift_sd=0.0),
    "difficulty": dict(n_runs=5, n_cohorts=4, units_per_cohort=40, n_never_treated=80,
                       n_times=6, unit_sd=3.0, path_sd=1.0, noise_sd=0.3, effect_sd=0.2,
                       run_effect_sd=0.2, run_shift_sd=0.1),
    "few_runs": dict(n_runs=3, n_cohorts=4, units_per_cohort=40, n_never_treated=80,
                     n_times=6, unit_sd=1.0, path_sd=0.5, noise_sd=0.3, effect_sd=0.2,
                     run_effect_sd=0.3, run_shift_sd=0.05),
}


def within_truth(cells, cohorts, truth, times):
    """Each within-instance cell's target given the runs: the mean over its pairs of the
    run's true effect (counted from the cohorts, runs x instances)."""
    n_runs = cohorts.shape[0]
    tau = truth.set_index(["run", "cohort", "time"])["tau"]
    out = np.zeros(len(cells))
    for j, (g, c, b) in enumerate(zip(cells["cohort"], cells["time"], cells["base_time"])):
        if c < g:
            continue  # untreated in every pair: 0
        thr = max(c, b)
        later = np.where(np.isnan(cohorts), np.inf, cohorts) > thr
        weights = []
        for r in range(n_runs):
            others = later.sum(axis=0) - later[r]
            weights.append(int(((cohorts[r] == g) & (others > 0)).sum()))
        weights = np.array(weights, dtype=float)
        if weights.sum() == 0:
            out[j] = np.nan
            continue
        out[j] = sum(w * tau[(r, g, c)] for r, w in enumerate(weights)) / weights.sum()
    return out


def one_replication(dgp: str, seed: int, draws: int) -> dict:
    df, truth = simulate_runs(**DGPS[dgp], seed=seed)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y", run="run")
    res = didmem.RunsEstimator(n_bootstrap=draws, seed=seed).fit(panel)
    mean_truth = truth[truth["run"] == 0][["cohort", "time", "tau_mean"]]
    pooled = res.pooled.to_frame().merge(mean_truth, on=["cohort", "time"], how="left")
    target = pooled["tau_mean"].fillna(0.0).to_numpy()
    inside = (pooled["ci_lower"] <= target) & (target <= pooled["ci_upper"])
    # the band with the runs held fixed: the instance part of the variance alone and its
    # Gaussian sup-t value, as a fit that ignored the between-run variance would draw it
    cells = pooled_cells([_run_cells(res.per_run[r], panel.units) for r in res.runs])
    root = _psd_root(cells.instance_covariance)
    gauss = np.random.default_rng(seed).standard_normal((draws, root.shape[1])) @ root.T
    fixed_crit, _ = simultaneous_band(gauss, np.sqrt(np.diag(cells.instance_covariance)),
                                      0.05, np.sqrt(root.shape[1]), at_least_normal=False)
    fixed = np.abs(pooled["estimate"] - target) <= fixed_crit * pooled["instance_se"]
    within = res.within.to_frame()
    cohorts = df.pivot_table(index="run", columns="unit", values="cohort",
                             aggfunc="first", dropna=False).to_numpy()
    wt = within_truth(within, cohorts, truth, panel.times)
    live = np.isfinite(within["std_error"].to_numpy())
    w_inside = ((within["ci_lower"] <= wt) & (wt <= within["ci_upper"])).to_numpy()[live]
    post = within["post"].to_numpy() & live
    shared = within[post][["cohort", "time", "std_error"]].merge(
        res.pooled.to_frame()[["cohort", "time", "instance_se"]], on=["cohort", "time"]).merge(
        res.per_run[0].to_frame()[["cohort", "time", "std_error"]].rename(
            columns={"std_error": "run0_se"}), on=["cohort", "time"])
    # the efficient combination of the pooled DiD with the runs held fixed and the
    # within-instance comparison (issue 50): its standard error against the pooled fixed-run
    # one, and its pointwise 95% intervals against the runs-fixed target (the runs' true
    # effects averaged with equal weights, the pooled DiD's; and pair-weighted, the within's)
    tau = truth.set_index(["run", "cohort", "time"])["tau"]
    comb = within[post & np.isfinite(within["combined_std_error"].to_numpy())]
    equal = np.array([np.mean([tau[(r, g, c)] for r in res.runs]) if c >= g else 0.0
                      for g, c in zip(comb["cohort"], comb["time"])])
    pair_target = wt[post & np.isfinite(within["combined_std_error"].to_numpy())]
    half = 1.959964 * comb["combined_std_error"].to_numpy()
    est = comb["combined_estimate"].to_numpy()
    fixed_se = comb[["cohort", "time"]].merge(res.pooled.to_frame()[
        ["cohort", "time", "instance_se"]], on=["cohort", "time"])["instance_se"].to_numpy()
    stat, df_, p = res.within.pretest
    return {
        "combined_over_pooled_fixed_se": float(np.median(comb["combined_std_error"].to_numpy()
                                                         / fixed_se)),
        "combined_over_pooled_fixed_se_max": float(np.max(comb["combined_std_error"].to_numpy()
                                                          / fixed_se)),
        "combined_over_within_se": float(np.median(comb["combined_std_error"]
                                                   / comb["std_error"])),
        "combined_point_equal": float(np.mean(np.abs(est - equal) <= half)),
        "combined_point_pairs": float(np.mean(np.abs(est - pair_target) <= half)),
        "pooled_cover": bool(inside.all()), "pooled_point": float(inside.mean()),
        "pooled_fixed_cover": bool(fixed.all()),
        "pooled_se_over_instance_se": float(np.median(pooled["std_error"]
                                                      / pooled["instance_se"])),
        "within_cover": bool(w_inside.all()), "within_point": float(w_inside.mean()),
        "within_bias": float(np.nanmean((within["estimate"].to_numpy() - wt)[post])),
        "ratio_pooled_fixed": float(np.median(shared["std_error"] / shared["instance_se"])),
        "ratio_one_run": float(np.median(shared["std_error"] / shared["run0_se"])),
        "pretest_reject": bool(p < 0.05) if df_ else None,
        "run_share": res.between_runs()["run_share"],
    }


def rate(values):
    values = np.asarray(values, dtype=float)
    p = float(values.mean())
    return {"rate": p, "mc_se": float(np.sqrt(p * (1 - p) / values.size))}


def summarise(dgp: str, out: list, seconds: float) -> dict:
    pre = [o["pretest_reject"] for o in out if o["pretest_reject"] is not None]
    return {
        "dgp": dgp, "settings": DGPS[dgp], "reps": len(out), "seconds": round(seconds, 1),
        "pooled_band_coverage": rate([o["pooled_cover"] for o in out]),
        "pooled_pointwise_coverage": float(np.mean([o["pooled_point"] for o in out])),
        "pooled_fixed_run_band_coverage": rate([o["pooled_fixed_cover"] for o in out]),
        "pooled_se_over_fixed_se_median": float(np.median(
            [o["pooled_se_over_instance_se"] for o in out])),
        "within_band_coverage": rate([o["within_cover"] for o in out]),
        "within_pointwise_coverage": float(np.mean([o["within_point"] for o in out])),
        "within_mean_bias_post": float(np.mean([o["within_bias"] for o in out])),
        "within_se_over_pooled_fixed_se": {
            "median": float(np.median([o["ratio_pooled_fixed"] for o in out])),
            "q10_q90": [float(q) for q in np.quantile([o["ratio_pooled_fixed"] for o in out],
                                                      [0.1, 0.9])]},
        "within_se_over_one_run_se": {
            "median": float(np.median([o["ratio_one_run"] for o in out])),
            "q10_q90": [float(q) for q in np.quantile([o["ratio_one_run"] for o in out],
                                                      [0.1, 0.9])]},
        "within_pretest_size_5pct": rate(pre) if pre else None,
        "combined_se_over_pooled_fixed_se": {
            "median": float(np.median([o["combined_over_pooled_fixed_se"] for o in out])),
            "max_over_cells_and_reps": float(np.max(
                [o["combined_over_pooled_fixed_se_max"] for o in out]))},
        "combined_se_over_within_se_median": float(np.median(
            [o["combined_over_within_se"] for o in out])),
        "combined_pointwise_coverage_equal_weights": float(np.mean(
            [o["combined_point_equal"] for o in out])),
        "combined_pointwise_coverage_pair_weights": float(np.mean(
            [o["combined_point_pairs"] for o in out])),
        "mean_run_share_of_pooled_variance": float(np.mean([o["run_share"] for o in out])),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--dgp", nargs="+", default=list(DGPS), choices=list(DGPS))
    parser.add_argument("--draws", type=int, default=499, help="bootstrap draws per fit")
    parser.add_argument("--seed0", type=int, default=20_000,
                        help="replication r uses seed seed0 + r (the figures reported in "
                             "RESULTS.md use seeds other than those the pooled band's "
                             "plug-in rule was chosen on, 20000-20399)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = []
    for dgp in args.dgp:
        start = time.perf_counter()
        out = [one_replication(dgp, args.seed0 + r, args.draws) for r in range(args.reps)]
        row = summarise(dgp, out, time.perf_counter() - start)
        row["load_average"] = os.getloadavg()
        row["seeds"] = [args.seed0, args.seed0 + args.reps - 1]
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
        if args.json:  # written after each DGP, so a cut-off run keeps what it finished
            with open(args.json, "w") as fh:
                json.dump({"provenance": provenance(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
