"""Time didmem.sensitivity on a long event study (either restriction, optionally a variant).

Usage: python benchmarks/bench_sensitivity.py [n_pre] [n_post] [n_m] [restriction] [variant]
An AR(1)-correlated covariance and an event study with a linear pre-trend; one interval per
value of M (the target is event time 0) plus the breakdown value. ``restriction`` is
``smoothness`` (default; M from 0 to 0.01) or ``relative_magnitudes`` (C-LF, Mbar from 0 to 2);
``variant`` adds a sign or monotonicity restriction, e.g. ``bias=positive`` or
``monotonicity=increasing`` (C-LF for either restriction).
"""

from __future__ import annotations

import platform
import sys
import time

import numpy as np
import pandas as pd

import didmem


def main(n_pre=95, n_post=95, n_m=10, restriction="smoothness", variant=None):
    rng = np.random.default_rng(0)
    e = np.concatenate([np.arange(-n_pre - 1, -1), np.arange(n_post)]).astype(float)
    idx = np.abs(np.subtract.outer(np.arange(e.size), np.arange(e.size)))
    sigma = 0.01 ** 2 * 0.5 ** idx
    beta = 0.001 * (e + 1) + 0.05 * (e >= 0) + rng.multivariate_normal(np.zeros(e.size), sigma)
    data = (pd.Series(beta, index=e), pd.DataFrame(sigma, index=e, columns=e))
    ms = np.linspace(0, 0.01 if restriction == "smoothness" else 2.0, n_m)
    t = time.perf_counter()
    extra = dict([variant.split("=")]) if variant else {}
    s = didmem.sensitivity(data, restriction=restriction, m=ms, event_time=0, **extra)
    took = time.perf_counter() - t
    print(s.to_frame().to_string())
    print(f"breakdown {s.breakdown:.6g}")
    label = f"{restriction} {variant}" if variant else restriction
    print(f"{label}: {n_pre} pre, {n_post} post, {n_m} values of M (+ breakdown): {took:.2f} s "
          f"on {platform.processor() or platform.machine()}, python {platform.python_version()}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(*(int(a) for a in args[:3]), *args[3:5])
