"""Does a 16-per-cohort lab pilot predict the power of the lab's default (quick-scale) run?

Pilot: one quick-scale lab run (``didmem.lab.run(quick=True)``) with ``n_analysed=16``
instances per cohort; ``power_analysis`` (simulated, the pilot's own instantaneous estimates as
the effect, and separately the pilot's exact instantaneous truth as a stated effect) plans
the quick default design (read from ``quick_config()``). Monte Carlo: the quick default run
at ``--reps`` other seeds, each fitted with the default ``DiDEstimator``; its power is the
share of cohorts whose instantaneous effect is significant under the band of
``aggregate("instantaneous")``, averaged over seeds (each seed is a new language, corpus and
model, so this is power averaged over lab worlds).

Usage::

    python benchmarks/planning_lab.py --reps 8 --out /tmp/planning-lab   # a few minutes
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

import didmem
from didmem.errors import DidmemWarning
from didmem.lab import quick_config, run

METRIC = "mean_token_loglik"


def lab_panel(out, seed, **changes):
    lab = run(Path(out) / f"seed{seed}-{'-'.join(f'{k}{v}' for k, v in changes.items())}",
              config=quick_config(seed=seed, **changes))  # reuses a finished run
    panel = didmem.Panel(lab.panel, unit="unit", time="time", cohort="cohort", outcome=METRIC)
    truth = lab.truth[(lab.truth["metric"] == METRIC) & (lab.truth["time"] == lab.truth["cohort"])]
    return panel, float(truth["tau"].mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--sims", type=int, default=200)
    ap.add_argument("--out", default="planning-lab-runs")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    default = quick_config()
    pilot, pilot_truth = lab_panel(args.out, 0, n_analysed=16)
    kw = dict(units_per_cohort=default.n_analysed, n_validation=default.n_validation,
              n_simulations=args.sims, seed=0)
    own = didmem.power_analysis(pilot, **kw).to_frame()
    stated = didmem.power_analysis(pilot, effect=pilot_truth, **kw).to_frame()
    shares, truths = [], []
    for seed in range(1, args.reps + 1):
        panel, tau = lab_panel(args.out, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DidmemWarning)
            res = didmem.DiDEstimator(seed=seed).fit(panel)
            shares.append(res.aggregate("instantaneous").to_frame()["significant"].mean())
        truths.append(tau)
    shares = np.array(shares)
    at_mean = didmem.power_analysis(pilot, effect=float(np.mean(truths)), **kw).to_frame()
    print(f"pilot (16 per cohort, seed 0): own instantaneous effect {own['effect'][0]:.4f}, "
          f"exact truth {pilot_truth:.4f}")
    print(f"planned power of the quick default ({default.n_analysed} per cohort, "
          f"{default.n_validation} validation): pilot's own effect {own['power'][0]:.3f} "
          f"(MC error {own['power_mc_error'][0]:.3f}), exact truth {stated['power'][0]:.3f} "
          f"(MC error {stated['power_mc_error'][0]:.3f}); {args.sims} simulations")
    print(f"planned at the seeds' mean exact truth {np.mean(truths):.4f} (known from the lab's exact runs, "
          f"not to a user): {at_mean['power'][0]:.3f} (MC error {at_mean['power_mc_error'][0]:.3f})")
    print(f"Monte Carlo power of the default run over {args.reps} seeds: {shares.mean():.3f} "
          f"(MC error {shares.std(ddof=1) / np.sqrt(shares.size):.3f}); mean exact truth "
          f"{np.mean(truths):.4f}; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
