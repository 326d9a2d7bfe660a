"""
Every memorisation estimator against the lab's truth
====================================================

Every memorisation estimator on a lab run, scored against the run's known truth.

Trains two quick lab runs (tiny GPT-NeoX models on this CPU, each with one counterfactual run
per cohort that gives the exact truth tau(g, c)): one with validation data from the training
distribution, and one whose validation data are shifted (``validation_shift=0.5``). For
mean errors with Monte Carlo errors over many runs, see ``benchmarks/lab_replication.py``
and ``didmem.lab.replicate``. On each it fits

* ``DiDEstimator`` and ``DifferenceEstimator`` on the main model's panel,
* ``TWFEEstimator`` (event-study regression with unit and time fixed effects),
* ``ArchitecturalEstimator`` on four subset models and their membership matrix,
* ``InfluenceEstimator`` on the final checkpoint (residual cells (g, T) only; a few
  instances per cohort and the last layer's MLP, to stay within the time budget),
* ``ExtractableEstimator`` on the 0/1 ``extractable`` metric (its own table, against the
  truth of that metric),

and prints :func:`didmem.compare` tables (bias, RMSE, correlation and coverage over the
post-treatment cells). Run::

    python examples/compare_estimators.py --out lab-compare --figure compare.png

On this project's 2-core machine it took 42 s (21 s at a lower load; 2026-11-22,
benchmarks/RESULTS.md); a first-time user measured 4 minutes (issue 40): it trains lab
models, so its time varies with the machine and its load.

One run is one draw of each estimator's error. With ``--replicate N`` the example instead
runs the lab over ``N`` seeds per condition (same distribution; two domains with
validation drawn 90% from the first; the bent ``validation_shift=0.5``) and prints, per
estimator, the mean error with its Monte Carlo standard error, the RMSE, the correlation
and the band's coverage (:func:`didmem.lab.replicate`; 6 s per run on this project's machine, 2026-11-22)::

    python examples/compare_estimators.py --out lab-compare --replicate 10
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

import didmem
from didmem import lab

METRIC = "mean_token_loglik"


def influence_on_lab(run, per_cohort: int = 3, seed: int = 0):
    """Influence estimates at the final checkpoint for a few analysed instances per cohort."""
    import torch

    torch.set_num_threads(1)
    out = Path(run.out_dir)
    tokens = np.stack(pd.read_parquet(out / "instances.parquet")["tokens"].to_numpy())
    order = pd.read_parquet(out / "data_order.parquet")["instance"].to_numpy()
    sample = pd.read_parquet(out / "sample.parquet")
    analysed = sample[sample["role"] == "analysed"]
    pick = analysed.groupby("cohort").sample(per_cohort, random_state=seed)
    last = max(run.config.checkpoints)
    est = didmem.InfluenceEstimator(damping=0.1, max_iter=20, include=("layers.1.mlp",),
                                    hessian_sample=96, seed=seed)
    return est.fit(didmem.TrainedModel(
        run.checkpoint_dir / f"step{last}", tokens[order], tokens[pick["unit"].to_numpy()],
        units=pick["unit"].to_numpy(), cohorts=pick["cohort"].to_numpy(), time=last))


def all_estimators(run, with_influence: bool = True) -> dict:
    panel = didmem.Panel(run.panel, unit="unit", time="time", cohort="cohort",
                         outcome=[METRIC, "extractable"])
    results = {
        "did": didmem.DiDEstimator(n_bootstrap=499, seed=0, outcome=METRIC).fit(panel),
        "difference": didmem.DifferenceEstimator(n_bootstrap=499, seed=0,
                                                 outcome=METRIC).fit(panel),
        "twfe": didmem.TWFEEstimator(outcome=METRIC).fit(panel),
    }
    out = Path(run.out_dir)
    if (out / "membership.parquet").exists():
        results["architectural"] = didmem.ArchitecturalEstimator(outcome=METRIC).fit(
            didmem.SubsetModels(pd.read_parquet(out / "subset_scores.parquet"),
                                pd.read_parquet(out / "membership.parquet")))
    if with_influence:
        results["influence"] = influence_on_lab(run)
    extractable = {
        "extractable": didmem.ExtractableEstimator().fit(panel),
        "did": didmem.DiDEstimator(n_bootstrap=499, seed=0,
                                   outcome="extractable").fit(panel),
    }
    return results, extractable


REPLICATED = {
    "same distribution": {},
    "composition shift (two domains, validation_mix=0.9)": {"n_domains": 2,
                                                            "validation_mix": 0.9},
    "bent shift (validation_shift=0.5)": {"validation_shift": 0.5},
}


def replicated(out: Path, n_seeds: int) -> None:
    """DiD, difference (and DiD with the domain covariate) over seeds, per condition."""
    for i, (label, changes) in enumerate(REPLICATED.items()):
        config = lab.quick_config(metrics=(METRIC,), **changes)
        rep = lab.replicate(out / f"replicate{i}", n_seeds=n_seeds, config=config)
        print(f"\n== {label}\n{rep.to_text()}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="lab-compare", help="directory for the lab runs")
    parser.add_argument("--figure", default=None, help="save the estimates-vs-truth figure")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replicate", type=int, default=0, metavar="N",
                        help="instead, run N seeds per condition and print mean errors with "
                             "their Monte Carlo errors")
    args = parser.parse_args(argv)
    pd.set_option("display.width", 120)
    pd.set_option("display.precision", 3)
    if args.replicate:
        return replicated(Path(args.out), args.replicate)
    clock = time.perf_counter()
    common = {"quick": True, "seed": args.seed, "metrics": (METRIC, "extractable"),
              "extractable_suffix": 2}
    runs = {
        "same distribution": lab.run(Path(args.out) / "plain", n_subset_models=4, **common),
        "shifted validation (0.5)": lab.run(Path(args.out) / "shifted", validation_shift=0.5,
                                            **common),
    }
    print(f"lab runs: {time.perf_counter() - clock:.1f} s")
    first = None
    for label, run in runs.items():
        results, extractable = all_estimators(run, with_influence=label == "same distribution")
        first = first or (results, run)
        print(f"\n== {label}: {METRIC}, post-treatment cells against the exact truth")
        print(didmem.compare(results, truth=run.truth, metric=METRIC).to_string(index=False))
        if "influence" in results:
            print("   (influence: residual cells (g, T) only)")
        print(f"-- {label}: the 0/1 'extractable' outcome (l = 2) against its truth")
        print(didmem.compare(extractable, truth=run.truth, metric="extractable")
              .to_string(index=False))
        rate = extractable["extractable"].extra["never_treated_rate"]
        print(f"   share of validation instances extractable: {rate:.3f} "
              "(the assumption Y_c(x; inf) = 0 says 0)")
    print(f"\ntotal: {time.perf_counter() - clock:.1f} s")
    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        results, run = first
        fig, _ = didmem.plot_comparison(results, truth=run.truth, metric=METRIC)
        fig.savefig(args.figure, dpi=110)
        print(f"figure: {args.figure}")


if __name__ == "__main__":
    main()
