"""Regression tests (issue 11): options that were ignored without a word now warn or refuse."""

import warnings

import numpy as np
import pytest

import didmem


def _panel(n_times=None, n_cohorts=3):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=n_cohorts, units_per_cohort=20,
                                           n_never_treated=40, n_times=n_times, seed=1)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


@pytest.mark.parametrize("cls", [didmem.DiDEstimator, didmem.DifferenceEstimator])
def test_cband_without_draws_warns(cls):
    with pytest.warns(didmem.InferenceWarning, match="cband=True needs bootstrap draws"):
        res = cls(n_bootstrap=0, cband=True).fit(_panel())
    assert res.band == "pointwise"


def test_default_cband_follows_the_draws():
    panel = _panel()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert didmem.DiDEstimator(n_bootstrap=0).fit(panel).band == "pointwise"
        boot = didmem.DiDEstimator(n_bootstrap=99, random_state=0).fit(panel)
    assert boot.band == "simultaneous"
    assert didmem.DiDEstimator(n_bootstrap=99, random_state=0, cband=False).fit(
        panel).band == "pointwise"


def test_cband_with_two_periods_warns():
    panel = _panel(n_times=2, n_cohorts=1)
    assert panel.n_times == 2
    with pytest.warns(didmem.InferenceWarning, match="only two periods"):
        res = didmem.DiDEstimator(n_bootstrap=99, random_state=0, cband=True).fit(panel)
    assert res.band == "pointwise"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        didmem.DiDEstimator(n_bootstrap=99, random_state=0).fit(panel)


@pytest.mark.parametrize("seed", [-1, True, 1.5, "0"])
@pytest.mark.parametrize("cls", [didmem.DiDEstimator, didmem.DifferenceEstimator])
def test_bad_random_state_is_refused(cls, seed):
    with pytest.raises(didmem.ParameterError, match="'random_state' parameter.*non-negative"):
        cls(n_bootstrap=9, random_state=seed).fit(_panel())


def test_good_random_states_pass():
    panel = _panel()
    for seed in (0, np.int64(3), np.random.default_rng(0), None):
        didmem.DiDEstimator(n_bootstrap=9, random_state=seed).fit(panel)


def test_influence_estimator_refuses_negative_seed():
    with pytest.raises(didmem.ParameterError, match="random_state"):
        didmem.InfluenceEstimator(random_state=-1)._validated_params()
