"""The ``didmem`` command line.

``didmem demo`` runs the main job on the embedded default and prints where its outputs are.
User errors (a missing file, an unknown column, an invalid option) exit with status 2 and a
one-line reason, without a stack trace.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from .errors import DidmemError

__all__ = ["main"]


def _demo(args) -> int:
    import didmem
    from didmem.lab import run

    t0 = time.perf_counter()
    out = Path(args.out)
    metric = "mean_token_loglik"
    print(f"didmem demo: training a tiny language model and its counterfactual twin in {out / 'lab'}"
          + (" (quick scale)" if args.quick else "") + " ...", flush=True)
    lab = run(out / "lab", quick=args.quick, seed=args.seed, overwrite=args.overwrite)
    panel = didmem.Panel(lab.panel, unit="unit", time="time", cohort="cohort", outcome=metric)
    res = didmem.DiDEstimator(n_bootstrap=args.draws, random_state=args.seed).fit(panel)
    truth = lab.truth[lab.truth["metric"] == metric][["cohort", "time", "tau"]]
    frame = res.to_frame().merge(truth, on=["cohort", "time"], how="left")
    cells_path = out / "cells.csv"
    frame.to_csv(cells_path, index=False)
    inst = res.aggregate("instantaneous").to_frame()
    true_inst = truth[truth["cohort"] == truth["time"]].set_index("cohort")["tau"]
    inst["true_tau"] = true_inst.reindex(inst["cohort"]).to_numpy()
    inst_path = out / "instantaneous.csv"
    inst.to_csv(inst_path, index=False)
    post = frame[frame["post"]]
    rmse = float(np.sqrt(np.mean((post["estimate"] - post["tau"]) ** 2)))
    covered = (post["ci_lower"] <= post["tau"]) & (post["tau"] <= post["ci_upper"])
    print(f"\n{panel!r}")
    print(res.summary())
    print(f"\nsignificant post-treatment cells: {int(post['significant'].sum())} of {len(post)}")
    print(f"instantaneous memorisation of {metric} by cohort (treatment step), with the truth "
          "from the twin:")
    print(inst.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"truth vs estimate: RMSE {rmse:.4f} over {len(post)} post-treatment cells; the band "
          f"covers the twin's truth in {int(covered.sum())} of them")
    print(f"\nwrote {cells_path} and {inst_path} ({time.perf_counter() - t0:.1f} s)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="didmem",
        description="Causal memorisation profiles of language models by difference-in-differences.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="the main job on the embedded default: lab model, twin truth, DiD profile",
        description="Train a tiny language model on a generated corpus together with its "
                    "counterfactual twin (the memorisation lab), score every checkpoint, "
                    "estimate the memorisation profile with a simultaneous bootstrap band, "
                    "print the summary and the truth-vs-estimate error, and write the tables "
                    "to --out. Needs the 'lm' extra (torch, transformers).",
    )
    demo.add_argument("--out", default="didmem-demo", help="output directory (default: %(default)s)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    demo.add_argument("--draws", type=int, default=1000, help="bootstrap draws (default: %(default)s)")
    demo.add_argument("--quick", action="store_true", help="the lab's quick scale (seconds)")
    demo.add_argument("--overwrite", action="store_true",
                      help="replace a different lab run found in --out")
    demo.set_defaults(func=_demo)

    from .lab import cli_args

    lab = sub.add_parser("lab", help=cli_args.HELP, description=cli_args.DESCRIPTION)
    cli_args.add_arguments(lab)
    lab.set_defaults(func=cli_args.main_from_args)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (DidmemError, FileNotFoundError, KeyError) as exc:
        print(f"didmem {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
