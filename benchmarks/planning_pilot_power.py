"""Planned power from a pilot's own effects against the estimator's Monte Carlo power.

Issue 23, item 6: with a pilot of 8 cohorts x 30 instances, planning at each cohort's noisy
pilot estimate overstated the power (Jensen's inequality). ``power_analysis(pilot, ...)`` now
shrinks the keys' effects towards their pooled mean (empirical Bayes) and reports an interval
(``power_lower``, ``power_upper``: the central 90% over posterior draws of the effects).

For each data-generating process, ``--pilots`` independent pilots of 30 instances per cohort
are planned with the default (simulated route, the pilot's own effects) at three designs;
the Monte Carlo power is the share of cohorts whose instantaneous effect the default
:class:`didmem.DiDEstimator` finds significant under the band of
``aggregate("instantaneous")``, on ``--reps`` fresh panels of each design with the true
effects. Reported: the mean planned power over pilots, its pilot-to-pilot SD, the mean
interval and how often the interval covers the Monte Carlo power. The analytic route
(``method="analytic"``) is run on the same pilots too (cheap).

Usage::

    python benchmarks/planning_pilot_power.py --json benchmarks/results/planning_pilot_power.json
    python benchmarks/planning_pilot_power.py --quick     # a smoke run
    python benchmarks/planning_pilot_power.py --pilots 12 --simulations 10 \
        --mc-from benchmarks/results/planning_pilot_power_mc.json   # reuse the MC power
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import didmem  # noqa: E402
from didmem.errors import DidmemWarning  # noqa: E402
from _provenance import provenance  # noqa: E402

DESIGNS = (10, 30, 60)
N_COHORTS = 8
PILOT_UNITS = 30

DGPS = {
    # the case: one instantaneous effect 0.5 for every cohort (decaying after)
    "homogeneous": dict(n_never_treated=100, instantaneous=0.5, unit_sd=1.0, noise_sd=1.0,
                        cohort_scale=None),
    # cohorts' instantaneous effects from 0.24 to 0.96 (mean 0.6), less unit variance
    "heterogeneous": dict(n_never_treated=150, instantaneous=0.6, unit_sd=0.5, noise_sd=1.0,
                          cohort_scale=np.linspace(0.4, 1.6, N_COHORTS)),
}


def make_panel(name, units, seed):
    d = DGPS[name]
    df, _ = didmem.datasets.simulate_panel(n_cohorts=N_COHORTS, units_per_cohort=units,
                                           seed=seed, **d)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


def mc_power(name, units, reps, seed):
    """Monte Carlo power of the default estimator on fresh panels, and its MC error."""
    rng = np.random.default_rng(seed)
    shares = np.empty(reps)
    for r in range(reps):
        panel = make_panel(name, units, int(rng.integers(2**63)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DidmemWarning)
            res = didmem.DiDEstimator(seed=int(rng.integers(2**63))).fit(panel)
        shares[r] = res.aggregate("instantaneous").to_frame()["significant"].mean()
    return float(shares.mean()), float(shares.std(ddof=1) / np.sqrt(reps))


def planned(name, n_pilots, sims, methods=("simulated", "analytic")):
    """Planned power, lower and upper end per pilot and design, by route."""
    out = {m: np.empty((n_pilots, 3, len(DESIGNS))) for m in methods}
    for j in range(n_pilots):
        pilot = make_panel(name, PILOT_UNITS, seed=5000 + j)
        for method in out:
            kw = {"n_simulations": sims} if method == "simulated" else {}
            t = didmem.power_analysis(pilot, units_per_cohort=list(DESIGNS), method=method,
                                   seed=j, **kw).to_frame()
            out[method][j] = t[["power", "power_lower", "power_upper"]].to_numpy().T
    return out


def run_dgp(args):
    name, n_pilots, sims, reps, known, methods = args
    t0 = time.perf_counter()
    plans = planned(name, n_pilots, sims, methods)
    rows = []
    for i, u in enumerate(DESIGNS):
        # the Monte Carlo power is seeded by the design: a previous run's value is reused
        p, e = known[(name, u)] if (name, u) in known else mc_power(name, u, reps, seed=100 + u)
        row = {"dgp": name, "units_per_cohort": u, "mc_power": p, "mc_error": e, "reps": reps,
               "pilots": n_pilots, "pilot_units": PILOT_UNITS, "simulations": sims}
        for method, arr in plans.items():
            power, lower, upper = arr[:, 0, i], arr[:, 1, i], arr[:, 2, i]
            row.update({f"{method}_power": float(power.mean()),
                        f"{method}_pilot_sd": float(power.std(ddof=1)),
                        f"{method}_lower": float(lower.mean()),
                        f"{method}_upper": float(upper.mean()),
                        f"{method}_covers": float(np.mean((lower <= p) & (p <= upper)))})
        rows.append(row)
    return rows, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pilots", type=int, default=6)
    ap.add_argument("--simulations", type=int, default=40)
    ap.add_argument("--reps", type=int, default=120)
    ap.add_argument("--quick", action="store_true", help="2 pilots, 10 simulations, 10 reps")
    ap.add_argument("--json", help="write the rows with their provenance here")
    ap.add_argument("--mc-from", help="reuse the Monte Carlo power of an earlier run's JSON "
                                      "with the same --reps (it is seeded by the design)")
    ap.add_argument("--analytic-only", action="store_true",
                    help="the analytic route only (cheap: many pilots)")
    a = ap.parse_args(argv)
    if a.quick:
        a.pilots, a.simulations, a.reps = 2, 10, 10
    known = {}
    if a.mc_from:
        with open(a.mc_from) as fh:
            known = {(r["dgp"], r["units_per_cohort"]): (r["mc_power"], r["mc_error"])
                     for r in json.load(fh)["rows"] if r["reps"] == a.reps}
    methods = ("analytic",) if a.analytic_only else ("simulated", "analytic")
    jobs = [(name, a.pilots, a.simulations, a.reps, known, methods) for name in DGPS]
    with ProcessPoolExecutor(max_workers=len(jobs)) as pool:
        results = list(pool.map(run_dgp, jobs))
    rows = [r for part, _ in results for r in part]
    cols = ["dgp", "units_per_cohort", "mc_power", "mc_error"] + [
        f"{m}_{c}" for m in methods for c in ("power", "lower", "upper", "covers", "pilot_sd")]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols))
    print("seconds per DGP:", [round(s) for _, s in results])
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"provenance": provenance(), "command": " ".join(sys.argv),
                       "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
