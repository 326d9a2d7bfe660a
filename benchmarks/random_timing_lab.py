"""Random timing on the lab: do the efficient estimator's intervals cover the exact truth,
and how much smaller are its standard errors than DiD's? (issue 47 item 4)

Usage::

    nice -n 15 python benchmarks/random_timing_lab.py --seeds 8 --out /tmp/rtlab-lab \\
        [--scale quick|demo] [--results benchmarks/results/random_timing_lab]
    python benchmarks/random_timing_lab.py --seeds 8 --summarise      # no fitting

The lab's training order is a seeded permutation, so its cohorts are assigned at random by
design: Roth & Sant'Anna's random-timing assumption holds. For each master seed this runs
the lab (``didmem.lab.run`` with ``quick_config(seed=s)`` or ``demo_config``; a complete run
in ``--out/{scale}/seed{s}`` is loaded, not retrained, so runs made by
``benchmarks/lab_aggregate_coverage.py`` with the same ``--out`` are reused) and fits, on
the same panel (``mean_token_loglik``, the never-treated validation instances the last
control cohort):

* ``rt``: ``RandomTimingEstimator(seed=0)`` (the plug-in efficient beta, per estimand);
* ``rt_beta1``: ``RandomTimingEstimator(beta=1, seed=0)`` (Callaway & Sant'Anna, R
  ``staggered_cs``);
* ``did``: ``DiDEstimator(control_group="not_yet_treated", n_bootstrap=999, seed=0)``.

All three compare cohort ``g`` at checkpoint ``c >= g`` with the instances not yet trained on
by ``c`` (the later cohorts and the validation instances, pooled by instance), so all three
target the same cell of the truth: the lab's ``tau_nyt`` (chosen by the truth scoring's own
:func:`didmem.results._truth.result_truth`, which the report and ``didmem.compare`` use):
the mean, over *the sample's* analysed instances of cohort ``g``, of the exact effect of
training on them (main run minus the exact run without them) less the same run's mean
effect on the cell's controls. It is a sample average treatment effect on the treated
(ATT), not a population value and not Roth & Sant'Anna's finite-population ATE over all the
sample's instances (which the lab cannot compute: it has no run that trains an instance of
another cohort at ``g``).

Per seed it writes ``--results/{scale}_seed{s}.json`` (resumable: seeds with a file are
skipped) with, for each fit: the post-treatment cells' pointwise coverage (``estimate +-
1.96 SE``; for the random-timing fits with the design-based SE and with the Neyman SE), the
simultaneous band's (``to_frame()``'s ``ci_lower``/``ci_upper``) share of cells covered and
whether it covers all of them, and for the aggregations ``instantaneous``, ``persistent``,
``residual`` and ``simple`` (overall values, DiD's definitions: the random-timing fits'
``A_theta``/``A_0`` built from the same cells and cohort weights, with each estimand's own
plug-in beta) the estimate, SE and truth; the SE ratios random timing / DiD.

``--summarise`` prints the Markdown tables of ``benchmarks/RESULTS.md`` over the seeds with a
file: coverage with Monte Carlo standard error ``sqrt(p(1-p)/n)`` (per-seed shares: mean +-
sd/sqrt(n)), ``z = (estimate - truth)/SE`` (mean +- MC se, sd), the root mean squared error
over seeds, SE ratios, and the ATT variance check (:func:`att_variance_check`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _seeds import load_records, run_seeds  # noqa: E402  (a sibling module)

METRIC = "mean_token_loglik"
Z = 1.959963984540054
FITS = ("rt", "rt_beta1", "did")
AGGREGATIONS = ("instantaneous", "persistent", "residual", "simple")


def _estimators(draws: int) -> dict:
    from didmem import DiDEstimator, RandomTimingEstimator

    return {"rt": RandomTimingEstimator(seed=0),
            "rt_beta1": RandomTimingEstimator(beta=1, seed=0),
            "did": DiDEstimator(control_group="not_yet_treated", n_bootstrap=draws, seed=0)}


def rt_aggregation_weights(design, aggregation: str):
    """``A_theta``, ``A_0`` (K, T) of a memorisation aggregation's overall value from the
    random-timing cells, with DiD's definitions and ``N_g`` cohort weights (R ``did``'s
    ``pg``): ``instantaneous`` the cohorts' cells at ``c = g``; ``residual`` at the last
    checkpoint; ``persistent`` the plain mean over event times ``e > 0`` of the
    ``N_g``-weighted mean of the cells at ``c = g + e``; ``simple`` every post-treatment cell,
    weighted by ``N_g``. Only cohorts treated within the panel (finite code, after the first
    checkpoint) enter; each cell's weights are ``staggered``'s (controls: the cohorts after
    ``max(g, c)``), its ``A_0`` at the checkpoint before ``g``."""
    from didmem.inference.random_timing.weights import cell_weights

    codes, n, n_t = design.codes, design.count, design.n_times
    k = codes.size
    treated = [gi for gi in range(k) if np.isfinite(codes[gi]) and 0 < codes[gi] <= n_t - 1]

    def combine(cells):  # [(gi, t, weight)]
        a_theta, a_0 = np.zeros((k, n_t)), np.zeros((k, n_t))
        for gi, t, w in cells:
            vec = w * cell_weights(codes, n, gi, t, False)
            a_theta[:, t] += vec
            a_0[:, int(codes[gi]) - 1] += vec
        return a_theta, a_0

    def n_weighted(pairs):
        total = sum(n[gi] for gi, _ in pairs)
        return [(gi, t, n[gi] / total) for gi, t in pairs]

    if aggregation == "instantaneous":
        return combine(n_weighted([(gi, int(codes[gi])) for gi in treated]))
    if aggregation == "residual":
        return combine(n_weighted([(gi, n_t - 1) for gi in treated]))
    if aggregation == "simple":
        return combine(n_weighted([(gi, t) for gi in treated
                                   for t in range(int(codes[gi]), n_t)]))
    if aggregation == "persistent":
        events = range(1, n_t)
        parts = [n_weighted([(gi, int(codes[gi]) + e) for gi in treated
                             if int(codes[gi]) + e <= n_t - 1]) for e in events]
        parts = [p for p in parts if p]
        return combine([(gi, t, w / len(parts)) for p in parts for gi, t, w in p])
    raise ValueError(aggregation)


def true_overall(cells: pd.DataFrame, aggregation: str, shares: dict) -> float:
    """The truth of an aggregation's overall value from the truth's post-treatment cells
    (``cohort``, ``time``, ``tau``), with the cohort weights ``shares`` (cohort -> N_g): the
    truth scoring's :func:`~didmem.results._truth.true_aggregate` by key, then the overall
    value as DiD's aggregation forms it (cohort-weighted for instantaneous and residual, the
    plain mean over event times for persistent, cell-weighted for simple)."""
    from didmem.results._truth import true_aggregate

    post = cells[cells["time"] >= cells["cohort"]].assign(
        event_time=lambda f: f["time"] - f["cohort"])
    if aggregation == "simple":
        w = post["cohort"].map(shares).astype(float)
        return float((post["tau"] * w).sum() / w.sum())
    if aggregation == "persistent":
        return float(true_aggregate(post, "persistent", "event_time", shares).mean())
    by_cohort = true_aggregate(post, aggregation, "cohort")
    w = np.array([shares[g] for g in by_cohort.index], dtype=np.float64)
    return float((by_cohort.to_numpy() * w).sum() / w.sum())


def _cell_scores(frame: pd.DataFrame, se_columns) -> dict:
    """Pointwise coverage per SE column and the band's scores over post-treatment cells."""
    post = frame[(frame["time"] >= frame["cohort"]) & frame["tau"].notna()]
    est, tau = post["estimate"].to_numpy(), post["tau"].to_numpy()
    out = {"n_cells": int(len(post))}
    for column in se_columns:
        se = post[column].to_numpy()
        out[f"pointwise_{column}"] = float(np.mean(np.abs(est - tau) <= Z * se))
    inside = (post["ci_lower"].to_numpy() <= tau) & (tau <= post["ci_upper"].to_numpy())
    out["band_share"] = float(inside.mean())
    out["band_all"] = bool(inside.all())
    out["rmse"] = float(np.sqrt(np.mean((est - tau) ** 2)))
    return out


def att_variance_check(lab, frame: pd.DataFrame) -> dict:
    """Why the truth is not the estimator's design-based estimand, measured.

    The truth is the effect on the cohort's own instances (an ATT), so the error of a cell is
    ``mean_g(Y_c(inf) - b Y_p) - mean_controls(Y_c - b Y_p)``: it involves the treated
    instances' *untreated* paths, which the lab knows (``Y - effect`` from
    ``truth_units.parquet``; the spillover is one constant per checkpoint and leaves the
    spread unchanged), while the Neyman variance uses their *treated* paths. Per
    post-treatment cell with its coefficient ``b``: ``sd_ratio = sd(Y_c(inf) - b Y_p) /
    sd(Y_c - b Y_p)`` over the cohort's instances, and the oracle standard error against the
    ATT, ``sqrt(SE_neyman^2 - var_treated / N_g + var_untreated / N_g)``; returned: their
    medians over cells, the median of ``SE_neyman / SE_oracle`` and the pointwise coverage
    of ``estimate +- 1.96 SE_oracle``; and the medians of the cells' ``beta`` as fitted, as
    recomputed here from the moments (a check: equal for the efficient fit) and with the
    cohort's untreated paths in place of its treated ones (the coefficient that minimises
    the Neyman variance of the error against the ATT)."""
    panel = lab.panel
    wide = panel.pivot(index="unit", columns="time", values=METRIC)
    units = pd.read_parquet(lab.out_dir / "truth_units.parquet")
    units = units[units["metric"] == METRIC]
    if "exposure" in units:
        units = units[units["exposure"] == 1]
    effect = units.pivot(index="unit", columns="time", values="effect")
    cohort_of = panel.drop_duplicates("unit").set_index("unit")["cohort"]
    times = list(wide.columns)
    ratios, oracle_ratio, covered, b_fit, b_star, b_untreated = [], [], [], [], [], []
    post = frame[(frame["time"] >= frame["cohort"]) & frame["tau"].notna()]
    for row in post.itertuples(index=False):
        ids = cohort_of.index[cohort_of == row.cohort]
        pre = times[times.index(row.cohort) - 1]
        y_pre = wide.loc[ids, pre].to_numpy()
        # beta* of the cell from its moments, and the same with the cohort's untreated paths
        # (the coefficient that would minimise the error against the ATT)
        control = cohort_of.index[~(cohort_of <= row.time)]  # later cohorts and never-treated
        n_c = control.size
        pp = pt = 0.0
        by_cohort = cohort_of[control].fillna(np.inf)
        for ids_c in by_cohort.groupby(by_cohort).groups.values():
            c = np.cov(wide.loc[ids_c, pre], wide.loc[ids_c, row.time])
            pp += len(ids_c) * c[0, 0] / n_c ** 2
            pt += len(ids_c) * c[0, 1] / n_c ** 2
        y_t = wide.loc[ids, row.time].to_numpy()
        y0_t = y_t - effect.loc[ids, row.time].to_numpy()
        g_pp = np.var(y_pre, ddof=1) / ids.size
        b_fit.append(row.beta)
        b_star.append((np.cov(y_pre, y_t)[0, 1] / ids.size + pt) / (g_pp + pp))
        b_untreated.append((np.cov(y_pre, y0_t)[0, 1] / ids.size + pt) / (g_pp + pp))
        treated = wide.loc[ids, row.time].to_numpy() - row.beta * y_pre
        untreated = treated - effect.loc[ids, row.time].to_numpy()
        v1, v0 = np.var(treated, ddof=1), np.var(untreated, ddof=1)
        oracle = np.sqrt(max(row.std_error_neyman ** 2 + (v0 - v1) / ids.size, 0.0))
        ratios.append(np.sqrt(v0 / v1))
        oracle_ratio.append(row.std_error_neyman / oracle)
        covered.append(abs(row.estimate - row.tau) <= Z * oracle)
    return {"beta_fit_median": float(np.median(b_fit)),
            "beta_star_median": float(np.median(b_star)),
            "beta_untreated_median": float(np.median(b_untreated)),
            "sd_ratio_median": float(np.median(ratios)),
            "se_over_oracle_median": float(np.median(oracle_ratio)),
            "pointwise_oracle": float(np.mean(covered))}


def one_seed(out: Path, seed: int, scale: str, draws: int) -> dict:
    """Run (or load) one lab seed, fit the three estimators and score them against the truth."""
    from didmem import Panel
    from didmem.inference.random_timing.design import linear_estimates
    from didmem.lab import demo_config, quick_config, run
    from didmem.results._truth import result_truth, truth_column

    config = (quick_config if scale == "quick" else demo_config)(seed=seed)
    clock = time.perf_counter()
    lab = run(out / f"seed{seed}", config=config)
    record = {"seed": seed, "scale": scale, "seconds_lab": time.perf_counter() - clock,
              "fits": {}}
    panel = Panel(lab.panel, unit="unit", time="time", cohort="cohort", outcome=METRIC)
    cells_by_fit = {}
    for name, estimator in _estimators(draws).items():
        clock = time.perf_counter()
        result = estimator.fit(panel)
        seconds = time.perf_counter() - clock
        frame = result.to_frame()
        truth = result_truth(result, lab.truth, frame, metric=METRIC)
        column = truth_column(result, lab.truth)  # "tau_nyt" for all three
        frame = frame.merge(truth, on=["cohort", "time"], how="left")
        se_columns = ("std_error", "std_error_neyman") if name != "did" else ("std_error",)
        fit = {"truth_column": column, "seconds_fit": seconds,
               "cells": _cell_scores(frame, se_columns), "aggregations": {}}
        shares = lab.panel.drop_duplicates("unit").groupby("cohort").size().to_dict()
        for kind in AGGREGATIONS:
            tau = true_overall(truth, kind, shares)
            if name == "did":
                agg = result.aggregate(kind).overall
                values = {"estimate": agg.estimate, "std_error": agg.std_error}
            else:
                a_theta, a_0 = rt_aggregation_weights(result.design, kind)
                est = linear_estimates(result.design, a_theta, a_0, result.params["beta"])
                values = {"estimate": float(est.estimate[0]),
                          "std_error": float(est.std_error[0]),
                          "std_error_neyman": float(est.std_error_neyman[0]),
                          "beta": float(est.beta[0]), "x_hat": float(est.x_hat[0])}
                if kind == "simple":  # the built-in simple, as a check of the weights
                    own = result.aggregate("simple").overall
                    fit["simple_check_abs"] = abs(own["estimate"] - values["estimate"])
            values["truth"] = tau
            fit["aggregations"][kind] = values
        record["fits"][name] = fit
        cells_by_fit[name] = frame.set_index(["cohort", "time"])
        if name != "did":
            fit["att_check"] = att_variance_check(lab, frame)
        if name == "rt":  # the design check: balance of the pre-treatment outcomes
            balance = result.balance_test(event_times=(0, 1, 2))
            fit["balance_t_simple"] = float(balance["t"].iloc[0])  # |t|, as staggered's
            fit["balance_pvalue_wald"] = float(balance.attrs["pvalue_wald"])
    # SE ratios random timing / DiD over the post-treatment cells both have
    did = cells_by_fit["did"]
    # beta = 1 is Callaway & Sant'Anna: the same post-treatment estimates as DiD's (a
    # check; before treatment DiD's varying base period compares other checkpoints)
    same = [i for i in cells_by_fit["rt_beta1"].index.intersection(did.index) if i[1] >= i[0]]
    record["beta1_vs_did_max_abs"] = max(
        float(np.max(np.abs(cells_by_fit["rt_beta1"].loc[same, "estimate"]
                            - did.loc[same, "estimate"]))),
        max(abs(record["fits"]["rt_beta1"]["aggregations"][k]["estimate"]
                - record["fits"]["did"]["aggregations"][k]["estimate"]) for k in AGGREGATIONS))
    for name in ("rt", "rt_beta1"):
        mine = cells_by_fit[name]
        both = mine.index.intersection(did.index)
        both = [i for i in both if i[1] >= i[0]]
        ratio = mine.loc[both, "std_error"] / did.loc[both, "std_error"]
        ratio_n = mine.loc[both, "std_error_neyman"] / did.loc[both, "std_error"]
        record["fits"][name]["se_ratio_cells_median"] = float(np.median(ratio))
        record["fits"][name]["se_neyman_ratio_cells_median"] = float(np.median(ratio_n))
        record["fits"][name]["se_ratio_aggregations"] = {
            kind: record["fits"][name]["aggregations"][kind]["std_error"]
            / record["fits"]["did"]["aggregations"][kind]["std_error"]
            for kind in AGGREGATIONS}
    return record


def _p(values) -> str:
    """A coverage (share of seeds) with its MC standard error."""
    v = np.asarray(values, dtype=float)
    p = v.mean()
    return f"{p:.3f} ± {np.sqrt(p * (1 - p) / v.size):.3f}"


def _m(values, digits: int = 3) -> str:
    """A mean over seeds with its MC standard error sd/sqrt(n)."""
    v = np.asarray(values, dtype=float)
    return f"{v.mean():.{digits}f} ± {v.std(ddof=1) / np.sqrt(v.size):.{digits}f}"


def summarise(records: list) -> str:
    """The Markdown tables over seeds (see the module docstring)."""
    n = len(records)
    label = {"rt": "random timing, efficient beta", "rt_beta1": "random timing, beta = 1",
             "did": "DiD, not-yet-treated"}
    lines = [f"{n} lab seeds ({records[0]['scale']} scale; seeds "
             f"{', '.join(str(r['seed']) for r in records)}), {METRIC}, truth "
             f"{sorted({r['fits'][f]['truth_column'] for r in records for f in FITS})}.", "",
             "Cells (post-treatment): share covered per seed, mean over seeds ± MC se; the "
             "band covering every cell: share of seeds ± MC se.", "",
             "| estimator | cells per seed | pointwise, design-based SE | pointwise, Neyman SE "
             "| band: share of cells | band: all cells | RMSE |",
             "|---|---|---|---|---|---|---|"]
    for f in FITS:
        c = pd.DataFrame([r["fits"][f]["cells"] for r in records])
        neyman = _m(c["pointwise_std_error_neyman"]) if f != "did" else "(SE as left)"
        lines.append(f"| {label[f]} | {c['n_cells'].iloc[0]} | {_m(c['pointwise_std_error'])} "
                     f"| {neyman} | {_m(c['band_share'])} | {_p(c['band_all'])} | "
                     f"{_m(c['rmse'], 4)} |")
    lines += ["", "Aggregations (overall values, 95% pointwise `estimate ± 1.96 SE`): coverage "
              "± MC se; z = (estimate - truth) / SE; SE ratio to DiD per seed, median "
              "(min-max).", "",
              "| aggregation | estimator | coverage | with Neyman SE | mean z ± MC se | sd z "
              "| mean SE | RMSE over seeds | SE ratio to DiD |",
              "|---|---|---|---|---|---|---|---|---|"]
    for kind in AGGREGATIONS:
        for f in FITS:
            a = pd.DataFrame([r["fits"][f]["aggregations"][kind] for r in records])
            err = a["estimate"] - a["truth"]
            z = err / a["std_error"]
            cover = np.abs(z) <= Z
            neyman = (_p(np.abs(err / a["std_error_neyman"]) <= Z)
                      if "std_error_neyman" in a else "")
            ratio = ""
            if f != "did":
                rs = np.array([r["fits"][f]["se_ratio_aggregations"][kind] for r in records])
                ratio = f"{np.median(rs):.2f} ({rs.min():.2f}-{rs.max():.2f})"
            lines.append(f"| {kind if f == 'rt' else ''} | {label[f]} | {_p(cover)} | "
                         f"{neyman} | {_m(z, 2)} | {z.std(ddof=1):.2f} | "
                         f"{a['std_error'].mean():.4f} | {np.sqrt(np.mean(err ** 2)):.4f} | "
                         f"{ratio} |")
    lines += ["", "Paired over seeds, the efficient estimator's squared error against the truth "
              "less DiD's (mean ± MC se; negative: the efficient estimate is nearer the truth):",
              ""]
    for kind in AGGREGATIONS:
        sq = {f: np.array([(r["fits"][f]["aggregations"][kind]["estimate"]
                            - r["fits"][f]["aggregations"][kind]["truth"]) ** 2
                           for r in records]) for f in ("rt", "did")}
        d = (sq["rt"] - sq["did"]) * 1e6
        lines.append(f"- {kind}: {d.mean():+.1f} ± {d.std(ddof=1) / np.sqrt(n):.1f} (x 1e-6); "
                     f"nearer in {int((sq['rt'] < sq['did']).sum())} of {n} seeds")
    lines += ["", "The coefficient on the pre-treatment difference X that minimises the squared "
              "error against the truth over the seeds (A = DiD's error + X is the difference in "
              "means' error; beta_emp = sum A X / sum X^2, its se from the regression), beside "
              "the efficient fit's beta (mean over seeds):", ""]
    for kind in AGGREGATIONS:
        x = np.array([r["fits"]["rt"]["aggregations"][kind]["x_hat"] for r in records])
        a = x + np.array([r["fits"]["did"]["aggregations"][kind]["estimate"]
                          - r["fits"]["did"]["aggregations"][kind]["truth"] for r in records])
        b = float(a @ x / (x @ x))
        se = float(np.sqrt(np.sum((a - b * x) ** 2) / (n - 1) / (x @ x)))
        fitted = np.mean([r["fits"]["rt"]["aggregations"][kind]["beta"] for r in records])
        lines.append(f"- {kind}: beta_emp {b:.2f} ± {se:.2f}; corr(A, X) "
                     f"{np.corrcoef(a, x)[0, 1]:.2f}; the efficient fit's beta {fitted:.2f}")
    lines += ["", "SE ratio random timing / DiD over the post-treatment cells (per seed the "
              "median over cells; over seeds mean ± MC se, min-max):", ""]
    for f in ("rt", "rt_beta1"):
        rs = np.array([r["fits"][f]["se_ratio_cells_median"] for r in records])
        rn = np.array([r["fits"][f]["se_neyman_ratio_cells_median"] for r in records])
        lines.append(f"- {label[f]}: design-based SE {_m(rs)} ({rs.min():.3f}-{rs.max():.3f});"
                     f" Neyman SE {_m(rn)} ({rn.min():.3f}-{rn.max():.3f})")
    lines += ["", "Against the cohort's own instances (the truth is an ATT), per seed the median "
              "over post-treatment cells, mean over seeds ± MC se: sd of the treated "
              "instances' untreated / treated adjusted paths; Neyman SE / oracle SE against "
              "the ATT; pointwise coverage with the oracle SE:", ""]
    a = pd.DataFrame([r["fits"]["rt"]["att_check"] for r in records])
    lines.append(f"- the cells' efficient beta: {_m(a['beta_fit_median'])} (recomputed from the "
                 f"moments: {_m(a['beta_star_median'])}); the same with the cohort's untreated "
                 f"paths in place of its treated ones: {_m(a['beta_untreated_median'])}")
    for f in ("rt", "rt_beta1"):
        a = pd.DataFrame([r["fits"][f]["att_check"] for r in records])
        lines.append(f"- {label[f]}: sd ratio {_m(a['sd_ratio_median'])}; SE / oracle SE "
                     f"{_m(a['se_over_oracle_median'])}; coverage with the oracle SE "
                     f"{_m(a['pointwise_oracle'])}")
    t = np.array([r["fits"]["rt"]["balance_t_simple"] for r in records])
    pw = np.array([r["fits"]["rt"]["balance_pvalue_wald"] for r in records])
    lines.append(f"\nbalance test (result.balance_test(event_times=(0, 1, 2))): |t| of simple's "
                 f"pre-treatment difference mean {_m(t, 2)} (0.80 under balance); Wald "
                 f"p-values min {pw.min():.3f}, below 0.05 in {int((pw < 0.05).sum())} of {n}")
    check = max(r["fits"][f]["simple_check_abs"] for r in records for f in ("rt", "rt_beta1"))
    lines.append(f"\nweights check (max |built-in simple - simple from the cells' weights|): "
                 f"{check:.1e}")
    check = max(r["beta1_vs_did_max_abs"] for r in records)
    lines.append(f"beta = 1 against DiD (max |estimate difference| over post-treatment cells "
                 f"and aggregations): {check:.1e}")
    secs = {f: np.mean([r["fits"][f]["seconds_fit"] for r in records]) for f in FITS}
    lines.append("mean fit seconds: " + ", ".join(f"{f} {s:.2f}" for f, s in secs.items()))
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--scale", choices=("quick", "demo"), default="quick")
    parser.add_argument("--out", default="/tmp/rtlab-lab",
                        help="lab runs go to OUT/SCALE/seed{s} (checkpoints: keep it out of "
                             "the repo)")
    parser.add_argument("--results", default="benchmarks/results/random_timing_lab")
    parser.add_argument("--draws", type=int, default=999, help="DiD's bootstrap draws")
    parser.add_argument("--summarise", action="store_true", help="only print the tables")
    args = parser.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    results = Path(args.results)
    if args.summarise:
        records = load_records(results, args.scale, seeds)
    else:
        records = run_seeds(
            lambda seed: one_seed(Path(args.out) / args.scale, seed, args.scale, args.draws),
            results, args.scale, seeds, header="")
    if len(records) >= 2:
        print(summarise(records))


if __name__ == "__main__":
    main()
