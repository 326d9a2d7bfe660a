"""Monte Carlo coverage of the default band on panels with holes and on repeated
cross-sections.

Each replication draws a panel with a known profile from one of the two data-generating
processes of ``small_sample_coverage.py`` (``normal``: N(0, 1) noise; ``hetero``: unit and
period effects, AR(1) t(5) errors, heteroskedastic, decaying profile), then

* ``holes``: removes a share of the (unit, period) rows at random and fits
  ``Panel(..., balance="keep")``;
* ``rcs``: draws ``units x periods`` units per cohort and keeps one random period of each
  (a genuine repeated cross-section with about ``units`` rows per cohort and period) and
  fits ``Panel(..., unit=None)``.

It fits ``DiDEstimator`` with its defaults (small-sample correction, Gaussian multipliers,
1,000 draws) and, with ``--r-rule``, R's rule as well, and records whether the band covers
every cell's truth (pre-treatment truth 0). Usage (the figures in docs/inference.rst)::

    nice -n 15 python benchmarks/holes_coverage.py --reps 1000 --units 15 \\
        --json benchmarks/results/holes_coverage_1000.json

``--pointwise`` measures instead the pointwise 95% intervals of the cells (``cband=False``,
analytic, Welch-corrected t intervals) on panels whose holes sit in the control group
(issue 40: the correction counted every control unit of the panel, not those observed at
the cell's two periods):

* ``sparse_controls``: the treated units complete, each never-treated unit observed at two
  random periods;
* ``few_complete_controls``: the treated units complete, four never-treated units observed
  throughout and the others only at the last period.

Each row gives the mean pointwise coverage over cells under one count (see
:func:`pointwise_coverage`: ``groups``, the fit's; ``contributing``; ``all_units``, the
count before the fix), with its Monte Carlo standard error (over replications, the cells of
one panel being dependent)::

    nice -n 15 python benchmarks/holes_coverage.py --pointwise --reps 500 --never 40 \\
        --json benchmarks/results/holes_pointwise_coverage.json

The Monte Carlo standard error of a coverage ``p`` over ``R`` replications is
``sqrt(p (1 - p) / R)`` (``mc_se``).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import didmem
from _provenance import add_rows
from small_sample_coverage import DGP_STREAMS, covers, simulate


#: Each layout's own random stream (the lengths of their names, as before 2026-11-25).
LAYOUT_STREAMS = {"holes": 5, "rcs": 3}
#: The layouts with holes in the control group (``--pointwise``) and their streams.
CONTROL_HOLES = {"sparse_controls": 11, "few_complete_controls": 12}


def control_holes_panel(layout, dgp, n_cohorts, units, n_never, n_times, rng):
    """A panel whose treated units are complete and whose never-treated units have holes
    (see the module notes)."""
    df, truth = simulate(dgp, n_cohorts, units, n_never, n_times, int(rng.integers(2**62)))
    never = ~np.isfinite(df["cohort"].to_numpy(dtype=float))
    unit = df["unit"].to_numpy()
    time = df["time"].to_numpy()
    times = np.sort(df["time"].unique())
    codes = np.unique(unit[never])
    if layout == "sparse_controls":
        picks = {u: set(rng.choice(times, 2, replace=False)) for u in codes}
        keep = np.array([not nv or t in picks[u] for u, t, nv in zip(unit, time, never)])
    else:
        complete = set(codes[:4])
        keep = ~never | np.isin(unit, list(complete)) | (time == times[-1])
    return didmem.Panel(df[keep], unit="unit", time="time", cohort="cohort", outcome="y",
                        balance="keep"), truth


def pointwise_coverage(res, truth):
    """The share of cells whose pointwise interval covers the truth, under three Welch
    corrections of the same variance: the fit's (``groups``: cohort and controls, each
    split by what is observed of a unit at the cell's two periods), two groups with the
    units observed at either period (``contributing``), and two groups with every unit of
    the blocks (``all_units``, the count before issue 40's fix)."""
    from didmem.inference.influence import cell_counts
    from didmem.inference.small_sample import block_welch, t_critical_values

    frame = res.to_frame().merge(truth, on=["cohort", "time"], how="left")
    tau = np.where(frame["post"], frame["tau"], 0.0)
    est = frame["estimate"].to_numpy()
    influence = res.inference.influence
    parts, counts = influence.welch_groups()
    plug_in = influence.observation_groups()[0]
    two = np.stack([plug_in[:3].sum(axis=0), plug_in[3:].sum(axis=0)])
    out = {}
    for name, (p, n) in (("groups", (parts, counts)),
                         ("contributing", (two, influence.contributing_units())),
                         ("all_units", (two, np.stack(cell_counts(res.prepared, res.cells))))):
        var, df = block_welch(p, n)
        half = t_critical_values(1 - res.alpha / 2, df) * np.sqrt(var)
        live = np.isfinite(half)
        out[name] = float(np.mean(np.abs(est - tau)[live] <= half[live]))
    # the fit's own intervals are the first ones
    lo, hi = frame["ci_lower"].to_numpy(), frame["ci_upper"].to_numpy()
    ok = np.isfinite(lo)
    assert abs(np.mean((lo[ok] <= tau[ok]) & (tau[ok] <= hi[ok])) - out["groups"]) < 1e-12
    return out


def pointwise_study(layout, dgp, n_cohorts, units, n_never, n_times, reps, seed):
    rng = np.random.default_rng([seed, units, n_cohorts, DGP_STREAMS[dgp], CONTROL_HOLES[layout]])
    per_rep = {"groups": [], "contributing": [], "all_units": []}
    for _ in range(reps):
        panel, truth = control_holes_panel(layout, dgp, n_cohorts, units, n_never, n_times, rng)
        res = didmem.DiDEstimator(n_bootstrap=0, cband=False).fit(panel)
        for name, value in pointwise_coverage(res, truth).items():
            per_rep[name].append(value)
    rows = []
    for name, values in per_rep.items():
        values = np.asarray(values)
        rows.append({"layout": layout, "dgp": dgp, "cohorts": n_cohorts,
                     "units_per_cohort": units, "never_treated": n_never, "times": n_times,
                     "cells": int(res.estimates.size), "reps": reps, "count": name,
                     "pointwise_coverage": round(float(values.mean()), 4),
                     "mc_se": round(float(values.std(ddof=1) / np.sqrt(reps)), 4)})
    return rows


def draw_panel(layout, dgp, n_cohorts, units, n_never, n_times, missing, rng):
    seed = int(rng.integers(2**62))
    if layout == "holes":
        df, truth = simulate(dgp, n_cohorts, units, n_never, n_times, seed)
        df = df[rng.random(len(df)) >= missing]
        return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                            balance="keep"), truth
    df, truth = simulate(dgp, n_cohorts, units * n_times, n_never * n_times, n_times, seed)
    pick = rng.integers(0, n_times, df["unit"].nunique())
    times = np.sort(df["time"].unique())
    df = df[df["time"].to_numpy() == times[pick[df["unit"].to_numpy()]]]
    return didmem.Panel(df, unit=None, time="time", cohort="cohort", outcome="y"), truth


def study(layout, dgp, n_cohorts, units, n_never, n_times, missing, reps, draws, seed,
          rules):
    rng = np.random.default_rng([seed, units, n_cohorts, DGP_STREAMS[dgp], LAYOUT_STREAMS[layout]])
    hits = {rule: 0 for rule in rules}
    n_cells = 0
    for _ in range(reps):
        panel, truth = draw_panel(layout, dgp, n_cohorts, units, n_never, n_times, missing,
                                  rng)
        boot_seed = int(rng.integers(2**62))
        for rule in rules:
            res = didmem.DiDEstimator(n_bootstrap=draws, seed=boot_seed,
                                      small_sample=rule == "default").fit(panel)
            hits[rule] += covers(res, truth)[0]
            n_cells = res.estimates.size
    rows = []
    for rule in rules:
        p = hits[rule] / reps
        rows.append({"layout": layout, "dgp": dgp, "cohorts": n_cohorts,
                     "units_per_cohort_and_period": units, "never_treated": n_never,
                     "missing": missing if layout == "holes" else None,
                     "cells": int(n_cells), "reps": reps, "draws": draws, "rule": rule,
                     "coverage": round(p, 4),
                     "mc_se": round(float(np.sqrt(p * (1 - p) / reps)), 4)})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohorts", type=int, default=8)
    parser.add_argument("--units", type=int, nargs="+", default=[15])
    parser.add_argument("--never", type=int, default=200)
    parser.add_argument("--missing", type=float, default=0.10)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--layout", nargs="+", default=list(LAYOUT_STREAMS), choices=list(LAYOUT_STREAMS))
    parser.add_argument("--dgp", nargs="+", default=list(DGP_STREAMS), choices=list(DGP_STREAMS))
    parser.add_argument("--r-rule", action="store_true", help="also R's rule (small_sample=False)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pointwise", action="store_true",
                        help="pointwise coverage with holes in the control group")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", didmem.DidmemWarning)
    rules = ["default", "R"] if args.r_rule else ["default"]
    n_times = args.cohorts + 2
    if args.pointwise:
        jobs = [lambda layout=layout, dgp=dgp: pointwise_study(
                    layout, dgp, args.cohorts, args.units[0], args.never, n_times, args.reps,
                    args.seed)
                for layout in CONTROL_HOLES for dgp in args.dgp]
    else:
        jobs = [lambda layout=layout, dgp=dgp, units=units: study(
                    layout, dgp, args.cohorts, units, args.never, n_times, args.missing,
                    args.reps, args.draws, args.seed, rules)
                for layout in args.layout for dgp in args.dgp for units in args.units]
    out = []
    for job in jobs:
        add_rows(out, job, args.json)

if __name__ == "__main__":
    main()
