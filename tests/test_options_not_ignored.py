"""Regression tests (issue 11): options that were ignored without a word now warn or refuse."""

import warnings

import numpy as np
import pandas as pd
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
        boot = didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(panel)
    assert boot.band == "simultaneous"
    assert didmem.DiDEstimator(n_bootstrap=99, seed=0, cband=False).fit(
        panel).band == "pointwise"


def test_cband_with_two_periods_warns():
    panel = _panel(n_times=2, n_cohorts=1)
    assert panel.n_times == 2
    with pytest.warns(didmem.InferenceWarning, match="only two periods"):
        res = didmem.DiDEstimator(n_bootstrap=99, seed=0, cband=True).fit(panel)
    assert res.band == "pointwise"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(panel)


@pytest.mark.parametrize("seed", [-1, True, 1.5, "0"])
@pytest.mark.parametrize("cls", [didmem.DiDEstimator, didmem.DifferenceEstimator])
def test_bad_random_state_is_refused(cls, seed):
    with pytest.raises(didmem.ParameterError, match="'seed' parameter.*non-negative"):
        cls(n_bootstrap=9, seed=seed).fit(_panel())


def test_good_random_states_pass():
    panel = _panel()
    for seed in (0, np.int64(3), np.random.default_rng(0), None):
        didmem.DiDEstimator(n_bootstrap=9, seed=seed, cband=False).fit(panel)


def test_influence_estimator_refuses_negative_seed():
    with pytest.raises(didmem.ParameterError, match="seed"):
        didmem.InfluenceEstimator(seed=-1)._validated_params()


@pytest.fixture(scope="module")
def fitted():
    return didmem.DiDEstimator(n_bootstrap=0).fit(_panel())


@pytest.mark.parametrize("kind, options", [
    ("instantaneous", {"min_e": 1}), ("instantaneous", {"max_e": 5}),
    ("instantaneous", {"max_e": -1}), ("residual", {"min_e": 0}), ("residual", {"max_e": 1}),
    ("residual", {"balance_e": 1}), ("group", {"min_e": 1}), ("simple", {"time": 3.0}),
    ("dynamic", {"time": 3.0}), ("calendar", {"max_e": 1}),
])
def test_aggregation_options_it_would_ignore_are_refused(fitted, kind, options):
    name = next(iter(options))
    with pytest.raises(didmem.ParameterError, match=f"{kind!r} aggregation .* not use {name}"):
        fitted.aggregate(kind, **options)


def test_aggregation_options_that_apply_still_work(fitted):
    last = float(fitted.to_frame()["time"].max())
    fitted.aggregate("residual", time=last)
    fitted.aggregate("group", max_e=1)
    fitted.aggregate("simple", max_e=1)
    assert fitted.aggregate("dynamic", min_e=-1, max_e=1, balance_e=1).keys.tolist() == [-1, 0, 1]


def _truth():
    df, truth = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20,
                                               n_never_treated=40, seed=1)
    panel = didmem.Panel(df.assign(z=df["y"]), unit="unit", time="time", cohort="cohort",
                         outcome=["y", "z"])
    return panel, truth[["cohort", "time", "tau"]]


def test_compare_refuses_a_result_of_another_outcome():
    panel, truth = _truth()
    res_y = didmem.DiDEstimator(n_bootstrap=0, outcome="y").fit(panel)
    res_z = didmem.DiDEstimator(n_bootstrap=0, outcome="z").fit(panel)
    both = pd.concat([truth.assign(metric="y"), truth.assign(metric="z", tau=0.0)])
    with pytest.raises(didmem.ParameterError, match="'z' \\(outcome 'z'\\)"):
        didmem.compare({"y": res_y, "z": res_z}, truth=both, metric="y")
    with pytest.raises(didmem.ParameterError, match="truth is of metric 'z'"):
        didmem.compare({"y": res_y}, truth=both[both["metric"] == "z"])
    table = didmem.compare({"y": res_y}, truth=both, metric="y")
    assert table.loc[0, "n_cells"] > 0
    didmem.compare({"y": res_y}, truth=truth)  # a truth without a metric column is trusted


def test_lab_directory_with_a_deleted_file_says_what_is_missing(tmp_path):
    import json

    from didmem.lab.outputs import MANIFEST, LabDirectory

    settings = {"seed": 0, "n_steps": 10}
    (tmp_path / "truth.parquet").write_bytes(b"x")
    (tmp_path / MANIFEST).write_text(json.dumps(
        {"settings": settings, "files": {"panel.parquet": "0" * 64, "truth.parquet": "1" * 64}}))
    lab = LabDirectory(tmp_path)
    assert not lab.is_complete_run_of(settings)
    with pytest.raises(didmem.ParameterError, match=r"incomplete \(missing: \['panel.parquet'\]"):
        lab.prepare(settings, overwrite=False)
    with pytest.raises(didmem.ParameterError, match=r"settings that differ: \['seed'\]"):
        lab.prepare({"seed": 1, "n_steps": 10}, overwrite=False)


def test_plan_design_refuses_a_negative_seed():
    from didmem.power import power_analysis

    with pytest.raises(didmem.ParameterError, match="'seed' parameter of power_analysis"):
        power_analysis(_panel(), units_per_cohort=[10], n_simulations=10, seed=-1)
