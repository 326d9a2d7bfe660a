"""The memorisation aggregations that benchmarks/random_timing_lab.py builds for the
random-timing estimator (issue 47 item 4) are DiD's: with ``beta=1`` (Callaway & Sant'Anna,
not-yet-treated controls) their estimates equal DiDEstimator's ``instantaneous``,
``persistent``, ``residual`` and ``simple``, and ``simple`` equals the estimator's own; the
truth of each is averaged with the same weights."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.inference.random_timing.design import linear_estimates

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "random_timing_lab.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("random_timing_lab", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("sizes", [(30, 30, 30, 30), (12, 40, 25, 33)])
def test_aggregations_are_did_with_beta_one(bench, sizes):
    rng = np.random.default_rng(len(sizes) + sizes[1])
    n_t, cohorts = 7, (2.0, 3.0, 5.0, 7.0)
    g = np.concatenate([np.repeat(cohorts, sizes), np.full(60, np.inf)])
    y = np.cumsum(rng.standard_normal((g.size, n_t)), axis=1) + rng.standard_normal((g.size, 1))
    times = np.arange(1.0, n_t + 1)
    y += np.where(times[None, :] >= g[:, None], 0.5 + rng.standard_normal((g.size, 1)), 0.0)
    frame = pd.DataFrame({"unit": np.repeat(np.arange(g.size), n_t),
                          "time": np.tile(times, g.size),
                          "cohort": np.repeat(np.where(np.isinf(g), np.nan, g), n_t),
                          "y": y.ravel()})
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")
    rt = didmem.RandomTimingEstimator(beta=1, n_draws=0).fit(panel)
    did = didmem.DiDEstimator(control_group="not_yet_treated", n_bootstrap=0).fit(panel)
    for kind in bench.AGGREGATIONS:
        a_theta, a_0 = bench.rt_aggregation_weights(rt.design, kind)
        mine = linear_estimates(rt.design, a_theta, a_0, 1.0).estimate[0]
        assert mine == pytest.approx(did.aggregate(kind).overall.estimate, abs=1e-10), kind
    a_theta, a_0 = bench.rt_aggregation_weights(rt.design, "simple")
    efficient = didmem.RandomTimingEstimator(n_draws=0).fit(panel)
    assert linear_estimates(efficient.design, a_theta, a_0).estimate[0] == pytest.approx(
        efficient.aggregate("simple").overall["estimate"], abs=1e-10)
    # the truth of each aggregation, from cells whose truth is the estimate, is the estimate
    cells = did.to_frame().rename(columns={"estimate": "tau"})[["cohort", "time", "tau"]]
    shares = dict(zip(cohorts, sizes))
    for kind in bench.AGGREGATIONS:
        assert bench.true_overall(cells, kind, shares) == pytest.approx(
            did.aggregate(kind).overall.estimate, abs=1e-10), kind
