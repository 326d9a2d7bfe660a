"""Membership-inference scores against the lab's truth, with and without a distribution shift.

Usage::

    nice -n 15 python benchmarks/mia_lab.py --seeds 0 1 2 --out /tmp/mia-lab \
        --json benchmarks/results/mia_lab.json

For each seed, two lab runs at the demo scale on a corpus of two domains (the second
harder to predict, ``domain_contrast`` 0.9), scored with every MIA metric
(``mean_token_loglik`` = the loss attack, ``min_k_logprob``, ``min_k_plus_plus``,
``zlib_ratio``, ``reference_ratio`` against the twin's last checkpoint):

* ``no shift``: validation instances drawn from the domains like the training ones
  (``validation_mix=None``), so members and non-members differ only by training;
* ``shift``: every validation instance from the harder domain (``validation_mix=0``), the
  training ones half from each: a distribution shift between the splits, as MIMIR finds
  between Pythia's members and non-members.

Each run is judged by :func:`didmem.lab.membership_comparison` (AUCs with DeLong intervals
at the last checkpoint and before any analysed instance was trained, Spearman of each
instance's score gap with its counterfactual effect, the implied profile's error beside
DiD's). The table gives the mean over seeds with the spread (sd, min, max); each run's wall
and CPU time (of this process: the lab trains and scores on one torch thread, so its CPU time
is about its wall time on an idle core) are recorded (runs complete in ``--out`` are loaded,
not retrained, and say so).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _provenance import provenance

SCENARIOS = {"no shift": {"validation_mix": None}, "shift": {"validation_mix": 0.0}}
SHOW = ["auc", "auc_untrained", "spearman", "mia_bias", "mia_pre_gap", "did_never_bias",
        "did_nyt_bias", "did_trained_bias"]


def one_run(out_dir: Path, seed: int, scenario: str, quick: bool):
    from didmem.lab import MIA_SCORES, run
    from didmem.lab.membership import membership_comparison

    start, cpu = time.perf_counter(), time.process_time()
    result = run(out_dir / f"{scenario.replace(' ', '_')}_seed{seed}", quick=quick, seed=seed,
                 metrics=MIA_SCORES, n_domains=2, **SCENARIOS[scenario])
    table = membership_comparison(result)
    seconds = (time.perf_counter() - start, time.process_time() - cpu)
    return table.assign(seed=seed, scenario=scenario), seconds, result.reused


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean, sd, min and max over seeds of each column of :data:`SHOW`."""
    grouped = frame.groupby(["scenario", "score"], sort=False)[SHOW]
    return grouped.agg(["mean", "std", "min", "max"])


def markdown(summary: pd.DataFrame, n_seeds: int) -> str:
    lines = ["| scenario | score | " + " | ".join(SHOW) + " |",
             "|---|---|" + "---|" * len(SHOW)]
    for (scenario, score), row in summary.iterrows():
        cells = [f"{row[(c, 'mean')]:.3f} ± {row[(c, 'std')]:.3f}" for c in SHOW]
        lines.append(f"| {scenario} | {score} | " + " | ".join(cells) + " |")
    lines.append(f"\nmean ± sd over {n_seeds} seeds")
    return "\n".join(lines)


def rst_table(frame: pd.DataFrame) -> str:
    """The table of ``docs/membership.rst``: mean ± sd over seeds, [min, max] below."""
    summary = summarise(frame)
    header = ["scenario", "score"] + SHOW
    lines = [".. list-table::", "   :header-rows: 1", ""]
    lines.append("   * - " + "\n     - ".join(header))
    for (scenario, score), row in summary.iterrows():
        cells = [scenario, f"``{score}``"] + [
            f"{row[(c, 'mean')]:.3f} ± {row[(c, 'std')]:.3f} "
            f"[{row[(c, 'min')]:.2f}, {row[(c, 'max')]:.2f}]" for c in SHOW]
        lines.append("   * - " + "\n     - ".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("/tmp/mia-lab"))
    parser.add_argument("--quick", action="store_true", help="the quick scale (tests)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--rst-from", type=Path, default=None,
                        help="print the docs' table from a saved --json result and stop")
    args = parser.parse_args()
    if args.rst_from is not None:
        saved = json.loads(args.rst_from.read_text())
        print(rst_table(pd.DataFrame(saved["runs"])))
        return
    tables, timings = [], []
    for seed in args.seeds:
        for scenario in SCENARIOS:
            table, seconds, reused = one_run(args.out, seed, scenario, args.quick)
            tables.append(table)
            timings.append({"seed": seed, "scenario": scenario, "seconds": seconds[0],
                            "cpu_seconds": seconds[1], "reused": reused,
                            "load": os.getloadavg()})
            print(f"seed {seed} {scenario}: {seconds[0]:.0f} s wall, {seconds[1]:.0f} s CPU"
                  + (" (loaded)" if reused else "")
                  + f", load {os.getloadavg()[0]:.2f}", flush=True)
    frame = pd.concat(tables, ignore_index=True)
    summary = summarise(frame)
    print(markdown(summary, len(args.seeds)))
    if args.json is not None:
        args.json.write_text(json.dumps({
            "provenance": provenance(), "scale": "quick" if args.quick else "demo",
            "seeds": args.seeds, "timings": timings,
            "runs": frame.replace({np.nan: None}).to_dict(orient="records"),
            "markdown": markdown(summary, len(args.seeds)),
        }, indent=1))


if __name__ == "__main__":
    main()
