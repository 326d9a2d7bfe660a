"""``didmem demo``: the main job on the embedded default, with the exact truth beside it."""

from __future__ import annotations

import time
from pathlib import Path

from ._options import bootstrap_option, progress_option, seed_option, use_agg_backend

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "the main job on the embedded default: lab model, exact truth, DiD profile"
DESCRIPTION = (
    "Train a tiny language model on a generated corpus together with its counterfactual runs "
    "(the memorisation lab), score every checkpoint, estimate the memorisation profile with a "
    "simultaneous bootstrap band, print the summary and the truth-vs-estimate error, and write "
    "the tables to --out with the figures (profile.png, instantaneous.png, persistent.png), "
    "results.parquet and report.html. Needs the 'lm' and 'plot' extras."
)


def add_arguments(parser) -> None:
    """Add the ``didmem demo`` options to ``parser``."""
    parser.add_argument("--out", default="didmem-demo",
                        help="output directory (default: %(default)s)")
    seed_option(parser)
    bootstrap_option(parser)
    parser.add_argument("--quick", action="store_true", help="the lab's quick scale (seconds)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a different lab run found in --out")
    progress_option(parser)


def run(args) -> int:
    """Run ``didmem demo`` with parsed arguments; return the exit status."""
    import didmem
    from didmem.lab import run as run_lab
    from didmem.results._truth import cells_with_truth, score_cells, true_aggregate

    t0 = time.perf_counter()
    out = Path(args.out)
    metric = "mean_token_loglik"
    print(f"didmem demo: a tiny language model and its counterfactual runs in {out / 'lab'}"
          + (" (quick scale)" if args.quick else "") + "; --progress shows the stage ...",
          flush=True)
    lab = run_lab(out / "lab", quick=args.quick, seed=args.seed, overwrite=args.overwrite,
                  progress=args.progress)
    print("  reused the finished run found there (--overwrite trains again)" if lab.reused else
          f"  trained and scored in {time.perf_counter() - t0:.1f} s", flush=True)
    print("estimating the profile ...", flush=True)
    panel = didmem.Panel(lab.panel, unit="unit", time="time", cohort="cohort", outcome=metric)
    res = didmem.DiDEstimator(n_bootstrap=args.n_bootstrap, seed=args.seed).fit(panel)
    frame = cells_with_truth(res, lab.truth)  # the truth of the metric and exposure fitted
    cells_path = out / "cells.csv"
    frame.to_csv(cells_path, index=False)
    inst = res.aggregate("instantaneous").to_frame()
    inst["true_tau"] = true_aggregate(frame, "instantaneous", "cohort").reindex(
        inst["cohort"]).to_numpy()
    inst_path = out / "instantaneous.csv"
    inst.to_csv(inst_path, index=False)
    post = frame[frame["post"]]
    score = score_cells(post)
    print(f"\n{panel!r}")
    print(res.summary())
    print(f"\nsignificant post-treatment cells: {int(post['significant'].sum())} of {len(post)}")
    print(f"instantaneous memorisation of {metric} by cohort (treatment step), with the truth "
          "from the exact counterfactual runs:")
    inst["cohort"] = [f"{g:g}" for g in inst["cohort"]]  # training steps, not decimals
    print(inst.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"truth vs estimate: RMSE {score.rmse:.4f} over {score.n_cells} post-treatment "
          f"cells; the band covers the exact truth in {score.covered} of them")
    print("\nwriting the results file, the figures and the report ...", flush=True)
    written = [cells_path, inst_path, res.save(out / "results.parquet")]
    written += _figures(res, lab.config, out, lab.truth)
    print("\nwrote:\n" + "\n".join(f"  {p}" for p in written))
    print(f"open {written[-1]} in a browser to see the report ({time.perf_counter() - t0:.1f} s)")
    return 0


def _figures(res, config, out: Path, truth) -> list:
    """The profile, instantaneous (beside the learning rate) and persistent PNGs + report."""
    import numpy as np
    import pandas as pd

    from .. import plotting
    from ..lab.trainer import learning_rate
    from ..report import write_report

    use_agg_backend()
    import matplotlib.pyplot as plt

    steps = np.arange(1, config.n_steps + 1)
    schedule = pd.Series([learning_rate(int(s), config) for s in steps], index=steps)
    paths = []
    for name, options in (("profile", {}), ("instantaneous", {"lr_schedule": schedule}),
                          ("persistent", {})):
        ax = plotting.PLOTS[name](res, **options)
        path = out / f"{name}.png"
        ax.figure.savefig(path, dpi=110)
        plt.close(ax.figure)
        paths.append(path)
    paths.append(write_report({"lab model (demo)": res}, out / "report.html",
                              title="didmem demo: memorisation profile of the lab model",
                              figure_options={"instantaneous": {"lr_schedule": schedule}},
                              truth=truth))
    return paths
