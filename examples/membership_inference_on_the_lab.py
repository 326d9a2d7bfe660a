"""
Do membership-inference attacks measure memorisation? The attacks against the lab's truth
=======================================================================================

Membership-inference attacks (the loss, Min-K%, Min-K%++, the zlib ratio, the ratio to a
reference model) call an instance a member of the training set when the model scores it
well. The lab knows what training on each instance changed (its counterfactual runs), so
each attack can be judged against that truth. This example trains two lab runs at the quick
scale on a corpus of two domains, the second harder to predict:

* ``no shift``: validation instances drawn from the domains as the training ones are;
* ``shift``: every validation instance from the harder domain, so members score better than
  non-members even where the model never saw them: a distribution shift, the bias MIMIR
  (Duan et al. 2024) finds between Pythia's members and non-members.

For each score it prints the membership AUC at the last checkpoint and before any analysed
instance was trained (where the truth is zero), the rank correlation of each instance's
score gap with its own counterfactual effect, and the error of the score's implied profile
beside DiD's (:func:`didmem.lab.membership_comparison`). Run::

    python examples/membership_inference_on_the_lab.py --out lab-mia

It trains both runs at the quick scale (about a minute each on this project's 2-core
machine) and writes ``membership.csv`` into ``--out``; ``benchmarks/mia_lab.py`` repeats it at
the demo scale over seeds (``docs/membership.rst`` has the table).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from didmem import lab

RUNS = {"no shift": {"validation_mix": None}, "shift": {"validation_mix": 0.0}}
COLUMNS = ["score", "auc", "auc_untrained", "spearman", "mia_bias", "did_never_bias",
           "did_trained_bias"]


def main() -> None:
    parser = argparse.ArgumentParser(description="MIA scores against the lab's truth")
    parser.add_argument("--out", type=Path, default=Path("lab-mia"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tables = []
    for name, change in RUNS.items():
        run = lab.run(args.out / name.replace(" ", "_"), quick=True, seed=args.seed,
                      metrics=lab.MIA_SCORES, n_domains=2, **change)
        table = lab.membership_comparison(run).assign(run=name)
        tables.append(table)
        print(f"\n{name}:")
        print(table[COLUMNS].round(3).to_string(index=False))
    both = pd.concat(tables, ignore_index=True)
    both.to_csv(args.out / "membership.csv", index=False)
    untrained = both.pivot(index="score", columns="run", values="auc_untrained")
    print("\nAUC before any analysed instance was trained (truth: no memorisation):")
    print(untrained.round(3).to_string())


if __name__ == "__main__":
    main()
