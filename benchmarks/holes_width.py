"""Issue 50: coverage and width of the default (small-sample) intervals on panels with holes.

Each replication draws a balanced panel with a known profile, removes rows by one of three
patterns, and fits ``DiDEstimator()`` (defaults: Welch-t correction, Gaussian multipliers,
1,000 draws) to the panel with holes and to the same panel before the rows were removed:

* ``random``: each (unit, checkpoint) row missing with probability ``--missing`` (issue 50);
* ``late``: missing with probability rising linearly over the checkpoints (0 at the first,
  ``2 * missing`` at the last: holes concentrated late in training);
* ``by_cohort``: every other cohort (and every other never-treated unit) missing rows with
  probability ``2 * missing``, the others complete.

Data-generating processes: ``ar1`` (issue 50's: 20 cohorts of 15-30 instances, 300
never-treated, 30 checkpoints, unit effects N(0, 1), AR(1) noise with coefficient 0.7 and
unit variance, a decaying effect ``1 / (1 + e)``) and the two of issue 25
(``small_sample_coverage.py``: ``normal``, ``hetero``; 8 cohorts of ``--units``, 200
never-treated, 10 checkpoints); and ``walk`` (issue 50's second round: random-walk noise, 8 cohorts of
``--units``, 150 never-treated, 10 checkpoints; the outcomes of a unit at two checkpoints
correlate strongly, so the parts of a cell's variance that share units are most dependent)
with normal innovations, ``skewwalk`` with skewed ones (centred chi-square, 3 df).

Per row: pointwise coverage of the cells' 95% t intervals (mean over cells, Monte Carlo
error over replications), simultaneous coverage of the band, the share of cells with a
critical value above 10 and the mean largest one, the share of post-treatment cells whose
band excludes zero, and the width ratio: each cell's mean pointwise half-width with holes over
what the balanced panel's implies, ``mean hw_balanced * sqrt(Var(tau_holes) / Var(tau_balanced))``
(variances of the estimates over the replications); its mean over cells is ``width_ratio``
(1 = exactly the width the variance ratio implies). ``pointwise_before_issue50`` is the
pointwise coverage of the same fits' intervals under the rule before issue 50 (the plug-in
parts of :meth:`~didmem.inference.holes.influence.HolesInfluence.observation_groups` with their own
units' counts). Usage::

    nice -n 15 python benchmarks/holes_width.py --dgp ar1 --pattern random --reps 200
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

import didmem
from didmem.inference.small_sample import block_welch, t_critical_values
from _provenance import add_rows
from small_sample_coverage import simulate

DGPS = {"ar1": 21, "normal": 6, "hetero": 7, "walk": 31, "skewwalk": 32}
PATTERNS = {"random": 1, "late": 2, "by_cohort": 3}


def simulate_ar1(rng, n_cohorts=20, sizes=(15, 30), n_never=300, n_times=30, rho=0.7):
    """Issue 50's panel: cohort j (1..20) treated at checkpoint j + 4, sizes drawn in
    ``sizes``, AR(1) noise; returns the frame and the truth (cohort, time, tau)."""
    first = 5
    counts = rng.integers(sizes[0], sizes[1] + 1, n_cohorts)
    cohorts = np.concatenate([np.repeat(first + np.arange(n_cohorts, dtype=float), counts),
                              np.full(n_never, np.inf)])
    n = cohorts.size
    eps = np.empty((n, n_times))
    eps[:, 0] = rng.standard_normal(n)
    for t in range(1, n_times):
        eps[:, t] = rho * eps[:, t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal(n)
    times = np.arange(n_times, dtype=float)
    event = times[None, :] - cohorts[:, None]
    tau = np.where(event >= 0, 1.0 / (1 + np.maximum(event, 0)), 0.0)
    y = rng.standard_normal(n)[:, None] + np.log1p(times)[None, :] + tau + eps
    df = pd.DataFrame({"unit": np.repeat(np.arange(n), n_times), "time": np.tile(times, n),
                       "cohort": np.repeat(cohorts, n_times), "y": y.ravel()})
    g, t = np.meshgrid(first + np.arange(n_cohorts, dtype=float), times, indexing="ij")
    truth = pd.DataFrame({"cohort": g.ravel(), "time": t.ravel()})
    truth["tau"] = np.where(truth["time"] >= truth["cohort"],
                            1.0 / (1 + truth["time"] - truth["cohort"]), 0.0)
    return df, truth


def simulate_walk(rng, units, n_cohorts=8, n_never=150, n_times=10, skewed=False):
    """Random-walk noise (a unit root: each unit's level drifts and the outcomes at two
    checkpoints correlate strongly, most for near ones) with unit-variance innovations,
    normal or (``skewed``) centred chi-square with 3 df; cohorts of ``units`` treated at
    checkpoints 2-9, ``n_never`` never-treated, effect ``1 / (1 + e)``."""
    cohorts = np.concatenate([np.repeat(2 + np.arange(n_cohorts, dtype=float), units),
                              np.full(n_never, np.inf)])
    n = cohorts.size
    innov = ((rng.chisquare(3, (n, n_times)) - 3) / np.sqrt(6) if skewed
             else rng.standard_normal((n, n_times)))
    eps = np.cumsum(innov, axis=1)
    times = np.arange(n_times, dtype=float)
    event = times[None, :] - cohorts[:, None]
    tau = np.where(event >= 0, 1.0 / (1 + np.maximum(event, 0)), 0.0)
    y = rng.standard_normal(n)[:, None] + np.log1p(times)[None, :] + tau + eps
    df = pd.DataFrame({"unit": np.repeat(np.arange(n), n_times), "time": np.tile(times, n),
                       "cohort": np.repeat(cohorts, n_times), "y": y.ravel()})
    g, t = np.meshgrid(2 + np.arange(n_cohorts, dtype=float), times, indexing="ij")
    truth = pd.DataFrame({"cohort": g.ravel(), "time": t.ravel()})
    truth["tau"] = np.where(truth["time"] >= truth["cohort"],
                            1.0 / (1 + truth["time"] - truth["cohort"]), 0.0)
    return df, truth


def draw(dgp, units, rng):
    if dgp == "ar1":
        return simulate_ar1(rng)
    if dgp in ("walk", "skewwalk"):
        return simulate_walk(rng, units, skewed=dgp == "skewwalk")
    return simulate(dgp, 8, units, 200, 10, int(rng.integers(2**62)))


def holes(df, pattern, missing, rng):
    """The rows kept under ``pattern`` (see the module notes)."""
    time = df["time"].to_numpy()
    times = np.sort(np.unique(time))
    if pattern == "random":
        p = np.full(len(df), missing)
    elif pattern == "late":
        p = 2 * missing * np.searchsorted(times, time) / (times.size - 1)
    else:
        cohort = df["cohort"].to_numpy()
        finite = np.isfinite(cohort)
        rank = np.searchsorted(np.unique(cohort[finite]), cohort)
        odd = np.where(finite, rank % 2 == 1, df["unit"].to_numpy() % 2 == 1)
        p = np.where(odd, 2 * missing, 0.0)
    return df[rng.random(len(df)) >= p]


def measures(res, truth):
    frame = res.to_frame().merge(truth, on=["cohort", "time"], how="left")
    tau = np.where(frame["post"], frame["tau"], 0.0)
    est = frame["estimate"].to_numpy()
    se = res.std_errors
    corr = res.inference.correction
    df = corr.df if corr is not None else np.full(se.shape, np.inf)
    half = t_critical_values(1 - res.alpha / 2, df) * se
    live = np.isfinite(half)
    crit = res.cell_critical_values if res.cell_critical_values is not None else \
        np.full(se.shape, res.critical_value)
    lo, hi = frame["ci_lower"].to_numpy(), frame["ci_upper"].to_numpy()
    band_ok = np.isfinite(lo)
    post = frame["post"].to_numpy() & band_ok
    before = np.nan  # the pointwise coverage of the rule before issue 50 (same fit)
    influence = res.inference.influence
    if corr is not None and hasattr(influence, "observation_groups"):
        var_old, df_old = block_welch(*influence.observation_groups())
        half_old = t_critical_values(1 - res.alpha / 2, df_old) * np.sqrt(var_old)
        ok = live & np.isfinite(half_old)
        before = float(np.mean(np.abs(est - tau)[ok] <= half_old[ok]))
    return {
        "before50": before,
        "est": np.where(live, est, np.nan), "half": np.where(live, half, np.nan),
        "pointwise": float(np.mean(np.abs(est - tau)[live] <= half[live])),
        "simultaneous": bool(np.all((lo[band_ok] <= tau[band_ok]) & (tau[band_ok] <= hi[band_ok]))),
        "crit_above_10": float(np.mean(crit[band_ok] > 10)),
        "max_crit": float(np.nanmax(crit[band_ok])),
        "excludes_zero": float(np.mean((lo[post] > 0) | (hi[post] < 0))),
    }


def study(dgp, pattern, units, missing, reps, draws, seed):
    rng = np.random.default_rng([seed, DGPS[dgp], PATTERNS[pattern], units])
    keep = {"holes": [], "balanced": []}
    for _ in range(reps):
        df, truth = draw(dgp, units, rng)
        boot_seed = int(rng.integers(2**62))
        for name, frame, balance in (("balanced", df, None),
                                     ("holes", holes(df, pattern, missing, rng), "keep")):
            kw = {"balance": balance} if balance else {}
            panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort",
                                 outcome="y", **kw)
            res = didmem.DiDEstimator(n_bootstrap=draws, seed=boot_seed).fit(panel)
            keep[name].append(measures(res, truth))
    rows = []
    n_cells = keep["holes"][0]["est"].size
    est = {k: np.array([m["est"] for m in v]) for k, v in keep.items()}
    half = {k: np.array([m["half"] for m in v]) for k, v in keep.items()}
    with np.errstate(invalid="ignore", divide="ignore"):
        implied = np.nanmean(half["balanced"], axis=0) * np.sqrt(
            np.nanvar(est["holes"], axis=0, ddof=1) / np.nanvar(est["balanced"], axis=0, ddof=1))
        ratio = np.nanmean(half["holes"], axis=0) / implied
    ratio = ratio[np.isfinite(ratio)]
    for name, values in keep.items():
        pw = np.array([m["pointwise"] for m in values])
        sim = np.mean([m["simultaneous"] for m in values])
        rows.append({
            "dgp": dgp, "pattern": pattern, "panel": name,
            "missing": missing if name == "holes" else 0.0,
            "units_per_cohort": "15-30" if dgp == "ar1" else units, "cells": int(n_cells),
            "reps": reps, "draws": draws,
            "pointwise": round(float(pw.mean()), 4),
            "pointwise_mc_se": round(float(pw.std(ddof=1) / np.sqrt(reps)), 4),
            "simultaneous": round(float(sim), 4),
            "simultaneous_mc_se": round(float(np.sqrt(sim * (1 - sim) / reps)), 4),
            "crit_above_10": round(float(np.mean([m["crit_above_10"] for m in values])), 4),
            "mean_max_crit": round(float(np.mean([m["max_crit"] for m in values])), 2),
            "post_excludes_zero": round(float(np.mean([m["excludes_zero"] for m in values])), 4),
        })
        before = np.array([m["before50"] for m in values])
        if np.isfinite(before).all():
            rows[-1].update({"pointwise_before_issue50": round(float(before.mean()), 4),
                             "pointwise_before_issue50_mc_se":
                                 round(float(before.std(ddof=1) / np.sqrt(reps)), 4)})
    rows[-1].update({"width_ratio": round(float(ratio.mean()), 4),
                     "width_ratio_median": round(float(np.median(ratio)), 4)})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dgp", nargs="+", default=["ar1"], choices=list(DGPS))
    parser.add_argument("--pattern", nargs="+", default=["random"], choices=list(PATTERNS))
    parser.add_argument("--units", type=int, default=15, help="per cohort (issue-25 DGPs)")
    parser.add_argument("--missing", type=float, default=0.10)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", didmem.DidmemWarning)
    out = []
    for dgp in args.dgp:
        for pattern in args.pattern:
            add_rows(out, lambda: study(dgp, pattern, args.units, args.missing, args.reps,
                                        args.draws, args.seed), args.json)


if __name__ == "__main__":
    main()
