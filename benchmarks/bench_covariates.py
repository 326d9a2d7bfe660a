"""Time DiDEstimator with and without covariates at the paper's scale.

Run from the repository root::

    python benchmarks/bench_covariates.py [--reps 3] [--methods reg,ipw,dr]

The panel is ``simulate_panel(n_cohorts=95, units_per_cohort=150, n_never_treated=2000,
n_times=96)`` plus two time-invariant covariates: ``x1`` (standard normal, shifted by 0.3 for
treated units) and ``x2`` (uniform). Figures go in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import didmem


def make_panel(seed: int = 0):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=95, units_per_cohort=150,
                                           n_never_treated=2000, n_times=96, seed=seed)
    rng = np.random.default_rng(seed)
    units = df["unit"].unique()
    treated = df.groupby("unit")["cohort"].first().reindex(units).pipe(np.isfinite).to_numpy()
    x1 = rng.normal(size=units.size) + 0.3 * treated
    x2 = rng.uniform(size=units.size)
    n_t = df.groupby("unit").size().iloc[0]
    df = df.sort_values(["unit", "time"]).reset_index(drop=True)
    df["x1"] = np.repeat(x1, n_t)
    df["x2"] = np.repeat(x2, n_t)
    return df


def best_of(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--methods", default="reg,ipw,dr")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--control-group", default="never_treated")
    args = parser.parse_args()
    df = make_panel()
    kw = dict(unit="unit", time="time", cohort="cohort", outcome="y")
    plain = didmem.Panel(df, **kw)
    withx = didmem.Panel(df, covariates=["x1", "x2"], **kw)
    est = dict(n_bootstrap=args.n_bootstrap, seed=0, control_group=args.control_group)
    didmem.DiDEstimator(**est).fit(plain)  # compile
    base = best_of(lambda: didmem.DiDEstimator(**est).fit(plain), args.reps)
    print(f"machine: {platform.processor() or platform.machine()}, {platform.python_version()}")
    print(f"panel: {plain!r}; n_bootstrap={args.n_bootstrap}, {args.control_group}")
    print(f"no covariates: {base:.3f} s")
    for m in args.methods.split(","):
        secs = best_of(lambda m=m: didmem.DiDEstimator(est_method=m, **est).fit(withx), args.reps)
        res = didmem.DiDEstimator(est_method=m, **est).fit(withx)
        mb = res.influence.nbytes / 2**20
        print(f"{m} with 2 covariates: {secs:.3f} s ({secs / base:.1f}x), psi store {mb:.0f} MB")


if __name__ == "__main__":
    main()
