"""Instance covariates (length, token rarity, domain) and their use as panel covariates."""

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.backends import add_instance_covariates, instance_covariates
from didmem.errors import InstanceError


def test_values_by_hand():
    cov = instance_covariates([[1, 2, 2], [2, 3]], unit_ids=["a", "b"], domains=["web", "code"])
    # counts over the sample: 1 -> 1, 2 -> 3, 3 -> 1 of 5 tokens
    lf = np.log(np.array([1, 3, 1]) / 5)
    np.testing.assert_array_equal(cov["length"], [3, 2])
    np.testing.assert_allclose(cov["mean_log_unigram_freq"],
                               [(lf[0] + 2 * lf[1]) / 3, (lf[1] + lf[2]) / 2], rtol=1e-15)
    assert list(cov["domain"]) == ["web", "code"]
    # one dummy per label but the reference (most frequent; ties keep first seen)
    assert [c for c in cov.columns if c.startswith("domain[")] == ["domain[code]"]


def test_errors_name_the_problem():
    with pytest.raises(InstanceError, match="one label per instance"):
        instance_covariates([[1], [2]], domains=["x"])
    with pytest.raises(InstanceError, match="No domain label for 1 units"):
        instance_covariates([[1], [2]], unit_ids=[5, 6], domains={5: "x"})
    frame = pd.DataFrame({"unit": [0, 1, 2], "time": 0, "y": 0.0})
    with pytest.raises(InstanceError, match="1 units of the panel have no covariates"):
        add_instance_covariates(frame, instance_covariates([[1], [2]]))


def test_covariates_feed_a_conditional_did():
    rng = np.random.default_rng(0)
    n_units, times = 120, np.arange(4.0)
    tokens = [rng.integers(0, 50, size=rng.integers(5, 30)) for _ in range(n_units)]
    cov = instance_covariates(tokens)
    cohort = np.where(np.arange(n_units) < 60, np.inf, rng.choice([1.0, 2.0], n_units))
    rows = pd.DataFrame({
        "unit": np.repeat(np.arange(n_units), times.size),
        "time": np.tile(times, n_units),
        "cohort": np.repeat(cohort, times.size),
    })
    rows["y"] = rng.normal(size=len(rows)) + 0.01 * rows["time"] * np.repeat(cov["length"], times.size).to_numpy()
    long = add_instance_covariates(rows, cov)
    assert len(long) == len(rows) and long["length"].notna().all()
    panel = didmem.Panel(long, unit="unit", time="time", cohort="cohort", outcome="y",
                         covariates=["length", "mean_log_unigram_freq"])
    res = didmem.DiDEstimator(est_method="dr", n_bootstrap=0).fit(panel)
    assert np.isfinite(res.to_frame()["estimate"]).all()
