"""Issue 37: a fit from per-cohort moments of a parquet folder at 100x the paper's units.

Two steps, each in its own process so that the peak memory of each is its own:

* ``generate DIR``: write a balanced panel of the paper's shape with ``--scale`` times its
  units (95 cohorts x 150 + 2,000 never-treated, 96 checkpoints; ``--scale 100`` gives
  1,625,000 instances and 156M rows) as ``--files`` parquet files, laid out as scoring on
  Ray writes parts: each file holds a few checkpoints of every instance, so every unit's
  path is spread over all files (the hardest layout for reading in bounded memory).
  Columns ``unit`` (int64), ``time`` (int64), ``cohort`` (float64, NaN never-treated), ``y``.
* ``read DIR``: pyarrow's read of the folder, file by file (the yardstick of the target).
* ``fit DIR``: read the folder as unit paths, sum the moments, and compute every cell, its
  standard error, the Wald pre-test's covariance and 1,000 Gaussian bootstrap draws.
* ``check DIR``: the folder read in one pass (integer units) and in work items (the index
  pass, then the items): the same moments, cells and standard errors (rtol 1e-9).

* ``route SCALE --via memory|moments``: a panel of ``SCALE`` times the paper's units built in
  memory (``didmem.Panel``), then ``DiDEstimator().fit(panel)`` (the in-memory route,
  Gaussian multipliers by default) or the same estimator's fit from the panel's moments
  (``fit_moments``), 1,000 draws; the clock covers the fit only (run the two in turn).

Each step prints one JSON line: wall time, peak resident memory (``ru_maxrss``), load.

Example (the figures in RESULTS.md; data under /tmp, never committed)::

    nice -n 15 python benchmarks/scale_moments.py generate /tmp/scale100 --scale 100
    nice -n 15 python benchmarks/scale_moments.py read /tmp/scale100
    nice -n 15 python benchmarks/scale_moments.py fit /tmp/scale100
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

N_COHORTS, PER_COHORT, NEVER, N_TIMES = 95, 150, 2000, 96


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _report(step, start, cpu0=0.0, **extra):
    row = {"step": step, "wall_s": round(time.perf_counter() - start, 2),
           "cpu_s": round(_cpu() - cpu0, 2),
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
           "load_1min": os.getloadavg()[0], **extra}
    print(json.dumps(row), flush=True)
    return row


def generate(folder: str, scale: int, n_files: int, seed: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    start = time.perf_counter()
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    times = np.arange(1, N_TIMES + 1, dtype=np.int64) * 1000
    n_treated = N_COHORTS * PER_COHORT * scale
    n_units = n_treated + NEVER * scale
    cohort = np.full(n_units, np.nan)
    cohort[:n_treated] = np.repeat(times[1:N_COHORTS + 1], PER_COHORT * scale)
    level = rng.normal(0.0, 1.0, n_units) - 3.0  # a per-instance log-likelihood level
    unit = np.arange(n_units, dtype=np.int64)
    for f, cols in enumerate(np.array_split(np.arange(N_TIMES), n_files)):
        parts = []
        for t in cols:
            event = times[t] - cohort  # NaN for never-treated
            effect = np.where(event >= 0, 1.0 * 0.5 ** (np.nan_to_num(event, nan=0) / 1000), 0.0)
            y = level + 0.01 * t + effect + rng.normal(0.0, 0.5, n_units)
            parts.append(pa.table({"unit": unit, "time": np.full(n_units, times[t]),
                                   "cohort": cohort, "y": y}))
        pq.write_table(pa.concat_tables(parts), os.path.join(folder, f"part-{f:05d}.parquet"))
    _report("generate", start, units=n_units, times=N_TIMES, files=n_files,
            rows=n_units * N_TIMES)


def read(folder: str) -> None:
    import pyarrow.parquet as pq

    from didmem.panel.scan import _data_files

    start, cpu0 = time.perf_counter(), _cpu()
    rows = 0
    for f in _data_files(__import__("pathlib").Path(folder)):
        rows += pq.read_table(f).num_rows
    _report("pyarrow read, file by file", start, cpu0, rows=rows)


def fit(folder: str, n_draws: int) -> None:
    start, cpu0 = time.perf_counter(), _cpu()
    from didmem.inference.prepared import did_cells
    from didmem.inference.moments.cells import MomentsInfluence, prepare_moments
    from didmem.inference.moments.cohort import dataset_moments
    from didmem.panel.scan import ParquetPaths

    data = ParquetPaths(folder, unit="unit", time="time", cohort="cohort", outcome="y")
    moments = dataset_moments(data)
    read_s = time.perf_counter() - start
    prepared = prepare_moments(moments, need_never_treated=True, anticipation=0,
                             lower_is_better=False, owner="DiDEstimator")
    cells = did_cells(prepared, base_period="varying", not_yet=False, anticipation=0)
    inf = MomentsInfluence.build(prepared, cells)
    var = inf.variance()
    boot = inf.bootstrap(n_draws, "normal", np.random.default_rng(0))
    _report("fit from moments", start, cpu0, rows=data.n_rows, units=moments.n_units,
            cells=int(cells.size), draws=boot.n_draws, moments_s=round(read_s, 2),
            finite_se=int(np.isfinite(np.sqrt(var)).sum()))


def check(folder: str) -> None:
    """The one pass equals the work items: the moments, and every cell's estimate and
    standard error from them (rtol 1e-9), read in turn in one process."""
    start, cpu0 = time.perf_counter(), _cpu()
    from didmem.inference.prepared import did_cells
    from didmem.inference.moments.cells import MomentsInfluence, prepare_moments
    from didmem.inference.moments.cohort import dataset_moments
    from didmem.panel.scan import ParquetPaths

    def cells_of(map_items):
        data = ParquetPaths(folder, unit="unit", time="time", cohort="cohort", outcome="y")
        moments = dataset_moments(data, map_items=map_items)
        prepared = prepare_moments(moments, need_never_treated=True, anticipation=0,
                                   lower_is_better=False, owner="DiDEstimator")
        cells = did_cells(prepared, base_period="varying", not_yet=False, anticipation=0)
        inf = MomentsInfluence.build(prepared, cells)
        return moments, inf.att, np.sqrt(inf.variance())

    one = cells_of(None)
    items = cells_of(map)
    np.testing.assert_array_equal(one[0].count, items[0].count)
    worst = {}
    for name, a, b in (("mean", one[0].mean, items[0].mean), ("cross", one[0].cross,
                                                               items[0].cross),
                       ("estimate", one[1], items[1]), ("std_error", one[2], items[2])):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=name)
        worst[name] = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))
    _report("one pass == work items (rtol 1e-9)", start, cpu0, cells=int(one[1].size),
            units=one[0].n_units, max_rel_diff={k: f"{v:.1e}" for k, v in worst.items()})


def route(scale: int, via: str) -> None:
    import pandas as pd

    import didmem
    from didmem.estimators._moments_route import fit_moments, panel_moments

    rng = np.random.default_rng(0)
    times = np.arange(1, N_TIMES + 1, dtype=float)
    n_treated = N_COHORTS * PER_COHORT * scale
    n_units = n_treated + NEVER * scale
    cohort = np.full(n_units, np.inf)
    cohort[:n_treated] = np.repeat(times[1:N_COHORTS + 1], PER_COHORT * scale)
    event = times[None, :] - cohort[:, None]
    y = (rng.normal(0.0, 1.0, n_units)[:, None] + 0.01 * times[None, :]
         + np.where(event >= 0, 0.5 ** np.where(event >= 0, event, 0.0), 0.0)
         + rng.normal(0.0, 0.5, (n_units, N_TIMES)))
    frame = pd.DataFrame({"unit": np.repeat(np.arange(n_units), N_TIMES),
                          "time": np.tile(times, n_units),
                          "cohort": np.repeat(cohort, N_TIMES), "y": y.ravel()})
    del y, event
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")
    del frame
    est = didmem.DiDEstimator(n_bootstrap=1000, seed=0)
    start, cpu0 = time.perf_counter(), _cpu()
    if via == "memory":
        res = est.fit(panel)
    else:
        res = fit_moments(est, panel_moments(panel), outcome="y")
    res.aggregate("dynamic")
    _report(f"fit via {via}", start, cpu0, scale=scale, units=n_units, cells=int(res.cells.size),
            critical_value=round(float(res.critical_value), 4))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    g = sub.add_parser("generate")
    g.add_argument("folder")
    g.add_argument("--scale", type=int, default=100)
    g.add_argument("--files", type=int, default=32)
    g.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("read")
    r.add_argument("folder")
    f = sub.add_parser("fit")
    f.add_argument("folder")
    f.add_argument("--draws", type=int, default=1000)
    c = sub.add_parser("check")
    c.add_argument("folder")
    m = sub.add_parser("route")
    m.add_argument("scale", type=int)
    m.add_argument("--via", choices=["memory", "moments"], required=True)
    args = parser.parse_args(argv)
    if args.step == "route":
        route(args.scale, args.via)
    elif args.step == "generate":
        generate(args.folder, args.scale, args.files, args.seed)
    elif args.step == "read":
        read(args.folder)
    elif args.step == "check":
        check(args.folder)
    else:
        fit(args.folder, args.draws)
    return 0


if __name__ == "__main__":
    sys.exit(main())
