"""Issue 37 item 4: a fit from lists of memorised sequence indices at Pythia's scale, 146,432,000
sequences x 7 checkpoints, in the layout of EleutherAI's pythia-memorized-evals, without
writing the sequence x checkpoint panel.

* ``generate DIR``: one model's lists (``DIR/data/deduped.12b.{step}-00000-of-00001.parquet``,
  and ``deduped.12b-...`` for the final step 143,000: the dataset's split names) at the
  dataset's 7 checkpoints (23,000 ... 143,000), columns ``index`` (int64), ``tokens`` (64
  int64 tokens a row, as the dataset) and ``__index_level_0__``. A sequence is listed with
  probability 0.5% before it is trained on and 1.5% + 0.1% x (its cohort's index) after.
  Unlike EleutherAI's intermediate lists (which evaluated only the sequences trained by then),
  every list here evaluates every sequence, as a difference-in-differences needs.
* ``fit DIR``: what ``didmem estimate DIR --memorised --control not_yet_treated`` does, in one
  process: :func:`didmem.orders.read_memorised` (Pythia's order: sequence ``i`` trained at
  step ``i // 1024 + 1``; the per-cohort counts of each memorisation pattern) and
  :class:`didmem.DiDEstimator` with not-yet-treated controls (every sequence is trained by
  step 143,000, so none is never treated) and its Gaussian bootstrap of 1,000 draws, and the
  results file. One JSON line: wall, CPU, peak memory (RSS), machine load, the mean of the
  post-treatment cells against the simulated effect.
* ``--fraction F`` (both steps): the first ``F`` of the order's steps only (a measured fraction
  when the machine cannot give the whole).

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
import tempfile
import time
import warnings

import numpy as np

BATCH, STEPS = 1024, 143_000
CHECKPOINTS = np.array([23_000, 43_000, 63_000, 83_000, 103_000, 123_000, 143_000])
MODEL = "deduped.12b"
CHUNK = 1 << 22  # sequences drawn at once
ROWS = 1 << 18  # rows written at once (64 tokens each)


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _scaled(fraction: float):
    steps = int(round(STEPS * fraction))
    grid = CHECKPOINTS * steps // STEPS
    return steps * BATCH, grid


def _split(step: int) -> str:
    """The dataset's split name: the final checkpoint's has no step."""
    return MODEL if step == STEPS else f"{MODEL}.{step}"


def generate(folder: str, seed: int, fraction: float) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    start, cpu0 = time.perf_counter(), _cpu()
    n_seq, grid = _scaled(fraction)
    os.makedirs(os.path.join(folder, "data"), exist_ok=True)
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 50_000, (4096, 64), dtype=np.int64)
    schema = pa.schema([("index", pa.int64()), ("tokens", pa.list_(pa.int64())),
                        ("__index_level_0__", pa.int64())])
    rows = 0
    for t, step in enumerate(grid):
        picked = []
        for lo in range(0, n_seq, CHUNK):
            seq = np.arange(lo, min(n_seq, lo + CHUNK))
            code = np.searchsorted(grid, seq // BATCH + 1)
            p = np.where(code <= t, 0.015 + 0.001 * code, 0.005)
            picked.append(seq[rng.random(seq.size) < p])
        index = np.concatenate(picked)
        name = f"{_split(step)}-00000-of-00001.parquet"
        with pq.ParquetWriter(os.path.join(folder, "data", name), schema) as writer:
            for lo in range(0, index.size, ROWS):
                part = index[lo:lo + ROWS]
                tokens = pa.ListArray.from_arrays(
                    pa.array(np.arange(part.size + 1, dtype=np.int32) * 64),
                    pa.array(pool[part % 4096].ravel()))
                writer.write_table(pa.table([part, tokens, part], schema=schema))
        rows += index.size
    print(json.dumps({"step": "generate", "sequences": n_seq, "checkpoints": grid.tolist(),
                      "memorised_rows": rows, "wall_s": round(time.perf_counter() - start, 1),
                      "cpu_s": round(_cpu() - cpu0, 1), "load_1min": os.getloadavg()[0]}),
          flush=True)


def fit(folder: str, fraction: float) -> None:
    start, cpu0 = time.perf_counter(), _cpu()
    import didmem
    from didmem.orders import read_memorised

    n_seq, grid = _scaled(fraction)
    panel = read_memorised(folder, model=MODEL, batch_size=BATCH, sequences=n_seq)
    read_s, read_cpu = time.perf_counter() - start, _cpu() - cpu0
    with warnings.catch_warnings():  # the first cohort has no pre-period: dropped, as R did
        warnings.simplefilter("ignore", didmem.errors.DataDroppedWarning)
        res = didmem.DiDEstimator(control_group="not_yet_treated", seed=0).fit(panel)
    frame = res.to_frame()
    with tempfile.TemporaryDirectory() as tmp:
        res.save(os.path.join(tmp, "results.parquet"))
    post = frame[frame["time"] >= frame["cohort"]]
    code = np.searchsorted(grid, post["cohort"].to_numpy())
    print(json.dumps({
        "step": "fit from memorised-index lists", "sequences": panel.n_units,
        "checkpoints": grid.tolist(), "patterns": int(panel.counts.size),
        "cells": int(len(frame)), "mean_post_att": round(float(post["estimate"].mean()), 5),
        "simulated_post_att": round(float((0.010 + 0.001 * code).mean()), 5),
        "max_se": float(frame["std_error"].max()),
        "read_wall_s": round(read_s, 1), "read_cpu_s": round(read_cpu, 1),
        "wall_s": round(time.perf_counter() - start, 1), "cpu_s": round(_cpu() - cpu0, 1),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
        "load_1min": os.getloadavg()[0]}), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["generate", "fit"])
    parser.add_argument("folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fraction", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.step == "generate":
        generate(args.folder, args.seed, args.fraction)
    else:
        fit(args.folder, args.fraction)
    return 0


if __name__ == "__main__":
    sys.exit(main())
