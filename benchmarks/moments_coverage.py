"""Monte Carlo coverage of the simultaneous band fitted from moments (issue 37) against the
in-memory fit with per-unit Gaussian multipliers, on the two DGPs of
``small_sample_coverage.py`` (``normal`` and ``hetero``: AR(1) t(5) errors, heteroskedastic,
a decaying profile).

Each replication draws a panel with a known profile and fits ``DiDEstimator`` with Gaussian
multipliers twice for each rule (the default small-sample rule, and R's rule
``small_sample=False`` with ``multiplier="normal"``): once in memory (per-unit multipliers)
and once from the panel's per-cohort moments (draws from the exact Gaussian given the data),
the same bootstrap seed. It records whether each band covers every cell's truth (0 before
treatment). The two routes' draws have the same distribution, so their coverages should
agree within Monte Carlo error; the paired difference's standard error is printed too.

Usage (the figures in benchmarks/RESULTS.md)::

    nice -n 15 python benchmarks/moments_coverage.py --reps 500 \\
        --json benchmarks/results/moments_coverage.json
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import didmem
from _provenance import add_rows
from didmem.estimators._moments_route import fit_moments, panel_moments
from small_sample_coverage import covers, simulate

RULES = {"small_sample": dict(small_sample=True),
         "r_rule_normal": dict(small_sample=False, multiplier="normal")}


def _per_unit_fit(estimator, panel):
    """The in-memory fit with per-unit Gaussian multipliers: since the in-memory balanced
    route draws Gaussian multipliers from the moments' law too, its per-unit kernel (the one
    Rademacher and Mammen multipliers use) is put back for this arm only."""
    from didmem.inference.grouped import GroupedInfluence
    from didmem.inference.influence import CellInfluence

    own = GroupedInfluence.bootstrap
    GroupedInfluence.bootstrap = CellInfluence.bootstrap
    try:
        return estimator.fit(panel)
    finally:
        GroupedInfluence.bootstrap = own


def study(dgp, n_cohorts, units, n_never, n_times, reps, draws, seed):
    rng = np.random.default_rng([seed, units, n_cohorts, 37, len(dgp)])
    hits = {(rule, route): np.zeros(reps, dtype=bool) for rule in RULES
            for route in ("memory", "moments")}
    crit = {key: [] for key in hits}
    for r in range(reps):
        df, truth = simulate(dgp, n_cohorts, units, n_never, n_times, int(rng.integers(2**62)))
        panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
        moments = panel_moments(panel)
        boot_seed = int(rng.integers(2**62))
        for rule, options in RULES.items():
            est = didmem.DiDEstimator(n_bootstrap=draws, seed=boot_seed, **options)
            for route, res in (("memory", _per_unit_fit(est, panel)),
                               ("moments", fit_moments(est, moments, outcome="y"))):
                hits[(rule, route)][r] = covers(res, truth)[0]
                crit[(rule, route)].append(res.critical_value)
    rows = []
    for rule in RULES:
        a, b = hits[(rule, "memory")], hits[(rule, "moments")]
        diff = b.astype(float) - a.astype(float)
        for route, h in (("memory", a), ("moments", b)):
            p = float(h.mean())
            rows.append({"dgp": dgp, "rule": rule, "route": route, "cohorts": n_cohorts,
                         "units_per_cohort": units, "never_treated": n_never,
                         "times": n_times, "reps": reps, "draws": draws,
                         "coverage": round(p, 4),
                         "mc_se": round(float(np.sqrt(p * (1 - p) / reps)), 4),
                         "mean_critical_value": round(float(np.mean(crit[(rule, route)])), 4),
                         "moments_minus_memory": round(float(diff.mean()), 4),
                         "difference_se": round(float(diff.std(ddof=1) / np.sqrt(reps)), 4)})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohorts", type=int, default=4)
    parser.add_argument("--times", type=int, default=6)
    parser.add_argument("--units", type=int, nargs="+", default=[30])
    parser.add_argument("--never", type=int, default=60)
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--dgp", nargs="+", default=["normal", "hetero"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", didmem.DidmemWarning)
    out = []
    for dgp in args.dgp:
        for units in args.units:
            add_rows(out, lambda: study(dgp, args.cohorts, units, args.never, args.times,
                                        args.reps, args.draws, args.seed), args.json)


if __name__ == "__main__":
    main()
