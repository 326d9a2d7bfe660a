"""Time didmem.sensitivity on a long event study (either restriction, optionally a variant).

Usage::

    python benchmarks/bench_sensitivity.py [n_pre] [n_post] [n_m] [restriction] [variant]
    python benchmarks/bench_sensitivity.py --readme [n_m] [restriction] [variant]

An AR(1)-correlated covariance and an event study with a linear pre-trend; one interval per
value of M (the target is event time 0) plus the breakdown value. ``restriction`` is
``smoothness`` (default; M from 0 to 0.01) or ``relative_magnitudes`` (C-LF, Mbar from 0 to 2);
``variant`` adds a sign or monotonicity restriction, e.g. ``bias=positive`` or
``monotonicity=increasing`` (C-LF for either restriction). ``--readme`` takes instead the
event study of the README's panel (``simulate_panel(n_cohorts=6, units_per_cohort=100,
n_never_treated=500, time_step=1000, seed=0)``, ``DiDEstimator(base_period="universal")``,
``aggregate("dynamic")``: 5 pre-treatment event times besides the reference, 7 post), with
Mbar from 0 to 2.5 or M from 0 to 0.05.

The progress line of the call is shown (``progress=True``); the last line gives the wall and
CPU seconds (on a loaded machine the CPU time is the better guide to an idle run).
"""

from __future__ import annotations

import platform
import sys
import time

import numpy as np
import pandas as pd

import didmem


def synthetic(n_pre, n_post):
    rng = np.random.default_rng(0)
    e = np.concatenate([np.arange(-n_pre - 1, -1), np.arange(n_post)]).astype(float)
    idx = np.abs(np.subtract.outer(np.arange(e.size), np.arange(e.size)))
    sigma = 0.01 ** 2 * 0.5 ** idx
    beta = 0.001 * (e + 1) + 0.05 * (e >= 0) + rng.multivariate_normal(np.zeros(e.size), sigma)
    return (pd.Series(beta, index=e), pd.DataFrame(sigma, index=e, columns=e))


def readme():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=6, units_per_cohort=100,
                                           n_never_treated=500, time_step=1000, seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    return didmem.DiDEstimator(base_period="universal").fit(panel).aggregate("dynamic")


def main(data, label, n_m=10, restriction="smoothness", variant=None, top=None):
    top = top or (0.01 if restriction == "smoothness" else 2.0)
    ms = np.linspace(0, top, n_m)
    extra = dict([variant.split("=")]) if variant else {}
    wall, cpu = time.perf_counter(), time.process_time()
    s = didmem.sensitivity(data, restriction=restriction, m=ms, event_time=0, progress=True,
                           **extra)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(s.to_frame().to_string())
    print(f"breakdown {s.breakdown:.6g}")
    what = f"{restriction} {variant}" if variant else restriction
    print(f"{what}: {label}, {n_m} values of M (+ breakdown): {wall:.2f} s wall, "
          f"{cpu:.2f} s CPU on {platform.processor() or platform.machine()}, "
          f"python {platform.python_version()}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--readme":
        rest = args[1:]
        restriction = rest[1] if len(rest) > 1 else "relative_magnitudes"
        main(readme(), "README panel (5 pre, 7 post)", int(rest[0]) if rest else 10,
             restriction, rest[2] if len(rest) > 2 else None,
             top=2.5 if restriction != "smoothness" else 0.05)
    else:
        n_pre, n_post, n_m = (int(a) for a in (args[:3] + ["95", "95", "10"][len(args[:3]):]))
        main(synthetic(n_pre, n_post), f"{n_pre} pre, {n_post} post", n_m, *args[3:5])
