"""Coverage of membership-AUC intervals with few instances per split and AUCs near 1 (issue 50).

Usage::

    nice -n 15 python benchmarks/auc_coverage.py --reps 2000 --boot-reps 400 \
        --json benchmarks/results/auc_coverage.json

Four 95% intervals of the AUC of ``m`` member against ``n`` non-member scores:

* ``delong_wald``: :math:`\\hat\\theta \\pm z\\,\\widehat{se}_{DeLong}`, cut to [0, 1] (the
  estimator's interval before issue 50);
* ``delong_logit``: the same on the logit scale, :math:`\\mathrm{logit}\\,\\hat\\theta \\pm
  z\\,\\widehat{se} / (\\hat\\theta(1 - \\hat\\theta))`, mapped back (no interval, counted as
  a miss, when :math:`\\hat\\theta` is 0 or 1);
* ``newcombe``: Newcombe's (2006) Method 5 score interval
  (:func:`didmem.estimators._auc.auc_interval` without ``variance``);
* ``newcombe_delong``: the same, widened by the ratio of DeLong's variance to the one it
  inverts where DeLong's is the larger;
* ``newcombe_delong_t``: the same with DeLong's variance scaled by the squared ratio of the t
  quantile at its Welch-Satterthwaite degrees of freedom to z (the estimator's interval
  since issue 50);
* ``bootstrap``: the percentile interval of a bootstrap stratified by split (``--boot``
  resamples; on the first ``--boot-reps`` replications only, for time).

Data-generating processes (the true AUC exact or numerical, never estimated by Monte Carlo):

* ``normal``: members N(d, 1), non-members N(0, 1); AUC = Phi(d / sqrt 2);
* ``cauchy``: members Cauchy(d, 1), non-members Cauchy(0, 1) (heavy tails); the difference
  is Cauchy(d, 2), so AUC = 1/2 + arctan(d / 2) / pi;
* ``discrete``: normal scores rounded down to a grid of 0.5 (about 8 distinct values, many
  ties); AUC = P(X > Y) + P(X = Y) / 2, summed over the grid, with d found by root search.

Sizes (m members, n non-members) 10 v 30, 25 v 25, 30 v 100 and AUCs 0.7, 0.9, 0.97. Each
cell reports the coverage with its Monte Carlo standard error sqrt(p(1-p)/reps), the mean
width, and how often the AUC estimate is exactly 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import brentq
from scipy.stats import cauchy, norm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import provenance  # noqa: E402

from didmem.estimators._auc import auc_interval, delong_auc, delong_df  # noqa: E402

SIZES = [(10, 30), (25, 25), (30, 100)]
AUCS = [0.7, 0.9, 0.97]
Z = float(norm.ppf(0.975))
GRID = 0.5
METHODS = ("delong_wald", "delong_logit", "bootstrap", "newcombe", "newcombe_delong",
           "newcombe_delong_t")


def _discrete_auc(d: float) -> float:
    edges = np.arange(-12.0, 20.0, GRID)
    px = np.diff(norm.cdf(edges, loc=d))
    py = np.diff(norm.cdf(edges))
    below = np.concatenate([[0.0], np.cumsum(py)[:-1]])
    return float(np.sum(px * (below + 0.5 * py)))


def shift_for(dgp: str, auc: float) -> float:
    """The location shift ``d`` whose true AUC is ``auc``."""
    if dgp == "normal":
        return float(np.sqrt(2) * norm.ppf(auc))
    if dgp == "cauchy":
        return float(2 * np.tan(np.pi * (auc - 0.5)))
    return float(brentq(lambda d: _discrete_auc(d) - auc, 0.0, 10.0, xtol=1e-12))


def true_auc(dgp: str, d: float) -> float:
    if dgp == "normal":
        return float(norm.cdf(d / np.sqrt(2)))
    if dgp == "cauchy":
        return float(cauchy.cdf(d / 2))
    return _discrete_auc(d)


def draw(dgp, d, m, n, rng):
    if dgp == "cauchy":
        return rng.standard_cauchy(m) + d, rng.standard_cauchy(n)
    x, y = rng.normal(d, 1, m), rng.normal(0, 1, n)
    if dgp == "discrete":
        x, y = np.floor(x / GRID) * GRID, np.floor(y / GRID) * GRID
    return x, y


def bootstrap_interval(x, y, rng, n_boot):
    """Percentile interval of the split-stratified bootstrap: theta* = c_x' Psi c_y / (mn)."""
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    cx = rng.multinomial(x.size, np.full(x.size, 1 / x.size), size=n_boot)
    cy = rng.multinomial(y.size, np.full(y.size, 1 / y.size), size=n_boot)
    theta = ((cx @ psi) * cy).sum(axis=1) / (x.size * y.size)
    return np.quantile(theta, [0.025, 0.975])


def run_cell(dgp, m, n, target, reps, boot_reps, n_boot, seed):
    rng = np.random.default_rng(seed)
    d = shift_for(dgp, target)
    truth = true_auc(dgp, d)
    hits = {k: 0 for k in METHODS}
    width = {k: 0.0 for k in hits}
    ones = 0
    for r in range(reps):
        x, y = draw(dgp, d, m, n, rng)
        auc, var = delong_auc(x, y)
        se = np.sqrt(var)
        ones += auc == 1.0
        lo, hi = max(0.0, auc - Z * se), min(1.0, auc + Z * se)
        hits["delong_wald"] += lo <= truth <= hi
        width["delong_wald"] += hi - lo
        if 0 < auc < 1:
            logit, s = np.log(auc / (1 - auc)), se / (auc * (1 - auc))
            lo, hi = 1 / (1 + np.exp(-(logit - Z * s))), 1 / (1 + np.exp(-(logit + Z * s)))
            hits["delong_logit"] += lo <= truth <= hi
            width["delong_logit"] += hi - lo
        lo, hi = auc_interval(auc, m, n, Z, variance=None)
        hits["newcombe"] += lo <= truth <= hi
        width["newcombe"] += hi - lo
        lo, hi = auc_interval(auc, m, n, Z, variance=var)
        hits["newcombe_delong"] += lo <= truth <= hi
        width["newcombe_delong"] += hi - lo
        lo, hi = auc_interval(auc, m, n, Z, variance=var, df=delong_df(x, y))
        hits["newcombe_delong_t"] += lo <= truth <= hi
        width["newcombe_delong_t"] += hi - lo
        if r < boot_reps:
            lo, hi = bootstrap_interval(x, y, rng, n_boot)
            hits["bootstrap"] += lo <= truth <= hi
            width["bootstrap"] += hi - lo
    row = {"dgp": dgp, "m": m, "n": n, "auc": target, "true_auc": truth, "reps": reps,
           "boot_reps": min(boot_reps, reps), "share_auc_1": ones / reps}
    for k in hits:
        count = row["boot_reps"] if k == "bootstrap" else reps
        p = hits[k] / count if count else float("nan")
        row[k] = p
        row[k + "_mc_se"] = float(np.sqrt(p * (1 - p) / count)) if count else float("nan")
        row[k + "_width"] = width[k] / count if count else float("nan")
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--boot-reps", type=int, default=400)
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--dgps", nargs="+", default=["normal", "cauchy", "discrete"])
    parser.add_argument("--seed", type=int, default=50)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows, started = [], time.process_time()
    for k, dgp in enumerate(args.dgps):
        for i, (m, n) in enumerate(SIZES):
            for j, target in enumerate(AUCS):
                seed = args.seed * 1000 + 100 * k + 10 * i + j
                rows.append(run_cell(dgp, m, n, target, args.reps, args.boot_reps,
                                     args.boot, seed))
                r = rows[-1]
                print(f"{dgp:9s} {m:3d}v{n:<3d} AUC {target:.2f} (true {r['true_auc']:.4f}, "
                      f"P(AUC=1) {r['share_auc_1']:.3f}): " + "  ".join(
                          f"{k} {r[k]:.3f}±{r[k + '_mc_se']:.3f} w{r[k + '_width']:.3f}"
                          for k in METHODS),
                      flush=True)
    print(f"CPU time {time.process_time() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"provenance": provenance(), "args": {
            k: v for k, v in vars(args).items() if k != "json"}, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
