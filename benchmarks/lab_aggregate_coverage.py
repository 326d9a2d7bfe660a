"""Monte Carlo over lab seeds: do DiD's aggregate intervals cover the lab's direct truth?

Usage::

    nice -n 15 python benchmarks/lab_aggregate_coverage.py --seeds 20 --out /tmp/lab-mc \\
        [--scale quick|demo] [--results benchmarks/results/lab_aggregate_coverage]
    python benchmarks/lab_aggregate_coverage.py --seeds 20 --summarise   # no fitting

For each master seed it runs the lab (``didmem.lab.run``; a complete run in
``--out/seed{s}`` is loaded, not retrained), fits ``DiDEstimator(n_bootstrap=999,
seed=0)`` on ``mean_token_loglik`` with never-treated controls and with not-yet-treated
controls, and writes ``--results/{scale}_seed{s}.json`` as soon as the seed is done (so
the run is resumable: seeds with a file are skipped). Each file holds, for the
instantaneous, persistent and overall (``simple``) aggregations, the estimate, its standard
error and pointwise 95% interval, and the truth of the same aggregation with the same
cohort weights: from ``tau`` (the direct effect, the estimand of the never-treated
comparison), ``tau_nyt`` (the not-yet-treated comparison's) and ``tau_total`` (the old truth
with the exact run's drift), and from every replacement draw's direct truth (the truth's own
noise). It also holds the per-cell scores of the simultaneous band (share of post-treatment
cells covered, all covered, correlation) against ``tau`` and ``tau_total``.

``--summarise`` prints, over the seeds with a file, per aggregation and truth: the coverage
of the 95% interval with its Monte Carlo standard error ``sqrt(p (1 - p) / n)``, the mean and
standard deviation of ``z = (estimate - truth) / SE`` (1 if the interval is right for this
truth), the same with the truth's own noise added, ``z2 = (estimate - truth) / sqrt(SE^2 +
se_truth^2)``, where ``se_truth^2`` is the variance of one exact run's aggregate truth over
replacement draws, pooled over seeds (half the mean squared difference of two draws).
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
AGGREGATIONS = ("instantaneous", "persistent", "overall")
CONTROLS = {"never": "never_treated", "nyt": "not_yet_treated"}
#: The truth each fit is judged against, and the old truth beside it.
TRUTHS = {"never": ("tau", "tau_total"), "nyt": ("tau_nyt", "tau_total")}


def true_aggregates(cells: pd.DataFrame, column: str) -> dict:
    """The aggregations of a truth column over post-treatment cells (``cohort``, ``time``),
    with the weights of DiD's aggregations on the lab's balanced panel, where every cohort
    holds the same number of instances (R ``did``'s ``pg`` are equal): instantaneous, the
    mean of tau(g, g) over cohorts; persistent, the mean over event times e > 0 of the mean
    over cohorts of tau(g, g + e); overall (``simple``), the mean over post-treatment cells.
    """
    post = cells[cells["time"] >= cells["cohort"]]
    event = post["time"] - post["cohort"]
    inst = post.loc[event == 0, column].mean()
    persistent = post[event > 0].groupby(event[event > 0])[column].mean().mean()
    return {"instantaneous": float(inst), "persistent": float(persistent),
            "overall": float(post[column].mean())}


def _band_scores(frame: pd.DataFrame, truth: pd.Series) -> dict:
    post = frame[frame["time"] >= frame["cohort"]]
    tau = truth.reindex(pd.MultiIndex.from_frame(post[["cohort", "time"]])).to_numpy(float)
    inside = (post["ci_lower"].to_numpy() <= tau) & (tau <= post["ci_upper"].to_numpy())
    return {"cell_coverage": float(inside.mean()), "covers_all": bool(inside.all()),
            "corr": float(np.corrcoef(post["estimate"], tau)[0, 1]),
            "rmse": float(np.sqrt(np.mean((post["estimate"].to_numpy() - tau) ** 2))),
            "mean_error": float(np.mean(post["estimate"].to_numpy() - tau))}


def one_seed(out: Path, seed: int, scale: str, draws: int) -> dict:
    """Run (or load) one lab seed, fit both comparisons and score them against the truths."""
    from didmem import DiDEstimator, Panel
    from didmem.lab import demo_config, quick_config, run

    config = (quick_config if scale == "quick" else demo_config)(seed=seed)
    clock = time.perf_counter()
    lab = run(out / f"seed{seed}", config=config)
    seconds_lab = time.perf_counter() - clock
    truth = lab.truth[lab.truth["metric"] == METRIC]
    if "exposure" in truth:
        truth = truth[truth["exposure"] == 1]
    by_cell = truth.set_index(["cohort", "time"])
    draws_table = pd.read_parquet(lab.out_dir / "truth_draws.parquet")
    draws_table = draws_table[draws_table["metric"] == METRIC]
    record = {"seed": seed, "scale": scale, "seconds_lab": seconds_lab,
              "truth": {col: true_aggregates(truth, col)
                        for col in ("tau", "tau_nyt", "tau_total")},
              "truth_draws": {int(j): true_aggregates(part, "tau")
                              for j, part in draws_table.groupby("draw")},
              "fits": {}}
    panel = Panel(lab.panel, unit="unit", time="time", cohort="cohort", outcome=METRIC)
    for name, control in CONTROLS.items():
        fitted = DiDEstimator(control_group=control, n_bootstrap=draws,
                              seed=0).fit(panel)
        frame = fitted.to_frame()
        fit = {"aggregations": {}, "band": {}}
        for kind in AGGREGATIONS:
            agg = fitted.aggregate(kind).overall
            fit["aggregations"][kind] = {"estimate": agg.estimate, "std_error": agg.std_error,
                                         "ci_lower": agg.ci_lower, "ci_upper": agg.ci_upper}
        # the aggregation weights assumed by true_aggregates, checked on the estimates
        mine = true_aggregates(frame, "estimate")
        fit["weights_check_max_abs"] = max(
            abs(mine[k] - fit["aggregations"][k]["estimate"]) for k in AGGREGATIONS)
        for column in TRUTHS[name]:
            fit["band"][column] = _band_scores(frame, by_cell[column])
        record["fits"][name] = fit
    return record


def summarise(records: list) -> str:
    """The Monte Carlo table over seeds (see the module docstring)."""
    n = len(records)
    lines = [f"{n} lab seeds ({records[0]['scale']} scale), {METRIC}, 95% pointwise intervals "
             "of the aggregations' overall values; MC se = sqrt(p(1-p)/n) for coverage, "
             "sd/sqrt(n) for means"]
    head = (f"{'fit':>6} {'aggregation':>14} {'truth':>10} {'coverage':>15} {'mean z':>14} "
            f"{'sd z':>6} {'cov+noise':>15} {'sd z2':>6} {'se_truth/SE':>11}")
    lines.append(head)
    for name in CONTROLS:
        for kind in AGGREGATIONS:
            # the truth's own noise: variance over replacement draws of the direct truth
            diffs = [r["truth_draws"]["0"][kind] - r["truth_draws"][j][kind]
                     for r in records for j in r["truth_draws"] if j != "0"]
            var_truth = float(np.mean(np.square(diffs)) / 2) if diffs else np.nan
            for column in TRUTHS[name]:
                est = np.array([r["fits"][name]["aggregations"][kind]["estimate"]
                                for r in records])
                se = np.array([r["fits"][name]["aggregations"][kind]["std_error"]
                               for r in records])
                tau = np.array([r["truth"][column][kind] for r in records])
                z = (est - tau) / se
                cover = np.abs(z) <= 1.959964
                z2 = (est - tau) / np.sqrt(se ** 2 + (var_truth if column != "tau_total" else 0))
                cover2 = np.abs(z2) <= 1.959964
                p, p2 = cover.mean(), cover2.mean()
                lines.append(
                    f"{name:>6} {kind:>14} {column:>10} "
                    f"{p:6.3f} ± {np.sqrt(p * (1 - p) / n):5.3f} "
                    f"{z.mean():+6.2f} ± {z.std(ddof=1) / np.sqrt(n):4.2f} {z.std(ddof=1):6.2f} "
                    f"{p2:6.3f} ± {np.sqrt(p2 * (1 - p2) / n):5.3f} {z2.std(ddof=1):6.2f} "
                    f"{np.sqrt(var_truth) / np.median(se):11.2f}")
    lines.append("")
    lines.append("per-cell simultaneous band (post-treatment cells), mean over seeds ± MC se:")
    for name in CONTROLS:
        for column in TRUTHS[name]:
            band = pd.DataFrame([r["fits"][name]["band"][column] for r in records])
            parts = []
            for key in ("cell_coverage", "covers_all", "corr", "rmse", "mean_error"):
                v = band[key].astype(float)
                parts.append(f"{key} {v.mean():.4f} ± {v.std(ddof=1) / np.sqrt(n):.4f}")
            lines.append(f"{name:>6} vs {column:>9}: " + ", ".join(parts))
    check = max(r["fits"][f]["weights_check_max_abs"] for r in records for f in CONTROLS)
    lines.append(f"aggregation weights check (max |formula - aggregate| over seeds): {check:.2e}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--scale", choices=("quick", "demo"), default="quick")
    parser.add_argument("--out", default="/tmp/lab-aggregate-coverage",
                        help="lab runs go to OUT/seed{s} (checkpoints: keep it out of the repo)")
    parser.add_argument("--results", default="benchmarks/results/lab_aggregate_coverage")
    parser.add_argument("--draws", type=int, default=999, help="bootstrap draws per fit")
    parser.add_argument("--summarise", action="store_true", help="only print the table")
    args = parser.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    results = Path(args.results)
    if args.summarise:
        records = load_records(results, args.scale, seeds)
    else:
        records = run_seeds(
            lambda seed: one_seed(Path(args.out) / args.scale, seed, args.scale, args.draws),
            results, args.scale, seeds, header=f", {args.draws} draws")
    if len(records) >= 2:
        print(summarise(records))


if __name__ == "__main__":
    main()
