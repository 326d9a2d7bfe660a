"""
Architectural versus model memorisation
=======================================

Memorisation of a model (DiD) versus memorisation of an architecture (subset models).

The architectural estimator (Zhang et al. 2023) trains many models, each on a random half of
the analysed instances, and compares each instance's score in the models that saw it (IN)
with those that did not (OUT). Its estimand is the memorisation of the *training algorithm*,
averaged over initialisations and data subsets. Difference-in-differences estimates the
memorisation of *the one model* whose checkpoints we have. A quick lab run has both, and the
exact counterfactual runs of the main model give that model's truth, so we can see how far
apart they are:

* per cohort, both against the main model's truth tau(g, c);
* per instance, the architectural estimate against the main model's true instance effect
  (from the exact runs): how well does the architecture's memorisation of x predict what this
  model memorised of x?

Run::

    python examples/architectural_vs_did.py --out lab-arch --models 6
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="lab-arch")
    parser.add_argument("--models", type=int, default=6, help="subset models (even)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    pd.set_option("display.precision", 3)
    clock = time.perf_counter()
    run = lab.run(args.out, quick=True, seed=args.seed, n_subset_models=args.models)
    print(f"lab run with {args.models} subset models: {time.perf_counter() - clock:.1f} s")
    out = Path(run.out_dir)
    panel = didmem.Panel(run.panel, unit="unit", time="time", cohort="cohort", outcome=METRIC)
    did = didmem.DiDEstimator(n_bootstrap=499, seed=0).fit(panel)
    arch = didmem.ArchitecturalEstimator(outcome=METRIC).fit(
        didmem.SubsetModels(pd.read_parquet(out / "subset_scores.parquet"),
                            pd.read_parquet(out / "membership.parquet")))
    results = {"did (this model)": did, "architectural (algorithm)": arch}

    print("\nPost-treatment cells against the main model's truth:")
    print(didmem.compare(results, truth=run.truth, metric=METRIC).to_string(index=False))
    print("\nAgreement between the two (no truth):")
    print(didmem.compare(results).to_string(index=False))

    truth = run.truth[run.truth["metric"] == METRIC]
    inst = truth[truth["time"] == truth["cohort"]][["cohort", "tau"]]
    a = arch.to_frame()
    d = did.to_frame()
    side = inst.merge(a[a["time"] == a["cohort"]][["cohort", "estimate"]], on="cohort")
    side = side.rename(columns={"tau": "truth", "estimate": "architectural"})
    side = side.merge(d[d["time"] == d["cohort"]][["cohort", "estimate"]], on="cohort")
    print("\nInstantaneous cells tau(g, g):")
    print(side.rename(columns={"estimate": "did"}).to_string(index=False))

    units = pd.read_parquet(out / "truth_units.parquet")
    units = units[(units["metric"] == METRIC) & (units["time"] == units["cohort"])]
    per = arch.unit_frame()
    per = per[per["time"] == per["cohort"]].merge(units[["unit", "effect"]], on="unit")
    r = np.corrcoef(per["estimate"], per["effect"])[0, 1]
    print(f"\nPer instance at c = g ({len(per)} instances): corr(architectural, this model's "
          f"true effect) = {r:.2f}; median Welch SE of an instance = "
          f"{per['std_error'].median():.3f} with {args.models // 2} models per side")
    print(f"total: {time.perf_counter() - clock:.1f} s")


if __name__ == "__main__":
    main()
