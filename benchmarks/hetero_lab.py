"""The lab proves the contrasts (issue 49, item 4): subgroups, moderator slopes and the
difference of two models, judged against the lab's exact per-instance truth.

For each seed the lab trains, at the quick scale with rare instances (``rare_share=0.5``:
half of the instances, validation ones too, have rare text, which the model memorises more),
two models on the same instances: ``a`` with the quick scale's learning rate (2e-2) and
``b`` with a lower one (``--lr-b``, 5e-3). Every cohort has an exact run, so
``truth_units.parquet`` holds each analysed instance's exact effect and
``truth_controls.parquet`` each exact run's effect on every never-treated instance. From
them, exactly, for the sample at hand:

* a subgroup's truth ``tau_S(g, c)``: the mean total effect over the subgroup's cohort-``g``
  instances less the mean effect of the same exact run on the subgroup's never-treated
  instances (the subgroup's own spillover, as its own controls see it);
* a moderator's truth per cell: the least-squares slope of the cohort's total effects on
  the moderator less the slope of the exact run's effects on the never-treated instances
  (what ``beta_1 - beta_0`` estimates; :func:`didmem.moderator_slopes`);
* the models' difference: ``tau_a(g, c) - tau_b(g, c)`` of the two runs' ``truth.parquet``.

Judged, per seed, over the post-treatment cells (``didmem.results._truth``'s scoring, the
one the lab's replications use): whether each estimate's simultaneous 95% band covers the
truth (cells covered, k of n over seeds, and the band covering every cell at once), and the
instantaneous aggregation (band over cohorts, pointwise overall interval), for

1. each subgroup's profile (:func:`didmem.heterogeneity` by ``rare``),
2. the subgroups' difference ``rare - common``,
3. the slope on ``surprisal`` (:func:`didmem.moderator_slopes`),
4. the models' difference ``a - b`` (:func:`didmem.compare_profiles`, paired), with the
   paired standard error against the unpaired one;

and, with ``--placebos P``, the size of the equality tests on ``P`` random 50/50 labels per
seed (no subgroup difference in the population).

Usage (the figures in benchmarks/RESULTS.md)::

    timeout 3000 python benchmarks/hetero_lab.py --seeds 10 --out /tmp/hetero-lab \\
        --json benchmarks/results/hetero_lab.json

Lab runs already complete in ``--out`` are loaded, not retrained. The Monte Carlo error of a
share ``p`` of ``n`` is ``sqrt(p (1 - p) / n)`` (cells within a seed are correlated, so the
seeds' count is the firmer figure).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from _provenance import write_rows

METRIC = "mean_token_loglik"


def lab_pair(out: Path, seed: int, lr_b: float):
    """The two models' lab runs of one seed (trained, or loaded when complete)."""
    from didmem.lab import quick_config, run

    cfg = quick_config(seed=seed, rare_share=0.5, truth_draws=0, metrics=(METRIC,))
    a = run(out / f"seed{seed}" / "a", config=cfg, progress=False)
    b = run(out / f"seed{seed}" / "b", config=cfg.replace(learning_rate=lr_b), progress=False)
    return a, b


def unit_truth(lab):
    """Per analysed instance its total effect, and per never-treated instance each exact
    run's effect (one metric)."""
    units = pd.read_parquet(lab.out_dir / "truth_units.parquet")
    units = units[units["metric"] == METRIC].copy()
    if not units["exact"].all():
        raise SystemExit("every cohort needs an exact run (exact_cohorts='all')")
    units["total"] = units["effect"] + units["spillover"]
    controls = pd.read_parquet(lab.out_dir / "truth_controls.parquet")
    return units, controls[controls["metric"] == METRIC]


def subgroup_truth(units, controls, labels: pd.Series, group) -> pd.DataFrame:
    """``cohort, time, tau``: the subgroup's exact truth (its own spillover subtracted)."""
    mine = units[units["unit"].map(labels).to_numpy() == group]
    total = mine.groupby(["cohort", "time"])["total"].mean()
    ctl = controls[controls["unit"].map(labels).to_numpy() == group]
    spill = ctl.groupby(["cohort", "time"])["effect"].mean()
    tau = total - spill.reindex(total.index).fillna(0.0)  # before g both runs are one model
    return tau.rename("tau").reset_index()


def _ols_slope(x, y) -> float:
    x = np.asarray(x, float) - np.mean(x)
    return float(np.sum(x * (np.asarray(y, float) - np.mean(y))) / np.sum(x * x))


def slope_truth(units, controls, moderator: pd.Series) -> pd.DataFrame:
    """``cohort, time, tau``: per post-treatment cell, the slope of the cohort's total effects
    on the moderator less the slope of the exact run's effects on the never-treated."""
    rows = []
    for (g, c), part in units[units["time"] >= units["cohort"]].groupby(["cohort", "time"]):
        ctl = controls[(controls["cohort"] == g) & (controls["time"] == c)]
        rows.append((g, c, _ols_slope(moderator[part["unit"]], part["total"])
                     - _ols_slope(moderator[ctl["unit"]], ctl["effect"])))
    return pd.DataFrame(rows, columns=["cohort", "time", "tau"])


def instantaneous_truth(truth: pd.DataFrame, counts: pd.Series) -> tuple:
    """tau(g, g) by cohort, and their average with the cohorts' treated counts (the
    instantaneous aggregation's weights on a balanced panel)."""
    inst = truth[truth["time"] == truth["cohort"]].set_index("cohort")["tau"]
    w = counts.reindex(inst.index).astype(float)
    return inst, float(np.sum(inst * w) / np.sum(w))


def judge(estimate, tau, lower, upper) -> dict:
    """Cells covered (of n) and whether every cell is, from the shared truth scoring."""
    from didmem.results._truth import score_estimates

    s = score_estimates(estimate, tau, lower, upper)
    return {"n": s.n_cells, "covered": s.covered, "all": bool(s.covers_all == 1.0),
            "bias": s.bias}


def judge_aggregate(keys: pd.DataFrame, value: str, inst: pd.Series, interval: tuple,
                    overall: float) -> dict:
    """The instantaneous aggregation: its band over cohorts (``keys``: one row per cohort),
    and the overall value's pointwise ``interval`` (lower, upper)."""
    band = judge(keys[value], inst.reindex(keys["cohort"]).to_numpy(), keys["ci_lower"],
                 keys["ci_upper"])
    return {"band_all": band["all"],
            "overall_covered": bool(interval[0] <= overall <= interval[1])}


def one_seed(seed: int, out: Path, lr_b: float, placebos: int) -> dict:
    import didmem
    from didmem import DiDEstimator, Panel
    from didmem.results._truth import cells_with_truth, score_cells

    clock = time.perf_counter()
    lab_a, lab_b = lab_pair(out, seed, lr_b)
    trained = time.perf_counter() - clock
    frame = lab_a.panel
    panel = Panel(frame, unit="unit", time="time", cohort="cohort", outcome=METRIC)
    per_unit = frame.groupby("unit")[["rare", "surprisal"]].first()
    rare, surprisal = per_unit["rare"], per_unit["surprisal"]
    units, controls = unit_truth(lab_a)
    row = {"seed": seed, "train_s": round(trained, 1)}

    # 1-2: subgroups by rare, and their difference
    het = didmem.heterogeneity(panel, rare, seed=seed)
    truths = {}
    for g, result in het.results.items():
        truths[g] = subgroup_truth(units, controls, rare, g)
        cells = cells_with_truth(result, truths[g])
        score = score_cells(cells[cells["post"]])
        row[f"sub{g}"] = {"n": score.n_cells, "covered": score.covered,
                          "all": bool(score.covers_all == 1.0), "bias": score.bias}
        counts = cells[cells["event_time"] == 0].set_index("cohort")["n_treated"]
        inst, overall = instantaneous_truth(truths[g], counts)
        agg = result.aggregate("instantaneous")
        row[f"sub{g}_inst"] = judge_aggregate(
            agg.to_frame(), "estimate", inst, (agg.overall.ci_lower, agg.overall.ci_upper),
            overall)
        truths[g] = (truths[g], inst, overall)
    diff = het.difference(1, 0)
    table = diff.to_frame()
    true_diff = (truths[1][0].set_index(["cohort", "time"])["tau"]
                 - truths[0][0].set_index(["cohort", "time"])["tau"])
    post = table[table["post"]]
    tau = true_diff.reindex(pd.MultiIndex.from_frame(post[["cohort", "time"]])).to_numpy()
    row["subdiff"] = judge(post["difference"], tau, post["ci_lower"], post["ci_upper"])
    row["subdiff"]["true_inst_overall"] = truths[1][2] - truths[0][2]
    agg = diff.aggregate("instantaneous")
    row["subdiff_inst"] = judge_aggregate(
        agg.to_frame(), "difference", truths[1][1] - truths[0][1],
        (agg.overall.ci_lower, agg.overall.ci_upper), truths[1][2] - truths[0][2])
    row["subdiff_inst"]["estimate"] = float(agg.overall.estimate)
    row["equal_rejected"] = {"max_t": bool(het.joint_test("max_t").pvalue < 0.05),
                             "wald": bool(het.joint_test("wald").pvalue < 0.05)}

    # 3: the slope on surprisal
    slopes = didmem.moderator_slopes(panel, surprisal, seed=seed)
    st = slopes.to_frame()
    post = st[st["post"]]
    truth = slope_truth(units, controls, surprisal).set_index(["cohort", "time"])["tau"]
    tau = truth.reindex(pd.MultiIndex.from_frame(post[["cohort", "time"]])).to_numpy()
    row["slope"] = judge(post["slope"], tau, post["ci_lower"], post["ci_upper"])
    counts = units[units["time"] == units["cohort"]].groupby("cohort")["unit"].nunique()
    sinst, soverall = instantaneous_truth(truth.reset_index(), counts)
    sagg = slopes.aggregate("instantaneous")
    last = sagg.iloc[-1]
    row["slope_inst"] = judge_aggregate(sagg[~sagg["overall"]], "slope", sinst,
                                        (last["ci_lower"], last["ci_upper"]), soverall)
    row["slope_inst"]["true_overall"] = soverall

    # 4: the models' difference, paired
    est = DiDEstimator(seed=seed)
    res_a = est.fit(panel)
    res_b = est.fit(Panel(lab_b.panel, unit="unit", time="time", cohort="cohort",
                          outcome=METRIC))
    md = didmem.compare_profiles(res_a, res_b, labels=("lr 2e-2", f"lr {lr_b:g}"), seed=seed)
    table = md.to_frame()
    post = table[table["post"]]
    ta = lab_a.truth[lab_a.truth["metric"] == METRIC].set_index(["cohort", "time"])["tau"]
    tb = lab_b.truth[lab_b.truth["metric"] == METRIC].set_index(["cohort", "time"])["tau"]
    tdiff = (ta - tb).reindex(pd.MultiIndex.from_frame(post[["cohort", "time"]])).to_numpy()
    row["models"] = judge(post["difference"], tdiff, post["ci_lower"], post["ci_upper"])
    row["models"]["paired_over_unpaired_se"] = float(
        np.mean(post["std_error"] / post["unpaired_std_error"]))
    row["models"]["pairing"] = md.pairing
    counts = res_a.to_frame().query("event_time == 0").set_index("cohort")["n_treated"]
    inst_a, over_a = instantaneous_truth(ta.reset_index(), counts)
    inst_b, over_b = instantaneous_truth(tb.reset_index(), counts)
    agg = md.aggregate("instantaneous")
    row["models_inst"] = judge_aggregate(agg.to_frame(), "difference", inst_a - inst_b,
                                         (agg.overall.ci_lower, agg.overall.ci_upper),
                                         over_a - over_b)
    row["models_inst"].update(estimate=float(agg.overall.estimate), truth=over_a - over_b,
                              se=float(agg.overall.std_error),
                              unpaired_se=float(agg.unpaired_overall_std_error))

    # placebo labels: the equality tests' size
    rng = np.random.default_rng(10_000 + seed)
    rejected = {"max_t": 0, "wald": 0, "inst": 0}
    for _ in range(placebos):
        label = pd.Series(rng.integers(0, 2, rare.size), index=rare.index, name="placebo")
        h = didmem.heterogeneity(panel, label, seed=seed)
        rejected["max_t"] += h.joint_test("max_t").pvalue < 0.05
        rejected["wald"] += h.joint_test("wald").pvalue < 0.05
        rejected["inst"] += h.equality("instantaneous").iloc[-1]["pvalue"] < 0.05
    row["placebo"] = {"n": placebos, **{k: int(v) for k, v in rejected.items()}}
    row["seconds"] = round(time.perf_counter() - clock, 1)
    return row


def _rate(k: int, n: int) -> str:
    p = k / n if n else np.nan
    return f"{k}/{n} = {p:.3f} ({np.sqrt(p * (1 - p) / n):.3f})" if n else "-"


def report(rows: list) -> str:
    n = len(rows)
    lines = [f"{n} seeds (the quick scale, rare_share=0.5, two learning rates); "
             "k/n = share (MC se)"]
    for name, what in (("sub0", "subgroup common (rare=0) profile"),
                       ("sub1", "subgroup rare (rare=1) profile"),
                       ("subdiff", "difference rare - common"),
                       ("slope", "slope on surprisal"),
                       ("models", "difference of the models a - b")):
        cells = sum(r[name]["covered"] for r in rows)
        total = sum(r[name]["n"] for r in rows)
        alls = sum(r[name]["all"] for r in rows)
        lines.append(f"{what}: cells covered {_rate(cells, total)}; band covers every cell "
                     f"in {_rate(alls, n)} seeds; mean error "
                     f"{np.mean([r[name]['bias'] for r in rows]):+.4f}")
    for name, what in (("sub0_inst", "instantaneous, subgroup common"),
                       ("sub1_inst", "instantaneous, subgroup rare"),
                       ("subdiff_inst", "instantaneous difference rare - common"),
                       ("slope_inst", "instantaneous slope"),
                       ("models_inst", "instantaneous difference of the models")):
        lines.append(f"{what}: band over cohorts covers {_rate(sum(r[name]['band_all'] for r in rows), n)}"
                     f"; overall interval covers {_rate(sum(r[name]['overall_covered'] for r in rows), n)}")
    d = [r["subdiff"]["true_inst_overall"] for r in rows]
    lines.append(f"true instantaneous rare - common: mean {np.mean(d):.4f} (min {np.min(d):.4f}); "
                 f"the joint max-t test rejects equality in "
                 f"{sum(r['equal_rejected']['max_t'] for r in rows)} of {n} seeds, Wald in "
                 f"{sum(r['equal_rejected']['wald'] for r in rows)}")
    s = [r["slope_inst"]["true_overall"] for r in rows]
    lines.append(f"true instantaneous slope on surprisal: mean {np.mean(s):.4f}")
    m = [r["models_inst"] for r in rows]
    lines.append(f"models, instantaneous overall: true difference mean "
                 f"{np.mean([x['truth'] for x in m]):.4f}; paired SE {np.mean([x['se'] for x in m]):.4f} "
                 f"against unpaired {np.mean([x['unpaired_se'] for x in m]):.4f}; "
                 f"sd of (estimate - truth) over seeds "
                 f"{np.std([x['estimate'] - x['truth'] for x in m], ddof=1):.4f}; cell SE ratio "
                 f"paired/unpaired {np.mean([r['models']['paired_over_unpaired_se'] for r in rows]):.3f}")
    p = sum(r["placebo"]["n"] for r in rows)
    if p:
        for k in ("max_t", "wald", "inst"):
            lines.append(f"placebo labels, {k} test rejects at 5%: "
                         f"{_rate(sum(r['placebo'][k] for r in rows), p)}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--out", default="hetero-lab")
    parser.add_argument("--lr-b", type=float, default=5e-3)
    parser.add_argument("--placebos", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    out = Path(args.out)
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows.append(one_seed(seed, out, args.lr_b, args.placebos))
        r = rows[-1]
        print(f"seed {seed}: {r['seconds']} s; subgroups {r['sub0']['covered']}+"
              f"{r['sub1']['covered']}/{r['sub0']['n'] + r['sub1']['n']}, difference "
              f"{r['subdiff']['covered']}/{r['subdiff']['n']}, slope "
              f"{r['slope']['covered']}/{r['slope']['n']}, models "
              f"{r['models']['covered']}/{r['models']['n']}", flush=True)
        if args.json:
            write_rows(args.json, rows)
    print(report(rows))


if __name__ == "__main__":
    main()
