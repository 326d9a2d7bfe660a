"""Speed of RandomTimingEstimator at the paper's scale (issue 47).

95 cohorts x 150 instances + 2,000 never-treated, 96 checkpoints (AR(1) paths with instance
effects). Times, each the best of ``--repeats``:

* ``fit``: the whole fit with the analytic (design-based and Neyman) standard errors of every
  cell and aggregation and the simultaneous bands (1,000 draws), no Fisher test (wall
  seconds; ``fit_cpu_all_s`` the CPU seconds of each repeat);
* ``fisher``: ``--fisher`` permutations (cells, the sup-t and every aggregation row),
  reported also per 1,000 permutations.

Writes the panel as csv for R with ``--csv PATH`` (to time R ``staggered`` on the same data).

* ``compare_direct``: with ``--compare-direct N``, a seeded test of N permutations through
  the sparse maps and through the direct computation: the largest difference of the
  statistics and whether the p-values are the same.
* ``parts``: with ``--parts N``, the CPU time of each part of one permutation (the permuted
  moments, the statistics of the cells and of every aggregation row), over N
  permutations, and the statistics' one-off set-up.

    python benchmarks/bench_random_timing.py [--repeats 3] [--fisher 100] [--parts 6]
                                             [--compare-direct 100] [--csv /tmp/p.csv]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
import pandas as pd

import didmem


def paper_panel(seed=0, n_cohorts=95, per_cohort=150, never=2000, n_times=96):
    rng = np.random.default_rng(seed)
    g = np.r_[np.repeat(np.arange(2.0, n_cohorts + 2.0), per_cohort), np.full(never, np.inf)]
    n = g.size
    y = np.empty((n, n_times))
    u = rng.standard_normal(n)
    alpha = rng.standard_normal(n)
    for t in range(n_times):
        u = 0.6 * u + rng.standard_normal(n)
        y[:, t] = alpha + 0.01 * t + u + np.where(t + 1 >= g, 0.2, 0.0)
    frame = pd.DataFrame({"i": np.repeat(np.arange(n), n_times),
                          "t": np.tile(np.arange(1.0, n_times + 1), n),
                          "g": np.repeat(g, n_times), "y": y.ravel()})
    return frame


def permutation_parts(frame, n):
    """CPU seconds of each part of ``n`` permutations, as the Fisher test runs them: the
    permuted moments (with the controls' suffix sums) and the statistics (cells, sup-t rows,
    event times) from them (:class:`~didmem.inference.random_timing.permutation.
    PermutationStatistics`); and the one-off set-up of those statistics."""
    from threadpoolctl import threadpool_limits

    from didmem.inference.random_timing.design import TimingDesign
    from didmem.inference.random_timing.fisher import permuted_design
    from didmem.inference.random_timing.fit import aggregation_stack
    from didmem.inference.random_timing.permutation import PermutationStatistics

    n_t = frame["t"].nunique()
    y = frame["y"].to_numpy().reshape(-1, n_t)
    g = frame["g"].to_numpy()[::n_t]
    times = np.sort(frame["t"].unique())
    values, labels = np.unique(g, return_inverse=True)
    centre = y.mean(axis=0)
    z = y - centre
    rng = np.random.default_rng(0)
    parts = {"set_up": [], "moments": [], "statistics": []}
    with threadpool_limits(limits=1, user_api="blas"):
        c0 = time.process_time()
        design = TimingDesign.from_paths(times, g, y)
        stack = aggregation_stack(design, False)
        rows = np.arange(stack.names.size)  # every aggregation row, as the fit tests
        statistic = PermutationStatistics(design, None, False, stack.a_theta[rows],
                                          stack.a_0[rows])
        parts["set_up"].append(round(time.process_time() - c0, 4))
        for _ in range(n):
            new = labels[rng.permutation(labels.size)]
            c0 = time.process_time()
            d = permuted_design(times, design.codes, values, z, new, centre=centre,
                                control_sums=True)
            c1 = time.process_time()
            statistic(d)
            c2 = time.process_time()
            for name, spent in zip(("moments", "statistics"), (c1 - c0, c2 - c1)):
                parts[name].append(round(spent, 4))
    return parts


def compare_direct(frame, n):
    """A seeded Fisher test of ``n`` permutations through the sparse maps and through the
    direct computation (``fit._statistics``): the largest difference of the statistics and
    whether every p-value is the same."""
    from threadpoolctl import threadpool_limits

    from didmem.inference.random_timing.design import EstimandRows, TimingDesign
    from didmem.inference.random_timing.fisher import fisher_test
    from didmem.inference.random_timing.fit import _statistics, aggregation_stack
    from didmem.inference.random_timing.permutation import PermutationStatistics

    n_t = frame["t"].nunique()
    y = frame["y"].to_numpy().reshape(-1, n_t)
    g = frame["g"].to_numpy()[::n_t]
    times = np.sort(frame["t"].unique())
    design = TimingDesign.from_paths(times, g, y)
    stack = aggregation_stack(design, False)
    rows = np.arange(stack.names.size)  # every aggregation row, as the fit tests
    with threadpool_limits(limits=1, user_api="blas"):
        fast = PermutationStatistics(design, None, False, stack.a_theta[rows],
                                     stack.a_0[rows])
        oracle = EstimandRows.of(stack.a_theta[rows], stack.a_0[rows])
    a = fisher_test(times, g, y, fast, n_permutations=n, seed=5, control_sums=True)
    b = fisher_test(times, g, y, lambda d: _statistics(d, None, False, oracle),
                    n_permutations=n, seed=5)
    return {"permutations": n, "statistics": int(a.permuted.shape[1]),
            "largest_difference": float(np.abs(a.permuted - b.permuted).max()),
            "pvalues_identical": bool(np.array_equal(a.pvalue, b.pvalue)),
            "pvalues_r_identical": bool(np.array_equal(a.pvalue_r, b.pvalue_r))}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fisher", type=int, default=100)
    parser.add_argument("--csv", default=None)
    parser.add_argument("--parts", type=int, default=0)
    parser.add_argument("--compare-direct", type=int, default=0)
    args = parser.parse_args()
    frame = paper_panel()
    if args.csv:
        frame.to_csv(args.csv, index=False)
    panel = didmem.Panel(frame, unit="i", time="t", cohort="g", outcome="y")
    est = didmem.RandomTimingEstimator(seed=1)
    est.fit(panel)  # warm-up (imports)
    fit, fit_cpu = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        result = est.fit(panel)
        fit.append(time.perf_counter() - t0)
        fit_cpu.append(time.process_time() - c0)  # this process, all its threads
    out = {"machine": platform.processor() or platform.machine(), "units": panel.n_units,
           "times": panel.n_times, "cells": int(len(result.to_frame())),
           "fit_s": min(fit), "fit_all_s": fit, "fit_cpu_all_s": fit_cpu,
           "load_average_before": os.getloadavg()}
    if args.fisher:
        t0, c0 = time.perf_counter(), time.process_time()
        didmem.RandomTimingEstimator(seed=1, n_draws=0).fit(panel)
        plain, plain_cpu = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        didmem.RandomTimingEstimator(seed=1, n_fisher=args.fisher, n_draws=0).fit(panel)
        spent, spent_cpu = time.perf_counter() - t0, time.process_time() - c0
        # CPU time of this process (one BLAS thread): the figure that a shared, loaded
        # machine inflates least
        out.update(fit_without_band_s=plain, fisher_permutations=args.fisher,
                   fisher_s=spent, fisher_per_1000_s=(spent - plain) / args.fisher * 1000,
                   fisher_cpu_per_1000_s=(spent_cpu - plain_cpu) / args.fisher * 1000)
    if args.parts:
        out["permutation_parts_cpu_s"] = permutation_parts(frame, args.parts)
    if args.compare_direct:
        out["compare_direct"] = compare_direct(frame, args.compare_direct)
    out["load_average_1_5_15"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
