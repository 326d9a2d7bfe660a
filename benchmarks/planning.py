"""Check didmem.power.power_analysis against Monte Carlo power, and time it at the paper's shape.

Validation: on two data-generating processes with a known instantaneous effect, the power
planned at three designs (analytic from the true assumptions; simulated from five
independent pilots of 16 instances per cohort, with the effect stated, pooling residuals
over all pilot units and per cohort) is set beside the Monte Carlo power of the
default :class:`didmem.DiDEstimator` fitted on fresh panels of each design (share of
cohorts whose instantaneous effect is significant under the band of
``aggregate("instantaneous")``).

Speed: a planning run over 6 designs at the paper's shape (95 cohorts, 96 checkpoints,
2,000 validation instances).

Usage::

    python benchmarks/planning.py                 # validation + speed (several minutes)
    python benchmarks/planning.py --quick         # a smoke run
    python benchmarks/planning.py --only speed
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import time
import warnings

import numpy as np
import pandas as pd

import didmem
from didmem.errors import DidmemWarning
from didmem.power import Assumptions, power_analysis


def ar1_panel(n_cohorts, units, n_never, n_times, *, effect, ar1, unit_sd, noise_sd, seed):
    """Y = alpha_i + log(1 + t) + AR(1) noise (stationary sd noise_sd) + effect at t >= g."""
    rng = np.random.default_rng(seed)
    n = n_cohorts * units + n_never
    eps = np.empty((n, n_times))
    eps[:, 0] = rng.standard_normal(n)
    for t in range(1, n_times):
        eps[:, t] = ar1 * eps[:, t - 1] + np.sqrt(1 - ar1**2) * rng.standard_normal(n)
    cohort = np.concatenate([np.repeat(np.arange(1, n_cohorts + 1), units), np.full(n_never, np.inf)])
    times = np.arange(n_times, dtype=float)
    y = unit_sd * rng.standard_normal(n)[:, None] + np.log1p(times)[None, :] + noise_sd * eps
    y += effect * (times[None, :] >= cohort[:, None])
    return pd.DataFrame({"unit": np.repeat(np.arange(n), n_times), "time": np.tile(times, n),
                         "cohort": np.repeat(cohort, n_times), "y": y.ravel()})


DGPS = {
    # simulate_panel: unit effect sd 1, iid noise sd 1, instantaneous 0.5 decaying
    "iid": dict(n_cohorts=4, n_times=6, n_never=100, effect=0.5,
                assumptions=dict(outcome_sd=np.sqrt(2.0), unit_share=0.5, ar1=0.0)),
    # AR(1) noise 0.6, unit effect sd 0.5, noise sd 1, constant effect 0.4
    "ar1": dict(n_cohorts=6, n_times=8, n_never=120, effect=0.4,
                assumptions=dict(outcome_sd=np.sqrt(1.25), unit_share=0.2, ar1=0.6)),
}


def make_panel(name, units, n_never, seed):
    d = DGPS[name]
    if name == "iid":
        df, _ = didmem.datasets.simulate_panel(
            n_cohorts=d["n_cohorts"], units_per_cohort=units, n_never_treated=n_never,
            n_times=d["n_times"], instantaneous=d["effect"], unit_sd=1.0, noise_sd=1.0, seed=seed)
    else:
        df = ar1_panel(d["n_cohorts"], units, n_never, d["n_times"], effect=d["effect"], ar1=0.6,
                       unit_sd=0.5, noise_sd=1.0, seed=seed)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


def mc_power(name, units, n_never, reps, seed):
    """Monte Carlo power of the default estimator on fresh panels, and its MC error."""
    rng = np.random.default_rng(seed)
    shares = np.empty(reps)
    for r in range(reps):
        panel = make_panel(name, units, n_never, int(rng.integers(2**63)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DidmemWarning)
            res = didmem.DiDEstimator(seed=int(rng.integers(2**63))).fit(panel)
        shares[r] = res.aggregate("instantaneous").to_frame()["significant"].mean()
    return float(shares.mean()), float(shares.std(ddof=1) / np.sqrt(reps))


def validation(designs, reps, sims, n_pilots=5, pilot_units=16):
    """Planned vs Monte Carlo power; the simulated route from ``n_pilots`` independent pilots."""
    rows = []
    for name, d in DGPS.items():
        a = Assumptions(n_cohorts=d["n_cohorts"], n_checkpoints=d["n_times"], **d["assumptions"])
        ana = power_analysis(a, units_per_cohort=designs, n_validation=d["n_never"],
                          effect=d["effect"], seed=1).to_frame()
        planned = {pool: [] for pool in ("all", "cohort")}
        t0 = time.perf_counter()
        for j in range(n_pilots):
            pilot = make_panel(name, pilot_units, d["n_never"], seed=1000 + j)
            for pool in planned:
                sim = power_analysis(pilot, units_per_cohort=designs, effect=d["effect"], pool=pool,
                                  n_simulations=sims, seed=j).to_frame()
                planned[pool].append(sim["power"].to_numpy())
        sim_s = (time.perf_counter() - t0) / (2 * n_pilots * len(designs))
        planned = {pool: np.array(v) for pool, v in planned.items()}
        for i, u in enumerate(designs):
            p, e = mc_power(name, u, d["n_never"], reps, seed=100 + u)
            row = {"dgp": name, "units_per_cohort": u, "n_validation": d["n_never"],
                   "mc_power": p, "mc_error": e, "reps": reps, "analytic": ana["power"][i]}
            for pool, v in planned.items():
                row[f"simulated_{pool}"] = float(v[:, i].mean())
                row[f"pilot_sd_{pool}"] = float(v[:, i].std(ddof=1)) if n_pilots > 1 else np.nan
            row.update(pilots=n_pilots, simulations=sims, seconds_per_design=sim_s)
            rows.append(row)
            print(row, flush=True)
    return pd.DataFrame(rows)


def speed(repeats=3):
    """Six designs at the paper's shape: analytic from assumptions and from a 16-per-cohort
    pilot, and simulated from that pilot (10 studies per design, default estimator)."""
    designs = [10, 20, 50, 100, 150, 200]
    out = {}
    a = Assumptions(n_cohorts=95, n_checkpoints=96, outcome_sd=1.0, unit_share=0.5, ar1=0.5)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        power_analysis(a, units_per_cohort=designs, n_validation=2000, effect=0.1, seed=0)
        times.append(time.perf_counter() - t0)
    out["analytic_assumptions_s"] = min(times)
    df, _ = didmem.datasets.simulate_panel(n_cohorts=95, units_per_cohort=16, n_never_treated=200,
                                           n_times=96, seed=0)
    pilot = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        power_analysis(pilot, units_per_cohort=designs, n_validation=2000, method="analytic",
                    seed=0)
        times.append(time.perf_counter() - t0)
    out["analytic_pilot_s"] = min(times)
    t0 = time.perf_counter()
    sim = power_analysis(pilot, units_per_cohort=designs, n_validation=2000, n_simulations=10,
                      seed=0).to_frame()
    out["simulated_10_per_design_s"] = time.perf_counter() - t0
    out["simulated_max_mc_error"] = float(sim["power_mc_error"].max())
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=["validation", "speed"])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--sims", type=int, default=100)
    ap.add_argument("--pilots", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    reps, sims, pilots = (20, 20, 2) if args.quick else (args.reps, args.sims, args.pilots)
    result = {"machine": f"{platform.machine()} {platform.processor()} {platform.system()}",
              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="minutes")}
    if args.only != "speed":
        table = validation([10, 25, 50], reps, sims, pilots)
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        result["validation"] = table.to_dict(orient="records")
    if args.only != "validation":
        result["speed"] = speed(1 if args.quick else 3)
        print(result["speed"])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
