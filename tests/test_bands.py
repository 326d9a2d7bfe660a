"""didmem.inference.bands against plain-numpy statements of the same rules."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import norm

from didmem.errors import InferenceWarning
from didmem.inference.bands import (
    analytic_se,
    bootstrap_se,
    normal_quantile,
    simultaneous_band,
    sup_t_critical_value,
)


def _type1(x, p):
    """R's type-1 quantile (inverse of the empirical distribution)."""
    x = np.sort(x)
    return x[int(np.ceil(len(x) * p)) - 1]


@pytest.fixture
def draws():
    rng = np.random.default_rng(7)
    return rng.standard_normal((499, 4)) * np.array([1.0, 2.0, 0.5, 1.5])


def test_normal_quantile_and_analytic_se():
    assert normal_quantile(0.975) == pytest.approx(norm.ppf(0.975), rel=1e-12)
    se = analytic_se(np.array([4.0, 0.0, -1e-30, np.nan]))
    assert se[0] == 2.0 and np.isnan(se[1:]).all()


def test_bootstrap_se_is_the_normalised_iqr(draws):
    se = bootstrap_se(draws, bres_scale=1.0)
    for j in range(draws.shape[1]):
        iqr = _type1(draws[:, j], 0.75) - _type1(draws[:, j], 0.25)
        assert se[j] == pytest.approx(iqr / (norm.ppf(0.75) - norm.ppf(0.25)), rel=1e-12)
    flat = bootstrap_se(np.zeros((50, 2)), bres_scale=10.0)
    assert np.isnan(flat).all()


def test_sup_t_is_the_quantile_of_the_largest_t(draws):
    se = bootstrap_se(draws, 1.0)
    crit = sup_t_critical_value(draws, se, 0.1, 1.0)
    assert crit == pytest.approx(_type1(np.max(np.abs(draws / se), axis=1), 0.9), rel=1e-12)
    # a NaN standard error leaves its column out
    se_nan = se.copy()
    se_nan[1] = np.nan
    crit3 = sup_t_critical_value(draws, se_nan, 0.1, 1.0)
    keep = [0, 2, 3]
    expected = _type1(np.max(np.abs(draws[:, keep] / se[keep]), axis=1), 0.9)
    assert crit3 == pytest.approx(expected, rel=1e-12)
    assert np.isnan(sup_t_critical_value(draws, np.full(4, np.nan), 0.1, 1.0))


def test_band_rule_and_its_fallbacks(draws):
    se = bootstrap_se(draws, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        crit, kind = simultaneous_band(draws, se, 0.05, 1.0, at_least_normal=False)
    assert kind == "simultaneous" and crit > normal_quantile(0.975)
    with pytest.warns(InferenceWarning, match="non-degenerate"):
        crit, kind = simultaneous_band(draws, np.full(4, np.nan), 0.05, 1.0,
                                       at_least_normal=False)
    assert kind == "pointwise" and crit == pytest.approx(normal_quantile(0.975))
    # one column: the sup-t value is the pointwise one up to noise; aggte's rule keeps the
    # larger of the two, so a value below z falls back to z with a warning
    one = draws[:, :1] * 0 + np.linspace(-1, 1, draws.shape[0])[:, None]
    se1 = bootstrap_se(one, 1.0)
    assert sup_t_critical_value(one, se1, 0.05, 1.0) < normal_quantile(0.975)
    with pytest.warns(InferenceWarning, match="below the pointwise"):
        crit, kind = simultaneous_band(one, se1, 0.05, 1.0, at_least_normal=True)
    assert kind == "pointwise" and crit == pytest.approx(normal_quantile(0.975))
