"""Issue 37 item 4: moments of a binary panel of ~146M sequences x 7 checkpoints from lists of
memorised sequence indices, as EleutherAI's pythia-memorized-evals lays them out (one file
per model and checkpoint, columns ``index`` and ``tokens``), without writing the panel.

* ``generate DIR``: 7 parquet files ``memorized-evals-step{STEP}.parquet`` for a Pythia-like
  run of 143,000 steps x 1,024 sequences (146,432,000 sequences); at a checkpoint, a
  sequence is memorised with probability 0.5% before it is trained on, 1.5% after (a little
  more for the later cohorts' recent exposure). ``tokens`` holds 32 token ids per row (the
  extraction's continuation; not read by the fit).
* ``fit DIR``: the training order's cohort of every sequence (Pythia's: sequence ``i`` is in
  batch ``i // 1024``, trained at that step; its cohort is the first checkpoint after it;
  sequences trained after the last checkpoint are never treated within the panel), the
  memorised indices of every file's ``index`` column, the per-cohort pattern counts and
  moments (:func:`didmem.inference.moments.memorised_moments`), and every cell with its
  standard error. One JSON line: wall, CPU and peak memory, machine load.

Example (data under /tmp, never committed)::

    nice -n 15 python benchmarks/memorised_scale.py generate /tmp/memorised
    nice -n 15 python benchmarks/memorised_scale.py fit /tmp/memorised
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

BATCH, STEPS = 1024, 143_000
CHECKPOINTS = np.array([23_000, 43_000, 63_000, 83_000, 103_000, 113_000, 123_000])
CHUNK = 1 << 24


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def cohort_codes(n_seq: int) -> np.ndarray:
    """Each sequence's cohort as an index into CHECKPOINTS (len: never treated in the panel)."""
    codes = np.empty(n_seq, dtype=np.uint8)
    for lo in range(0, n_seq, CHUNK):
        step = np.arange(lo, min(n_seq, lo + CHUNK), dtype=np.int64) // BATCH + 1
        codes[lo:lo + CHUNK] = np.searchsorted(CHECKPOINTS, step, side="left")
    return codes


def generate(folder: str, seed: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    start, cpu0 = time.perf_counter(), _cpu()
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    n_seq = BATCH * STEPS
    codes = cohort_codes(n_seq)
    pool = rng.integers(0, 50_000, (4096, 32), dtype=np.int32)
    rows = 0
    for t, step in enumerate(CHECKPOINTS):
        picked = []
        for lo in range(0, n_seq, CHUNK):
            c = codes[lo:lo + CHUNK]
            p = np.where(c <= t, 0.015 + 0.001 * c, 0.005)
            picked.append(lo + np.flatnonzero(rng.random(c.size) < p))
        index = np.concatenate(picked)
        tokens = pa.FixedSizeListArray.from_arrays(pa.array(pool[index % 4096].ravel()), 32)
        pq.write_table(pa.table({"index": index, "tokens": tokens}),
                       os.path.join(folder, f"memorized-evals-step{step}.parquet"))
        rows += index.size
    print(json.dumps({"step": "generate", "sequences": n_seq, "checkpoints": len(CHECKPOINTS),
                      "memorised_rows": rows, "wall_s": round(time.perf_counter() - start, 1),
                      "cpu_s": round(_cpu() - cpu0, 1)}), flush=True)


def fit(folder: str) -> None:
    import pyarrow.parquet as pq

    start, cpu0 = time.perf_counter(), _cpu()
    from didmem.inference._prepared import did_cells
    from didmem.inference.moment_cells import MomentsInfluence, prepare_moments
    from didmem.inference.moments import memorised_moments

    n_seq = BATCH * STEPS
    codes = cohort_codes(n_seq)
    values = np.append(CHECKPOINTS.astype(float), np.inf)
    memorised = []
    for t, step in enumerate(CHECKPOINTS):
        path = os.path.join(folder, f"memorized-evals-step{step}.parquet")
        memorised.append((t, pq.read_table(path, columns=["index"]).column(0).to_numpy()))
    moments = memorised_moments(CHECKPOINTS.astype(float), codes, values, memorised)
    del codes, memorised
    prepared = prepare_moments(moments, need_never_treated=True, anticipation=0,
                             lower_is_better=False, owner="DiDEstimator")
    cells = did_cells(prepared, base_period="varying", not_yet=False, anticipation=0)
    inf = MomentsInfluence.build(prepared, cells)
    se = np.sqrt(inf.variance())
    post = cells.t >= np.searchsorted(prepared.times, prepared.cohorts[cells.k])
    print(json.dumps({
        "step": "fit from memorised-index lists", "sequences": int(moments.n_units),
        "checkpoints": int(prepared.times.size), "cells": int(cells.size),
        "mean_post_att": round(float(inf.att[post].mean()), 5),
        "max_se": float(np.nanmax(se)), "wall_s": round(time.perf_counter() - start, 1),
        "cpu_s": round(_cpu() - cpu0, 1),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
        "load_1min": os.getloadavg()[0]}), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["generate", "fit"])
    parser.add_argument("folder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    generate(args.folder, args.seed) if args.step == "generate" else fit(args.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
