"""Issue 50: does the simultaneous band cover on balanced panels with skewed outcome changes?

Each replication draws one balanced panel and fits ``DiDEstimator`` to it under several
inference settings (the same data and bootstrap seed for all):

* ``ss_normal``: the default (``small_sample=True``: Welch-t cells, Gaussian multipliers);
* ``ss_mammen``, ``ss_rademacher``: ``small_sample=True`` with those multipliers;
* ``r_rademacher``, ``r_mammen``: ``small_sample=False`` (R did's rule: bootstrap standard
  errors, the sup-|t| quantile of the draws) with those multipliers.

Data-generating processes (8 cohorts of ``--units`` treated at checkpoints 2-9, 150
never-treated, 10 checkpoints, effect ``1 / (1 + e)`` unless said):

* ``walk``, ``skewwalk``: ``holes_width.simulate_walk`` (random walk with normal or centred
  chi-square(3) innovations);
* ``lognormal``: i.i.d. (not a walk) centred log-normal(0, 1) noise scaled to variance 1
  (skewness 6.2), unit effects N(0, 1);
* ``tokacc``: token accuracy, ``Binomial(32, p) / 32`` with ``p = base_i + 0.01 t + gain``,
  ``base_i ~ Beta(1, 19)`` (mean 0.05), and memorisation that is rare and large: a treated
  instance is memorised with probability 0.2 (drawn once) and then gains ``0.5 / (1 + e)``;
  the true effect is ``0.1 / (1 + e)``.

Per setting: simultaneous coverage of the whole profile (pre-treatment cells included) with
its Monte Carlo error, pointwise coverage (mean over cells, MC error over replications), the
share of the band's misses on the lower and upper side (which tail fails), mean critical
value, and pointwise coverage by event time (``pre``, ``e=0``, ``e=1-2``, ``e>=3``). Usage::

    nice -n 15 python benchmarks/skew_coverage.py --dgp walk skewwalk --reps 200
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

import didmem
from didmem.inference.small_sample import t_critical_values
from _provenance import add_rows, write_rows
from holes_width import simulate_walk

DGPS = {"walk": 31, "skewwalk": 32, "lognormal": 41, "tokacc": 42}
SETTINGS = {
    "ss_normal": {},
    "ss_mammen": {"multiplier": "mammen"},
    "ss_rademacher": {"multiplier": "rademacher"},
    "r_rademacher": {"small_sample": False},
    "r_mammen": {"small_sample": False, "multiplier": "mammen"},
}
BOOTSTRAP_T = {"boott_mammen": "mammen", "boott_rademacher": "rademacher"}
"""Not didmem's: a wild bootstrap-t band computed here from the cells' unit-level changes
(each draw re-studentised with its own Welch variance), to test whether re-studentising
repairs the band where the multiplier law alone cannot. ``hall``: not didmem's either,
Hall's (1992) skewness-removing transform of each cell (:func:`hall_band`)."""
EVENT_BINS = (("pre", -np.inf, -1), ("e=0", 0, 0), ("e=1-2", 1, 2), ("e>=3", 3, np.inf))


def _frame(y, cohorts, times):
    n = cohorts.size
    return pd.DataFrame({"unit": np.repeat(np.arange(n), times.size),
                         "time": np.tile(times, n),
                         "cohort": np.repeat(cohorts, times.size), "y": y.ravel()})


def _truth(first, n_cohorts, times, scale):
    g, t = np.meshgrid(first + np.arange(n_cohorts, dtype=float), times, indexing="ij")
    truth = pd.DataFrame({"cohort": g.ravel(), "time": t.ravel()})
    truth["tau"] = np.where(truth["time"] >= truth["cohort"],
                            scale / (1 + truth["time"] - truth["cohort"]), 0.0)
    return truth


def simulate_lognormal(rng, units, n_cohorts=8, n_never=150, n_times=10):
    """I.i.d. centred log-normal noise with variance 1 (see the module notes)."""
    cohorts = np.concatenate([np.repeat(2 + np.arange(n_cohorts, dtype=float), units),
                              np.full(n_never, np.inf)])
    n = cohorts.size
    times = np.arange(n_times, dtype=float)
    sd = np.sqrt((np.e - 1) * np.e)
    noise = (np.exp(rng.standard_normal((n, n_times))) - np.exp(0.5)) / sd
    event = times[None, :] - cohorts[:, None]
    tau = np.where(event >= 0, 1.0 / (1 + np.maximum(event, 0)), 0.0)
    y = rng.standard_normal(n)[:, None] + np.log1p(times)[None, :] + tau + noise
    return _frame(y, cohorts, times), _truth(2, n_cohorts, times, 1.0)


def simulate_tokacc(rng, units, n_cohorts=8, n_never=150, n_times=10, tokens=32):
    """Token accuracy with rare, large memorisation (see the module notes)."""
    cohorts = np.concatenate([np.repeat(2 + np.arange(n_cohorts, dtype=float), units),
                              np.full(n_never, np.inf)])
    n = cohorts.size
    times = np.arange(n_times, dtype=float)
    event = times[None, :] - cohorts[:, None]
    memorised = rng.random(n) < 0.2
    gain = np.where((event >= 0) & memorised[:, None], 0.5 / (1 + np.maximum(event, 0)), 0.0)
    p = np.minimum(rng.beta(1, 19, n)[:, None] + 0.01 * times[None, :] + gain, 1.0)
    y = rng.binomial(tokens, p) / tokens
    return _frame(y, cohorts, times), _truth(2, n_cohorts, times, 0.1)


def draw(dgp, units, rng):
    if dgp in ("walk", "skewwalk"):
        return simulate_walk(rng, units, skewed=dgp == "skewwalk")
    if dgp == "lognormal":
        return simulate_lognormal(rng, units)
    return simulate_tokacc(rng, units)


def measures(res, truth):
    frame = res.to_frame().merge(truth, on=["cohort", "time"], how="left")
    tau = np.where(frame["post"], frame["tau"], 0.0)
    est = frame["estimate"].to_numpy()
    se = res.std_errors
    corr = res.inference.correction
    df = corr.df if corr is not None else np.full(se.shape, np.inf)
    half = t_critical_values(1 - res.alpha / 2, df) * se
    lo, hi = frame["ci_lower"].to_numpy(), frame["ci_upper"].to_numpy()
    ok = np.isfinite(lo) & np.isfinite(half)
    below, above = (hi < tau) & ok, (lo > tau) & ok
    crit = res.cell_critical_values if res.cell_critical_values is not None else \
        np.full(se.shape, res.critical_value)
    return {"cover_point": np.where(ok, np.abs(est - tau) <= half, np.nan),
            "event": (frame["time"] - frame["cohort"]).to_numpy(),
            "simultaneous": bool(not below.any() and not above.any()),
            "miss_low": bool(below.any()), "miss_high": bool(above.any()),
            "crit": float(np.nanmean(crit[ok]))}


def _weights(rng, shape, multiplier):
    if multiplier == "rademacher":
        return rng.choice([-1.0, 1.0], size=shape)
    root5 = np.sqrt(5.0)
    low = rng.random(shape) < (root5 + 1) / (2 * root5)
    return np.where(low, (1 - root5) / 2, (1 + root5) / 2)


def _cells(df, res):
    """The fit's cells recomputed from the units' outcome changes (balanced panel,
    never-treated controls); checks that the cells and Welch standard errors are the fit's."""
    wide = df.pivot(index="unit", columns="time", values="y")
    cohort = df.groupby("unit")["cohort"].first().reindex(wide.index).to_numpy()
    frame = res.to_frame()
    times = wide.columns.to_numpy()
    col = {t: k for k, t in enumerate(times)}
    y = wide.to_numpy()
    t_idx = frame["time"].map(col).to_numpy()
    b_idx = frame["base_time"].map(col).to_numpy()
    d = y[:, t_idx] - y[:, b_idx]                              # units x cells
    treat = cohort[:, None] == frame["cohort"].to_numpy()[None, :]
    ctrl = np.repeat(~np.isfinite(cohort)[:, None], len(frame), axis=1)
    n_t, n_c = treat.sum(0), ctrl.sum(0)
    m_t, m_c = (d * treat).sum(0) / n_t, (d * ctrl).sum(0) / n_c
    centred = np.where(treat, d - m_t, np.where(ctrl, d - m_c, 0.0))
    var_t = (centred**2 * treat).sum(0) / (n_t - 1)
    var_c = (centred**2 * ctrl).sum(0) / (n_c - 1)
    est, se = m_t - m_c, np.sqrt(var_t / n_t + var_c / n_c)
    if not (np.allclose(est, frame["estimate"]) and np.allclose(se, res.std_errors)):
        raise RuntimeError("skew_coverage: recomputed cells differ from the fit's")
    return frame, centred, treat, ctrl, n_t, n_c, est, se


def _outcome(frame, truth, est, lo, hi, cover_point, crit):
    merged = frame.merge(truth, on=["cohort", "time"], how="left")
    tau = np.where(merged["post"], merged["tau"], 0.0)
    return {"cover_point": cover_point(tau).astype(float),
            "event": (frame["time"] - frame["cohort"]).to_numpy(),
            "simultaneous": bool(np.all((lo <= tau) & (tau <= hi))),
            "miss_low": bool(np.any(hi < tau)), "miss_high": bool(np.any(lo > tau)),
            "crit": float(crit)}


def hall_band(df, res, truth):
    """Hall's (1992) skewness-removing transform of each studentised cell,
    ``T + g T^2 / 3 + g^2 T^3 / 27 + g / 6`` with ``g`` the cell's estimated standardised
    skewness (third cumulant of the difference of means over its variance^1.5), compared
    with the fit's own critical values ``c_j`` (pointwise: its Welch t quantiles)."""
    frame, centred, treat, ctrl, n_t, n_c, est, se = _cells(df, res)
    k3 = (centred**3 * treat).sum(0) / n_t**3 - (centred**3 * ctrl).sum(0) / n_c**3
    g = k3 / se**3
    crit = res.cell_critical_values
    point = t_critical_values(1 - res.alpha / 2, res.inference.correction.df)

    def transform(tau):
        t = (est - tau) / se
        return t + g * t**2 / 3 + g**2 * t**3 / 27 + g / 6

    def inverse(h):  # the transform is increasing: (1 + g t / 3)^2 >= 0; solve by bisection
        lo, hi = np.full(se.shape, -60.0), np.full(se.shape, 60.0)
        for _ in range(80):
            mid = (lo + hi) / 2
            up = mid + g * mid**2 / 3 + g**2 * mid**3 / 27 + g / 6 > h
            hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
        return (lo + hi) / 2

    # |H(T)| <= c  <=>  H^-1(-c) <= (est - tau) / se <= H^-1(c)
    lo_t, hi_t = inverse(-crit), inverse(crit)
    return _outcome(frame, truth, est, est - hi_t * se, est - lo_t * se,
                    lambda tau: np.abs(transform(tau)) <= point, np.mean(crit))


def bootstrap_t(df, res, truth, draws, rng, multiplier, chunk=100):
    """The wild bootstrap-t band on a balanced panel with never-treated controls (see
    ``BOOTSTRAP_T``)."""
    frame, centred, treat, ctrl, n_t, n_c, est, se = _cells(df, res)
    sup = []
    for start in range(0, draws, chunk):
        w = _weights(rng, (min(chunk, draws - start), centred.shape[0]), multiplier)
        st, sc = w @ (centred * treat), w @ (centred * ctrl)
        qt, qc = w**2 @ (centred**2 * treat), w**2 @ (centred**2 * ctrl)
        vt = (qt - st**2 / n_t) / (n_t - 1)
        vc = (qc - sc**2 / n_c) / (n_c - 1)
        t_star = (st / n_t - sc / n_c) / np.sqrt(vt / n_t + vc / n_c)
        sup.append(np.abs(t_star))
    sup = np.concatenate(sup)
    crit = np.quantile(sup.max(1), 1 - res.alpha)
    point = np.quantile(sup, 1 - res.alpha, axis=0)
    return _outcome(frame, truth, est, est - crit * se, est + crit * se,
                    lambda tau: np.abs(est - tau) <= point * se, crit)


def study(dgp, units, reps, draws, seed, settings):
    rng = np.random.default_rng([seed, DGPS[dgp], units])
    keep = {name: [] for name in settings}
    for _ in range(reps):
        df, truth = draw(dgp, units, rng)
        boot_seed = int(rng.integers(2**62))
        panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
        base = None
        for name in sorted(settings, key=lambda k: k in BOOTSTRAP_T or k == "hall"):
            if name == "hall":
                if base is None:
                    base = didmem.DiDEstimator(n_bootstrap=draws, seed=boot_seed).fit(panel)
                keep[name].append(hall_band(df, base, truth))
                continue
            if name in BOOTSTRAP_T:
                if base is None:
                    base = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
                keep[name].append(bootstrap_t(df, base, truth, draws,
                                              np.random.default_rng(boot_seed),
                                              BOOTSTRAP_T[name]))
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = didmem.DiDEstimator(n_bootstrap=draws, seed=boot_seed,
                                          **SETTINGS[name]).fit(panel)
            keep[name].append(measures(res, truth))
            if not SETTINGS[name]:  # the default fit: Hall's band uses its critical values
                base = res
    rows = []
    for name, values in keep.items():
        cover = np.array([m["cover_point"] for m in values], dtype=float)
        per_rep = np.nanmean(cover, axis=1)
        sim = float(np.mean([m["simultaneous"] for m in values]))
        row = {"dgp": dgp, "setting": name, **SETTINGS.get(name, {}), "units_per_cohort": units,
               "cells": int(cover.shape[1]), "reps": reps, "draws": draws,
               "simultaneous": round(sim, 4),
               "simultaneous_mc_se": round(float(np.sqrt(sim * (1 - sim) / reps)), 4),
               "band_misses_low": round(float(np.mean([m["miss_low"] for m in values])), 4),
               "band_misses_high": round(float(np.mean([m["miss_high"] for m in values])), 4),
               "pointwise": round(float(per_rep.mean()), 4),
               "pointwise_mc_se": round(float(per_rep.std(ddof=1) / np.sqrt(reps)), 4),
               "mean_crit": round(float(np.mean([m["crit"] for m in values])), 3)}
        event = values[0]["event"]
        for label, a, b in EVENT_BINS:
            cols = (event >= a) & (event <= b)
            rep_cov = np.nanmean(cover[:, cols], axis=1)
            row[f"pointwise_{label}"] = round(float(rep_cov.mean()), 4)
            row[f"pointwise_{label}_mc_se"] = round(float(rep_cov.std(ddof=1) / np.sqrt(reps)), 4)
        rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dgp", nargs="+", default=["walk", "skewwalk"], choices=list(DGPS))
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS) + list(BOOTSTRAP_T) + ["hall"],
                        choices=list(SETTINGS) + list(BOOTSTRAP_T) + ["hall"])
    parser.add_argument("--units", type=int, default=15, help="treated units per cohort")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    rows = []
    for dgp in args.dgp:
        add_rows(rows, lambda: study(dgp, args.units, args.reps, args.draws, args.seed,
                                     args.settings))
    if args.json:
        write_rows(args.json, rows)


if __name__ == "__main__":
    main()
