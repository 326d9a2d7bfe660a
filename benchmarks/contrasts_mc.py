"""Monte Carlo of the contrasts of profiles (issue 49): coverage of the difference's band,
size of the joint tests, and the standard error saved by pairing.

Data-generating processes (cohort ``j`` treated at time ``j``, never-treated controls; unit
effects, a learning curve, N(0, 1) noise; the profile ``tau(e) = 1 / (1 + e)`` at
``e >= 0`` with instance-level heterogeneity ``tau_i = tau (1 + 0.5 eta_i)``):

* ``models_equal`` / ``models_differ``: two models scored on the same instances; model b's
  noise is ``rho`` times model a's plus its own (``rho = 0.7``), its learning curve 0.8 times
  a's, its profile ``tau`` (equal) or ``0.7 tau`` (differ). The difference is
  :func:`didmem.compare_profiles` (paired).
* ``subgroups_equal`` / ``subgroups_differ``: one panel, an instance feature drawn 50/50 for
  every instance (validation ones too), the effect in subgroup ``B`` 1.0 (equal) or 1.5
  (differ) times subgroup ``A``'s; :func:`didmem.heterogeneity` with subgroup-specific
  controls.
* ``moderator``: the effect ``tau(e) (1 + 0.3 m_i)`` with ``m ~ N(0, 1)``; the projection's
  slope is ``0.3 tau(e)`` after treatment, 0 before (:func:`didmem.moderator_slopes`).

Recorded per replication: whether the difference's (or slope's) simultaneous band covers the
true difference in every cell, and the instantaneous aggregation's band over cohorts and its
overall interval; under ``*_equal`` whether the Wald and max-t tests of equality (all
post-treatment cells) and the overall instantaneous test reject at 5%; for the pairs of
models the mean ratio of the paired to the unpaired standard error, and the standard
deviation of the estimated differences over replications against the mean paired standard
error.

Usage (the figures in benchmarks/RESULTS.md)::

    python benchmarks/contrasts_mc.py --reps 400 --json benchmarks/results/contrasts_mc.json
    python benchmarks/contrasts_mc.py --reps 400 --no-small-sample \
        --json benchmarks/results/contrasts_mc_no_small_sample.json

The Monte Carlo standard error of a rate ``p`` from ``R`` replications is
``sqrt(p (1 - p) / R)``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

import didmem
from _provenance import write_rows

SMALL = [True]  # the contrasts' small-sample correction (--no-small-sample: False)
DGPS = ("models_equal", "models_differ", "subgroups_equal", "subgroups_differ", "moderator")


def tau(event):
    return np.where(event >= 0, 1.0 / (1.0 + np.maximum(event, 0)), 0.0)


def panel(y, cohorts, times):
    n = y.shape[0]
    df = pd.DataFrame({"unit": np.repeat(np.arange(n), times.size), "time": np.tile(times, n),
                       "cohort": np.repeat(cohorts, times.size), "y": y.ravel()})
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


def draw(args, rng):
    times = np.arange(args.cohorts + 2, dtype=float)
    cohorts = np.concatenate([np.repeat(times[1:args.cohorts + 1], args.units),
                              np.full(args.never, np.inf)])
    event = times[None, :] - cohorts[:, None]
    eta = rng.standard_normal(cohorts.size)[:, None]
    alpha = rng.standard_normal(cohorts.size)[:, None]
    return times, cohorts, event, eta, alpha


def truth_frame(cells: pd.DataFrame, scale):
    return scale * tau(cells["time"].to_numpy() - cells["cohort"].to_numpy())


def covers(frame, truth):
    return bool(np.all((frame["ci_lower"] <= truth) & (truth <= frame["ci_upper"])))


def instantaneous_row(agg, truth_value):
    t = agg.table
    return (bool(np.all((t["ci_lower"] <= truth_value) & (truth_value <= t["ci_upper"]))),
            bool(agg.overall.ci_lower <= truth_value <= agg.overall.ci_upper))


def one_models(args, rng, differ: bool, est):
    times, cohorts, event, eta, alpha = draw(args, rng)
    eps_a = rng.standard_normal(event.shape)
    eps_b = args.rho * eps_a + np.sqrt(1 - args.rho ** 2) * rng.standard_normal(event.shape)
    effect = tau(event) * (1 + 0.5 * eta)
    scale_b = 0.7 if differ else 1.0
    y_a = alpha + np.log1p(times)[None, :] + effect + eps_a
    y_b = alpha + 0.8 * np.log1p(times)[None, :] + scale_b * effect + eps_b
    diff = didmem.compare_profiles(est.fit(panel(y_a, cohorts, times)),
                                   est.fit(panel(y_b, cohorts, times)),
                                   seed=int(rng.integers(2**31)), small_sample=SMALL[0])
    cells = diff.to_frame()
    d_true = (1 - scale_b) * tau(cells["time"] - cells["cohort"])
    inst = diff.aggregate("instantaneous")
    keys_cover, overall_cover = instantaneous_row(inst, 1 - scale_b)
    row = {"band_covers": covers(cells, d_true), "inst_band_covers": keys_cover,
           "inst_overall_covers": overall_cover,
           "se_ratio": float(np.mean(cells["std_error"] / cells["unpaired_std_error"])),
           "overall_diff": inst.overall.estimate, "overall_se": inst.overall.std_error,
           "overall_unpaired_se": inst.unpaired_overall_std_error}
    if not differ:
        row |= {"wald_rejects": diff.test("wald").pvalue < 0.05,
                "max_t_rejects": diff.test("max_t").pvalue < 0.05,
                "inst_rejects": not (inst.overall.ci_lower <= 0 <= inst.overall.ci_upper)}
    return row


def one_subgroups(args, rng, differ: bool, est):
    times, cohorts, event, eta, alpha = draw(args, rng)
    group = rng.integers(0, 2, cohorts.size)
    ratio = 1.5 if differ else 1.0
    effect = tau(event) * (1 + 0.5 * eta) * np.where(group == 1, ratio, 1.0)[:, None]
    y = alpha + np.log1p(times)[None, :] + effect + rng.standard_normal(event.shape)
    feature = pd.Series(np.where(group == 1, "B", "A"), index=np.arange(cohorts.size),
                        name="feature")
    het = didmem.heterogeneity(panel(y, cohorts, times), feature, estimator=est,
                               seed=int(rng.integers(2**31)), small_sample=SMALL[0])
    diff = het.difference("B", "A")
    cells = diff.to_frame()
    inst = diff.aggregate("instantaneous")
    keys_cover, overall_cover = instantaneous_row(inst, ratio - 1)
    row = {"band_covers": covers(cells, (ratio - 1) * tau(cells["time"] - cells["cohort"])),
           "inst_band_covers": keys_cover, "inst_overall_covers": overall_cover}
    if not differ:
        row |= {"wald_rejects": het.joint_test("wald").pvalue < 0.05,
                "max_t_rejects": het.joint_test("max_t").pvalue < 0.05,
                "inst_rejects": het.equality("instantaneous")["pvalue"].iloc[-1] < 0.05}
    return row


def one_moderator(args, rng, est):
    times, cohorts, event, eta, alpha = draw(args, rng)
    m = rng.standard_normal(cohorts.size)
    effect = tau(event) * (1 + 0.3 * m[:, None] + 0.5 * eta)
    y = alpha + np.log1p(times)[None, :] + effect + rng.standard_normal(event.shape)
    res = didmem.moderator_slopes(panel(y, cohorts, times),
                                  pd.Series(m, index=np.arange(m.size), name="m"),
                                  estimator=est, seed=int(rng.integers(2**31)),
                                  small_sample=SMALL[0])
    cells = res.to_frame()
    dyn = res.aggregate("dynamic")
    keys = dyn[~dyn["overall"]]
    inst = res.aggregate("instantaneous")
    return {"band_covers": covers(cells, 0.3 * tau(cells["time"] - cells["cohort"])),
            "dynamic_band_covers": covers(keys, 0.3 * tau(keys["event_time"].to_numpy())),
            "inst_overall_covers": bool(inst["ci_lower"].iloc[-1] <= 0.3
                                        <= inst["ci_upper"].iloc[-1])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--cohorts", type=int, default=4)
    parser.add_argument("--units", type=int, default=60, help="instances per cohort")
    parser.add_argument("--never", type=int, default=200, help="never-treated instances")
    parser.add_argument("--rho", type=float, default=0.7)
    parser.add_argument("--dgp", nargs="+", choices=DGPS, default=list(DGPS))
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--json", default=None)
    parser.add_argument("--no-small-sample", action="store_true",
                        help="R's rule: analytic standard errors and normal-scale multipliers")
    args = parser.parse_args()
    est = didmem.DiDEstimator(n_bootstrap=0)
    SMALL[0] = not args.no_small_sample
    out = []
    for k, dgp in enumerate(args.dgp):
        rng = np.random.default_rng([args.seed, DGPS.index(dgp)])
        start = time.perf_counter()
        rows = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(args.reps):
                if dgp.startswith("models"):
                    rows.append(one_models(args, rng, dgp.endswith("differ"), est))
                elif dgp.startswith("subgroups"):
                    rows.append(one_subgroups(args, rng, dgp.endswith("differ"), est))
                else:
                    rows.append(one_moderator(args, rng, est))
        frame = pd.DataFrame(rows)
        summary = {"dgp": dgp, "small_sample": SMALL[0], "reps": args.reps, "cohorts": args.cohorts,
                   "units": args.units, "never": args.never,
                   "seconds": round(time.perf_counter() - start, 1)}
        for col in frame.columns:
            if frame[col].dtype == bool:
                p = float(frame[col].mean())
                summary[col] = p
                summary[col + "_mc_se"] = float(np.sqrt(p * (1 - p) / args.reps))
        if "se_ratio" in frame:
            summary["se_ratio_mean"] = float(frame["se_ratio"].mean())
            summary["overall_sd_over_reps"] = float(frame["overall_diff"].std(ddof=1))
            summary["overall_mean_paired_se"] = float(frame["overall_se"].mean())
            summary["overall_mean_unpaired_se"] = float(frame["overall_unpaired_se"].mean())
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary.items()},
              flush=True)
        out.append(summary)
    if args.json:
        write_rows(args.json, out)


if __name__ == "__main__":
    main()
