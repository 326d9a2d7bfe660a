"""Write lab_event_study.json: a memorisation event study of the lab, for the sensitivity checks.

Usage (from the repository root, with didmem installed with its ``lm`` extra):
    python tests/data/make_lab_event_study.py [lab_dir]
Trains (or loads, when ``lab_dir`` holds the same run) the lab at the demo scale with seed 0
(``didmem.lab.run(lab_dir, seed=0)``), fits ``DiDEstimator(base_period="universal",
n_bootstrap=0)`` on ``mean_token_loglik`` and writes the dynamic aggregation's estimates and
analytic covariance (reference period left out), event times in checkpoint periods. The lab's
numbers depend on the CPU's float kernels, so the file, not the command, is the checks' input.
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

import didmem
from didmem import lab

HERE = Path(__file__).resolve().parent


def main(lab_dir=None):
    lab_dir = Path(lab_dir) if lab_dir else Path(tempfile.mkdtemp()) / "lab"
    run = lab.run(lab_dir, seed=0)
    panel = didmem.Panel(run.panel, unit="unit", time="time", cohort="cohort",
                         outcome="mean_token_loglik")
    ev = didmem.DiDEstimator(base_period="universal", n_bootstrap=0).fit(panel) \
        .aggregate("dynamic")
    step = float(run.config.checkpoint_every)
    keep = ev.keys != -step
    import torch

    out = {"source": "didmem lab, demo scale, seed 0: DiDEstimator(base_period='universal', "
                     "n_bootstrap=0) on mean_token_loglik, aggregate('dynamic'), vcov()",
           "command": "python tests/data/make_lab_event_study.py",
           "didmem": didmem.__version__, "torch": torch.__version__,
           "machine": f"{platform.machine()} {platform.processor()}".strip(),
           "event_times": (ev.keys[keep] / step).tolist(),
           "beta": np.asarray(ev.estimates)[keep].tolist(),
           "sigma": ev.vcov().to_numpy()[np.ix_(keep, keep)].tolist(),
           "n_pre": int((ev.keys < -step).sum())}
    (HERE / "lab_event_study.json").write_text(json.dumps(out, indent=1))
    print(f"n_pre {out['n_pre']}, n_post {len(out['beta']) - out['n_pre']}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
