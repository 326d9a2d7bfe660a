"""Replicated lab runs: each estimator's error against the exact truth, per condition.

Usage::

    python benchmarks/lab_replication.py --seeds 10 --out /tmp/lab-replication \
        [--conditions same mix_even mix shift] [--csv benchmarks/results/lab_replication.csv]

For each condition it calls :func:`didmem.lab.replicate` at the quick scale (seeds
``0 .. seeds-1``; runs already complete in ``--out`` are loaded, not retrained) and prints, per
estimator, the mean error over runs with its Monte Carlo standard error, ``t = mean / MC se``,
the RMSE, the mean correlation with the exact truth and the coverage of the simultaneous
band (share of cells, and share of runs whose band covers every cell), over the
post-treatment cells of ``mean_token_loglik``.

Conditions:

* ``same``: one domain, validation from the training distribution;
* ``mix_even``: two domains, validation with the training composition (half each);
* ``mix``: two domains, validation 90% from the first (training: half each);
* ``shift``: one domain, ``validation_shift=0.5`` (a shift that bends trends).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import pandas as pd

CONDITIONS = {
    "same": {},
    "mix_even": {"n_domains": 2, "validation_mix": 0.5},
    "mix": {"n_domains": 2, "validation_mix": 0.9},
    "shift": {"validation_shift": 0.5},
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", default="lab-replication")
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS),
                        choices=list(CONDITIONS))
    parser.add_argument("--draws", type=int, default=499, help="bootstrap draws per fit")
    parser.add_argument("--csv", default=None, help="write every summary row to this CSV")
    args = parser.parse_args(argv)

    from didmem.lab import quick_config, replicate
    from didmem.lab.replication import default_estimators

    pd.set_option("display.width", 160)
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}; "
          f"{args.seeds} seeds per condition, quick scale, {args.draws} bootstrap draws")
    rows = []
    for name in args.conditions:
        changes = dict(CONDITIONS[name], metrics=("mean_token_loglik",))
        cfg = quick_config(**changes)
        clock = time.perf_counter()
        rep = replicate(Path(args.out) / name, n_seeds=args.seeds, config=cfg,
                        estimators=default_estimators(cfg, n_bootstrap=args.draws))
        print(f"\n== {name} {CONDITIONS[name]} ({time.perf_counter() - clock:.0f} s)")
        print(rep.to_text())
        rows.append(rep.summary.assign(condition=name))
    if args.csv:
        table = pd.concat(rows, ignore_index=True)
        table.to_csv(args.csv, index=False, float_format="%.6g")
        print(f"\nwrote {args.csv}")


if __name__ == "__main__":
    main()
