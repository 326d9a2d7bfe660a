"""Issue 50: are the Welch-Satterthwaite degrees of freedom on panels with holes right?

For each replication (a panel of ``holes_width.py``'s DGPs with holes by one of its
patterns, and the same panel balanced) the fit's corrected variance ``V`` and degrees of
freedom of every cell are kept, under two rules: the parts treated as independent
(``independent``) and with the covariance of the parts that share units
(``dependent``: :meth:`~didmem.inference.holes.influence.HolesInfluence.welch_dependence`). Per cell
over the replications:

* ``var_ratio``: the Monte Carlo variance of ``V`` over the variance the degrees of freedom
  imply, ``mean(2 V**2 / df)`` (1 if the df are right; above 1: too many df);
With ``--fixed-holes`` every replication has the first one's missing rows (the issue-25
DGPs, whose panels have the same rows every time), so ``V``'s Monte Carlo variance is its
sampling variance given the pattern, which is what the degrees of freedom describe
(otherwise the pattern's own variation adds to it). Per rule, ``mean_df`` against
``mc_df = 2 mean(V)**2 / Var(V)`` (per cell, averaged over cells);

* with ``--draws``, the simultaneous band's coverage under each rule on the same fits
  (each cell's t quantile at the fit's sup-t level ``Phi(c)`` with the rule's df: a paired
  comparison);
* the tail rates of the studentised cells ``|tau_hat - tau| / sqrt(V)`` beyond the t
  quantiles at two-sided 1% and 0.1% with each cell's df (pooled over cells and
  replications; the band reads these tails).

Usage::

    nice -n 15 python benchmarks/holes_df.py --dgp normal --pattern random --reps 300
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import didmem
from scipy.special import stdtr
from didmem.inference.small_sample import block_welch, t_critical_values
from _provenance import add_rows
from holes_width import DGPS, PATTERNS, draw, holes

LEVELS = (0.01, 0.001)


def cells_of(res, truth, rules, band=False):
    frame = res.to_frame().merge(truth, on=["cohort", "time"], how="left")
    tau = np.where(frame["post"], frame["tau"], 0.0)
    err = frame["estimate"].to_numpy() - tau
    influence = res.inference.influence
    parts, n = influence.welch_groups()
    out = {"err": err}
    live = (res.inference.correction.df > 0) & np.isfinite(res.inference.correction.df)
    level = np.nan  # the band's one-sided level Phi(c) of its normal-scale sup-t value c
    if band and res.cell_critical_values is not None:
        j = int(np.flatnonzero(live)[0])
        level = float(stdtr(res.inference.correction.df[j], res.cell_critical_values[j]))
    for rule in rules:
        dep = influence.welch_dependence() if rule == "dependent" else None
        var, df = block_welch(parts, n, dep)
        var, df = np.where(live, var, np.nan), np.where(live, df, np.nan)
        band = np.nan
        if np.isfinite(level):
            crit = t_critical_values(level, df[live])
            band = float(np.all(np.abs(err[live]) <= crit * np.sqrt(var[live])))
        out[rule] = (var, df, band)
    return out


def summarise(kept, rule):
    err = np.array([k["err"] for k in kept])
    var = np.array([k[rule][0] for k in kept])
    df = np.array([k[rule][1] for k in kept])
    ok = np.all(np.isfinite(var) & np.isfinite(df), axis=0)
    band = np.array([k[rule][2] for k in kept])
    err, var, df = err[:, ok], var[:, ok], df[:, ok]
    implied = np.mean(2 * var**2 / df, axis=0)
    ratio = np.var(var, axis=0, ddof=1) / implied
    reps = var.shape[0]
    row = {"rule": rule, "cells": int(ok.sum()),
           "mean_df": round(float(df.mean()), 2),
           "mc_df": round(float(np.mean(2 * var.mean(axis=0) ** 2 / np.var(var, axis=0, ddof=1))), 2),
           "var_ratio_mean": round(float(ratio.mean()), 4),
           "var_ratio_median": round(float(np.median(ratio)), 4),
           # a cell's ratio has relative MC error about sqrt(2 / reps) (more with kurtosis)
           "var_ratio_mc_se": round(float(ratio.std(ddof=1) / np.sqrt(ratio.size)), 4)}
    if np.isfinite(band).all():
        row["simultaneous"] = round(float(band.mean()), 4)
        row["simultaneous_mc_se"] = round(float(band.std(ddof=1) / np.sqrt(reps)), 4)
    t = np.abs(err) / np.sqrt(var)
    for level in LEVELS:
        exceed = t > t_critical_values(1 - level / 2, df)
        per_rep = exceed.mean(axis=1)
        row[f"tail_{level}"] = round(float(exceed.mean()), 5)
        row[f"tail_{level}_mc_se"] = round(float(per_rep.std(ddof=1) / np.sqrt(reps)), 5)
    return row


def study(dgp, pattern, units, missing, reps, seed, fixed=False, draws=0):
    rng = np.random.default_rng([seed, DGPS[dgp], PATTERNS[pattern], units, 50])
    keep = {"holes": [], "balanced": []}
    kept = None
    for _ in range(reps):
        df, truth = draw(dgp, units, rng)
        boot_seed = int(rng.integers(2**62))
        if kept is None or not fixed:
            kept = holes(df, pattern, missing, rng).index
        for name, frame, kw in (("balanced", df, {}),
                                ("holes", df.loc[kept], {"balance": "keep"})):
            panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort",
                                 outcome="y", **kw)
            res = didmem.DiDEstimator(n_bootstrap=draws, seed=boot_seed).fit(panel)
            rules = ("independent", "dependent") if name == "holes" else ("independent",)
            keep[name].append(cells_of(res, truth, rules, band=draws > 0))
    rows = []
    for name, rules in (("balanced", ("independent",)), ("holes", ("independent", "dependent"))):
        for rule in rules:
            row = {"dgp": dgp, "pattern": pattern, "panel": name, "reps": reps,
                   "holes_fixed": fixed,
                   "missing": missing if name == "holes" else 0.0}
            row.update(summarise(keep[name], rule))
            rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dgp", nargs="+", default=["normal"], choices=list(DGPS))
    parser.add_argument("--pattern", nargs="+", default=["random"], choices=list(PATTERNS))
    parser.add_argument("--units", type=int, default=15)
    parser.add_argument("--missing", type=float, default=0.10)
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=0,
                        help="bootstrap draws: with draws, the band's coverage under each rule "
                             "(the fit's normal-scale sup-t value, each rule's t quantiles)")
    parser.add_argument("--fixed-holes", action="store_true",
                        help="the first replication's missing rows in every replication "
                             "(the df are conditional on the pattern; issue-25 DGPs only)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", didmem.DidmemWarning)
    out = []
    for dgp in args.dgp:
        for pattern in args.pattern:
            add_rows(out, lambda: study(dgp, pattern, args.units, args.missing, args.reps,
                                        args.seed, args.fixed_holes, args.draws), args.json)


if __name__ == "__main__":
    main()
