"""Issue 50 item 3: why the pooled band of a few runs over-covers when the runs agree.

One cell of the pooled profile (``didmem.inference.runs.pooled.pooled_cells`` / ``pooled_band``,
pointwise): each run's estimate is ``mu + z + w_r`` with ``z ~ N(0, C)`` the instance
sampling error every run shares and ``w_r ~ N(0, V_d + B)`` the run's own part (``B`` the
between-run variance). ``C`` and ``V_d`` rest on the instances (thousands of degrees of
freedom) and are taken as known; the runs' spread ``S`` has ``R - 1``. The pooled rule:
``se^2 = max(S, V_d) / R + C`` and the critical value simulated from the components with the
median-unbiased plug-in ``Sigma_w = V_d + max(0, k S - V_d)``, ``k = (R - 1) / chi2_{R-1}(0.5)``
(the floor included in the simulated statistic). Printed per (R, share, B / V_d): the
coverage of the 95% interval, its Monte Carlo error, and the variance inflation
``E[se^2] / Var(tau_bar)``; ``share`` is ``(V_d / R) / (C + V_d / R)``, the part of the
variance that the runs' spread estimates when ``B = 0``.

At ``B = 0``, ``S = V_d X`` with ``X ~ chi2_{R-1} / (R - 1)`` and the floor makes
``E[max(S, V_d)] = V_d E[max(X, 1)]``: ``1 + 1/e = 1.368`` with three runs (``X`` is then
exponential), 1.27 with five, so the variance is ``0.368 share`` too large in expectation
(10-14% where ``share`` is 0.27-0.38). Usage::

    python benchmarks/runs_floor.py --reps 4000 --draws 2000

``--band`` runs the simultaneous band itself (:func:`didmem.inference.runs.pooled.pooled_band`) on
``--cells`` cells whose shared and run-specific parts are equicorrelated (0.5), three runs,
``share`` 0.3, and prints the coverage of the band and of its cells' pointwise intervals
under the rule (``k`` as above) and under the oracle plug-in that knows ``B = 0``
(``Sigma_w = V_d``: no between-run part added on the diagonal)::

    python benchmarks/runs_floor.py --band --reps 400 --draws 1000

``--rules cell ratio shrunk`` compares the plug-ins of the between-run variances
(:func:`didmem.inference.runs.pooled.between_plug_in`) and ``--between 0 2 mixed`` the DGPs
(``mixed``: between-run variances that differ across cells)::

    python benchmarks/runs_floor.py --band --reps 300 --draws 1000 --rules cell ratio shrunk \
        --between 0 2 mixed
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.special import chdtri


def coverage(n_runs, share, between, reps, draws, rng, floor=True):
    v_d = 1.0
    c = (v_d / n_runs) * (1 - share) / share
    sw = v_d + between
    dev = rng.normal(0, np.sqrt(c + sw / n_runs), reps)
    s = sw * rng.chisquare(n_runs - 1, reps) / (n_runs - 1)
    var = (np.maximum(s, v_d) if floor else s) / n_runs + c
    k = (n_runs - 1) / chdtri(n_runs - 1, 0.5)
    plug = v_d + np.maximum(0.0, k * s - v_d)  # reps
    # the simulated critical value of each replication (draws per replication)
    d_star = rng.normal(0, 1, (reps, draws)) * np.sqrt(c + plug / n_runs)[:, None]
    s_star = plug[:, None] * rng.chisquare(n_runs - 1, (reps, draws)) / (n_runs - 1)
    v_star = (np.maximum(s_star, v_d) if floor else s_star) / n_runs + c
    crit = np.quantile(np.abs(d_star) / np.sqrt(v_star), 0.95, axis=1)
    hit = np.abs(dev) <= crit * np.sqrt(var)
    true_var = c + sw / n_runs
    return float(hit.mean()), float(np.mean(var) / true_var)


def band_coverage(n_runs, n_cells, share, between, reps, draws, rng, oracle, rule="cell"):
    import didmem.inference.runs.pooled as runs_module
    from didmem.inference.runs.pooled import PooledCells, pooled_band

    eq = 0.5 * np.ones((n_cells, n_cells)) + 0.5 * np.eye(n_cells)
    v_d = eq.copy()
    c = eq * (1 / n_runs) * (1 - share) / share
    # ``between``: B / V_d in every cell, or "mixed": 4 in the first quarter of the cells and
    # 0 elsewhere (the between-run variances differ across cells; mean 1)
    if between == "mixed":
        b_cells = np.where(np.arange(n_cells) < n_cells // 4, 4.0, 0.0)
    else:
        b_cells = np.full(n_cells, float(between))
    sw = v_d + np.diag(b_cells)
    root_c, root_w = np.linalg.cholesky(c), np.linalg.cholesky(sw)
    median = runs_module._chi2_median
    if oracle:  # k = 0: Sigma_w = V_d, the truth when B = 0
        runs_module._chi2_median = lambda df: np.inf
    hits, point = 0, []
    try:
        for _ in range(reps):
            est = (root_c @ rng.standard_normal(n_cells))[None, :] + \
                rng.standard_normal((n_runs, n_cells)) @ root_w.T
            spread = np.cov(est, rowvar=False, ddof=1)
            s, d = np.diag(spread), np.diag(v_d)
            between_hat = np.maximum(s - d, 0.0)
            cov = c + v_d / n_runs + np.diag(between_hat / n_runs)
            pooled = PooledCells(
                cohort=np.zeros(n_cells), time=np.arange(n_cells, dtype=float),
                base_time=np.zeros(n_cells), estimate=est.mean(axis=0), run_estimates=est,
                covariance=cov, instance_covariance=c + v_d / n_runs, shared_covariance=c,
                specific_covariance=v_d, spread=spread, between_variance=between_hat,
                df=np.full(n_cells, 10.0), n_runs=n_runs, n_dropped=0)
            band = pooled_band(pooled, alpha=0.05, n_draws=draws, rng=rng, simultaneous=True,
                               between=rule)
            t = np.abs(pooled.estimate) / band.std_errors
            hits += bool(np.all(t <= band.critical_value))
            point.append(pooled_band(pooled, alpha=0.05, n_draws=draws, rng=rng,
                                     simultaneous=False, between=rule))
            point[-1] = float(np.mean(t <= point[-1].critical_values))
    finally:
        runs_module._chi2_median = median
    return hits / reps, float(np.mean(point))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--band", action="store_true")
    parser.add_argument("--cells", type=int, default=28)
    parser.add_argument("--rules", nargs="+", default=["cell", "oracle"],
                        choices=["cell", "ratio", "shrunk", "oracle"],
                        help="plug-ins of the between-run variances (pooled_band's "
                             "between=...; oracle: B = 0)")
    parser.add_argument("--between", nargs="+", default=["0", "2"],
                        help="B / V_d in every cell, or 'mixed' (4 in a quarter of the "
                             "cells, 0 elsewhere)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    if args.band:
        for between in args.between:
            between = between if between == "mixed" else float(between)
            for rule in args.rules:
                oracle = rule == "oracle"
                sim, pw = band_coverage(3, args.cells, 0.3, between, args.reps, args.draws,
                                        rng, oracle, "cell" if oracle else rule)
                print(json.dumps({
                    "runs": 3, "cells": args.cells, "share": 0.3, "between_over_vd": between,
                    "plug_in": "oracle B=0" if oracle else rule, "reps": args.reps,
                    "simultaneous": round(sim, 4),
                    "simultaneous_mc_se": round(float(np.sqrt(sim * (1 - sim) / args.reps)), 4),
                    "pointwise": round(pw, 4)}), flush=True)
        return
    for n_runs in (3, 5):
        for share in (0.2, 0.3, 0.4):
            for between in (0.0, 0.5, 2.0, 10.0):
                row = {"runs": n_runs, "share": share, "between_over_vd": between,
                       "reps": args.reps}
                for name, floor in (("floor", True), ("no_floor", False)):
                    p, inflation = coverage(n_runs, share, between, args.reps, args.draws,
                                            rng, floor)
                    row[f"coverage_{name}"] = round(p, 4)
                    row[f"mc_se_{name}"] = round(float(np.sqrt(p * (1 - p) / args.reps)), 4)
                    row[f"variance_inflation_{name}"] = round(inflation, 3)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
