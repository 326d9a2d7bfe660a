"""Influence estimates against exact leave-one-out retraining on a tiny MLP language model.

Prints, for each solver and approximation, the correlation with the exact effects, the
largest absolute difference, the means and the time; then EK-FAC (``solver="ekfac"``, needs
kronfluence) on a tiny LM with one hidden Linear, beside the exact solve over all parameters
and over the same module. Results: RESULTS.md.

    python benchmarks/bench_influence_loo.py
"""

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _tiny_lm import TinyLM, TinyMLPLM, corpus, loo_effects, train

from didmem import InfluenceEstimator, TrainedModel

WD = 1e-2


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seqs = corpus(32, 8)
    t0 = time.perf_counter()
    model = train(TinyLM(), seqs, WD)
    print(f"train: {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    exact = loo_effects(model, seqs, WD, range(len(seqs)))
    print(f"exact leave-one-out ({len(seqs)} retrains): {time.perf_counter() - t0:.1f} s; "
          f"mean effect {exact.mean():.4f}")
    print("solver  approximation   corr  max|diff|   mean  seconds")
    for solver in ("direct", "cg", "lissa"):
        for approx in ("linear", "shifted"):
            t0 = time.perf_counter()
            res = InfluenceEstimator(weight_decay=WD, solver=solver, approximation=approx,
                                     max_iter=200, lissa_scale=20.0).fit(TrainedModel(model, seqs))
            est = res.unit_frame()["estimate"].to_numpy()
            print(f"{solver:7s} {approx:13s} {np.corrcoef(est, exact)[0, 1]:6.3f} "
                  f"{np.abs(est - exact).max():9.4f} {est.mean():7.4f} "
                  f"{time.perf_counter() - t0:7.1f}")
    ekfac(seqs)


def ekfac(seqs):
    try:
        import kronfluence  # noqa: F401
    except ImportError:
        print("EK-FAC: kronfluence is not installed (pip install 'didmem[ekfac]'); skipped")
        return
    torch.manual_seed(0)
    model = train(TinyMLPLM(), seqs, WD)
    exact = loo_effects(model, seqs, WD, range(len(seqs)))
    print(f"\nTinyMLPLM (tracked by EK-FAC: fc; output embedding out excluded); "
          f"mean exact effect {exact.mean():.4f}")
    print("solver  tracked          corr  max|diff|   mean  seconds")
    for solver, include, label in (("direct", (), "all"), ("direct", ("fc",), "fc"),
                                   ("ekfac", (), "fc (EK-FAC)")):
        t0 = time.perf_counter()
        res = InfluenceEstimator(weight_decay=WD, solver=solver, include=include,
                                 seed=0).fit(TrainedModel(model, seqs))
        est = res.unit_frame()["estimate"].to_numpy()
        print(f"{solver:7s} {label:13s} {np.corrcoef(est, exact)[0, 1]:6.3f} "
              f"{np.abs(est - exact).max():9.4f} {est.mean():7.4f} "
              f"{time.perf_counter() - t0:7.1f}")


if __name__ == "__main__":
    main()
