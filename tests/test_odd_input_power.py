"""Odd input to didmem.power_analysis, and plans and sensitivity results kept and read alike
(issues 23 and 24)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.errors import ParameterError
from didmem.power import Assumptions, power_analysis
from didmem.power._shrinkage import shrink


def _panel(units=12, n_never=30, n_cohorts=3, n_times=5, seed=0, never=True):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=n_cohorts, units_per_cohort=units,
                                           n_never_treated=n_never if never else 0,
                                           n_times=n_times, instantaneous=0.5, noise_sd=1.0,
                                           seed=seed)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


FAST = didmem.DiDEstimator(n_bootstrap=99)


@pytest.mark.parametrize("tokens", [-5, 0, 2.5, "2049"])
def test_negative_tokens_per_instance_is_refused(tokens):
    with pytest.raises(ParameterError, match="'tokens_per_instance' parameter of power_analysis"):
        power_analysis(Assumptions(n_cohorts=2, n_checkpoints=4), units_per_cohort=10,
                    effect=0.5, tokens_per_instance=tokens)


def test_cli_refuses_negative_tokens_and_a_power_of_one_before_planning(tmp_path, capsys):
    from didmem.cli import main

    args = ["power", "--cohorts", "2", "--checkpoints", "4", "--effect", "0.5",
            "--out", str(tmp_path / "p")]
    assert main(args + ["--tokens-per-instance", "-5"]) == 2
    assert "The option --tokens-per-instance must be" in capsys.readouterr().err
    assert main(args + ["--power", "1"]) == 2
    assert "The option --power must be" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()  # refused before anything was planned or written
    with pytest.raises(SystemExit) as exit_:  # argparse refuses it, in one line
        main(args + ["--seed", "-1"])
    assert exit_.value.code == 2
    assert "--seed: expected a non-negative integer, got '-1'" in capsys.readouterr().err


def test_cli_pilot_messages(tmp_path, capsys):
    from didmem.cli import main

    assert main(["power", "--pilot", str(tmp_path / "missing.parquet"), "--outcome", "y"]) == 2
    err = capsys.readouterr().err
    assert "No panel file at" in err and "missing.parquet" in err
    pilot = tmp_path / "pilot.csv"
    didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=5, n_never_treated=5,
                                   seed=0)[0].to_csv(pilot, index=False)
    assert main(["power", "--pilot", str(pilot), "--outcome", "y", "--cohorts", "4"]) == 2
    assert "--cohorts would be ignored" in capsys.readouterr().err


def test_pilot_without_never_treated_units():
    pilot = _panel(never=False)
    with pytest.raises(ParameterError, match="control_group='never_treated'") as info:
        power_analysis(pilot, units_per_cohort=10, estimator=FAST, n_simulations=3)
    assert "n_validation must be an integer >= 1; got 0" not in str(info.value)
    with pytest.raises(ParameterError, match="no never-treated .* n_validation must be 0"):
        power_analysis(pilot, units_per_cohort=10, n_validation=[1], n_simulations=3,
                    estimator=didmem.DiDEstimator(control_group="not_yet_treated",
                                                  n_bootstrap=99))
    # with not-yet-treated controls such a pilot is legitimate
    analysis = power_analysis(pilot, units_per_cohort=10, n_simulations=3, seed=0,
                       estimator=didmem.DiDEstimator(control_group="not_yet_treated",
                                                     n_bootstrap=99))
    assert analysis.to_frame()["n_validation"].tolist() == [0]


def test_shrinkage_pools_homogeneous_keys_and_keeps_heterogeneous_ones():
    rng = np.random.default_rng(0)
    se = np.full(8, 0.3)
    noisy = 0.5 + se * rng.standard_normal(8)
    s = shrink(noisy, se)
    # no evidence that the keys differ: every key at the precision-weighted mean
    if s.between_var == 0:
        np.testing.assert_allclose(s.posterior_mean, np.mean(noisy))
    assert np.ptp(s.posterior_mean) < np.ptp(noisy)
    spread = np.linspace(-3, 3, 8)
    t = shrink(spread, se)
    assert t.between_var > 0
    np.testing.assert_allclose(t.posterior_mean, spread, atol=0.1)  # far apart: kept
    draws = t.draws(2000, np.random.default_rng(1))
    np.testing.assert_allclose(draws.mean(axis=0), t.posterior_mean, atol=0.05)
    one = shrink([0.4], [0.1])
    assert one.posterior_mean.tolist() == [0.4]


def test_pilot_plan_reports_an_interval_and_shrinks():
    analysis = power_analysis(_panel(), units_per_cohort=[10, 40], method="analytic", seed=0)
    t = analysis.to_frame()
    assert (t["power_lower"] <= t["power"]).all() and (t["power"] <= t["power_upper"]).all()
    assert (t["power_upper"] > t["power_lower"]).all()
    stated = power_analysis(_panel(), units_per_cohort=[10, 40], method="analytic", effect=0.5,
                         seed=0).to_frame()
    assert stated["power_lower"].isna().all()


def test_plan_and_sensitivity_are_kept_and_read_alike(tmp_path, mpdta_panel):
    analysis = power_analysis(Assumptions(n_cohorts=2, n_checkpoints=4), units_per_cohort=[10, 20],
                       effect=0.5, seed=0)
    back = didmem.load_result(analysis.save(tmp_path / "plan.parquet"))
    assert isinstance(back, didmem.PowerAnalysis)
    pd.testing.assert_frame_equal(back.to_frame(), analysis.to_frame())
    assert (back.target, back.method, back.effect_source, back.mde_power, back.alpha) == \
        (analysis.target, analysis.method, analysis.effect_source, analysis.mde_power, analysis.alpha)
    assert "Power analysis: power for the instantaneous effect" in analysis.summary()
    assert back.summary() == analysis.summary()

    ev = didmem.DiDEstimator(base_period="universal", n_bootstrap=0).fit(mpdta_panel) \
        .aggregate("dynamic")
    s = didmem.sensitivity(ev, m=[0, 0.01], event_time=[0, 1])
    back = didmem.load_result(s.save(tmp_path / "s.parquet"))
    assert isinstance(back, didmem.SensitivityResult)
    pd.testing.assert_frame_equal(back.to_frame(), s.to_frame())
    pd.testing.assert_series_equal(back.target, s.target, check_names=False)
    assert (back.breakdown, back.alpha, back.variant, back.original) == \
        (s.breakdown, s.alpha, s.variant, s.original)
    assert "breakdown M" in s.summary() and back.summary() == s.summary()
    with pytest.raises(ParameterError, match="must end in '.parquet'"):
        s.save(tmp_path / "s.csv")
    assert not list(tmp_path.glob("*.partial"))


def test_saved_result_pretest_lists_what_it_stores(tmp_path, mpdta_panel):
    res = didmem.DiDEstimator(n_bootstrap=0).fit(mpdta_panel)
    saved = didmem.load_result(res.save(tmp_path / "r.parquet"))
    with pytest.raises(ParameterError, match="'method' parameter of pretrend_test .* 'chi2'"):
        saved.pretrend_test("chi2")
    with pytest.raises(ParameterError, match="stores these pre-tests: None \\(the default\\)"):
        saved.pretrend_test("max_t" if res.pretrend_test().method != "max_t" else "event")


def test_pretest_on_a_constant_outcome_says_why():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=8, n_never_treated=10,
                                           n_times=6, seed=0)
    df["y"] = 1.0
    res = didmem.DiDEstimator(n_bootstrap=0).fit(
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y"))
    for method in (None, "event", "max_t"):
        note = res.pretrend_test(method).note
        assert "none of the 3 pre-treatment cells has a standard error" in note
        assert "constant" in note


def test_pilots_that_cannot_be_resampled_are_refused():
    """A pilot with holes, of repeated cross-sections or of a later exposure cannot be
    resampled as complete first-exposure paths: refused with what to pass instead (before,
    a result with holes failed on a NaN outcome matrix and an exposure-2 pilot was planned
    as a first exposure)."""
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=12, n_never_treated=30,
                                           n_times=5, seed=0)
    holed = didmem.Panel(df.iloc[1:], unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    cross = didmem.Panel(df, unit=None, time="time", cohort="cohort", outcome="y")
    for pilot, what in ((holed, "has holes"), (cross, "repeated cross-sections")):
        with pytest.raises(ParameterError, match=what):
            power_analysis(pilot, units_per_cohort=10)
        fitted = didmem.DiDEstimator(n_bootstrap=0).fit(pilot)
        with pytest.raises(ParameterError, match="holes or repeated cross-sections"):
            power_analysis(fitted, units_per_cohort=10)
    second = df.assign(cohort_2=np.where(df["cohort"] == 1, 3.0, np.nan))
    panel = didmem.Panel(second, unit="unit", time="time", cohort=["cohort", "cohort_2"],
                         outcome="y")
    with pytest.raises(ParameterError, match="exposure 2"):
        power_analysis(panel, units_per_cohort=10, estimator=didmem.DiDEstimator(exposure=2))


@pytest.mark.parametrize("n_validation", [[1], 4])
def test_too_few_validation_units_name_n_validation(n_validation):
    """Before, n_validation=[1] reached the estimator inside the simulations and failed with
    its "never-treated group has 1 units" message, which names no argument of power_analysis."""
    with pytest.raises(ParameterError, match="n_validation=.*at least 5"):
        power_analysis(_panel(), units_per_cohort=10, n_validation=n_validation, estimator=FAST,
                    n_simulations=3)
