"""Size of the Fisher randomisation test vs the asymptotic test, few instances per cohort.

Issue 47: with 5 instances per cohort and heavy-tailed noise, under the sharp null (no
effect), the Fisher test of the studentised ``simple`` aggregation (and the sup-t over all
cells) should reject at the nominal rate; the asymptotic test ``|estimate / se| > 1.96``
need not. Two data-generating processes: ``t2`` (i.i.d. Student-t with 2 degrees of freedom
around instance effects) and ``ar1_lognormal`` (persistent instance effects, an AR(1) path
with 0.8 persistence and centred log-normal innovations: skewed, heavy right tail). 4
cohorts of 5 instances and 5 never-treated, 6 checkpoints; all instances randomised.

    python benchmarks/random_timing_size.py --reps 400 --perms 199 [--alpha 0.05]

Prints one JSON line per DGP: rejection rates with their Monte Carlo standard errors.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from didmem.inference.random_timing import weights
from didmem.inference.random_timing.design import TimingDesign, cell_estimates, linear_estimates
from didmem.inference.random_timing.fisher import fisher_test

COHORTS = np.r_[np.repeat([2.0, 3.0, 4.0, 5.0], 5), np.full(5, np.inf)]
N_T = 6


def draw(dgp, rng):
    n = COHORTS.size
    if dgp == "t2":
        return rng.standard_normal((n, 1)) + rng.standard_t(2, size=(n, N_T))
    y = np.empty((n, N_T))
    u = np.zeros(n)
    alpha = rng.standard_normal(n)
    for t in range(N_T):
        u = 0.8 * u + (rng.lognormal(0.0, 1.0, n) - np.exp(0.5))
        y[:, t] = alpha + u
    return y


def statistic(design):
    a_theta, a_0 = weights.simple_weights(design.codes, design.count, design.n_times, False)
    agg = linear_estimates(design, a_theta, a_0, None, refine=False)
    cells = cell_estimates(design, None, False, refine=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.r_[agg.estimate / agg.std_error_neyman,
                     np.nanmax(np.abs(cells.estimate / cells.std_error_neyman))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--perms", type=int, default=199)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=47)
    args = parser.parse_args()
    times = np.arange(1.0, N_T + 1)
    for k, dgp in enumerate(("t2", "ar1_lognormal")):
        rng = np.random.default_rng([args.seed, k])
        fisher_simple = fisher_sup = asym = asym_neyman = 0
        t0 = time.perf_counter()
        for _ in range(args.reps):
            y = draw(dgp, rng)
            test = fisher_test(times, COHORTS, y, statistic, n_permutations=args.perms,
                               seed=rng)
            fisher_simple += test.pvalue[0] <= args.alpha
            fisher_sup += test.pvalue[1] <= args.alpha
            design = TimingDesign.from_paths(times, COHORTS, y)
            a_theta, a_0 = weights.simple_weights(design.codes, design.count, N_T, False)
            est = linear_estimates(design, a_theta, a_0)
            with np.errstate(divide="ignore", invalid="ignore"):  # se = 0: rejects
                asym += abs(est.estimate[0] / est.std_error[0]) > 1.959964
                asym_neyman += abs(est.estimate[0] / est.std_error_neyman[0]) > 1.959964
        r = args.reps

        def rate(x):
            p = x / r
            return [round(p, 4), round(float(np.sqrt(p * (1 - p) / r)), 4)]

        print(json.dumps({"dgp": dgp, "reps": r, "perms": args.perms, "alpha": args.alpha,
                          "fisher_simple": rate(fisher_simple), "fisher_sup_t": rate(fisher_sup),
                          "asymptotic_se": rate(asym), "asymptotic_se_neyman": rate(asym_neyman),
                          "seconds": round(time.perf_counter() - t0, 1)}))


if __name__ == "__main__":
    main()
