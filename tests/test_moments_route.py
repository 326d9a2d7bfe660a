"""The moments route gives the in-memory DiDEstimator's result: cells, standard errors,
pre-tests and aggregations equal to 1e-9 without draws; with Gaussian draws the same
analytic parts and a band of the same kind. A parquet folder gives the panel's result."""

import warnings

import numpy as np
import pytest

import didmem
from didmem.errors import ParameterError
from didmem.estimators._moments_route import fit_dataset, fit_moments, panel_moments
from didmem.panel.scan import ParquetPaths

from .test_moments import SETTINGS, _assert_close
from .test_panel_scan import COLUMNS, _write

AGGREGATIONS = ("simple", "group", "dynamic", "calendar")


@pytest.fixture(scope="module")
def simulated():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=5, units_per_cohort=25, n_never_treated=40,
                                           n_times=7, seed=12)
    return df


def _compare(res, ref):
    for col in ("estimate", "std_error", "ci_lower", "ci_upper"):
        _assert_close(res.to_frame()[col], ref.to_frame()[col])
    _assert_close([res.pretest.statistic, res.pretest.pvalue],
                  [ref.pretest.statistic, ref.pretest.pvalue])
    a, b = res.pretrend_test("event"), ref.pretrend_test("event")  # the default pre-test
    _assert_close([a.statistic, a.pvalue, a.power], [b.statistic, b.pvalue, b.power])
    a, b = res.pretrend_test("wald"), ref.pretrend_test("wald")
    _assert_close([a.statistic, a.pvalue], [b.statistic, b.pvalue])
    for kind in AGGREGATIONS:
        a, b = res.aggregate(kind), ref.aggregate(kind)
        _assert_close([a.overall.estimate, a.overall.std_error],
                      [b.overall.estimate, b.overall.std_error])
        for col in ("estimate", "std_error"):
            _assert_close(a.to_frame()[col], b.to_frame()[col])


@pytest.mark.parametrize("control_group, base_period", SETTINGS)
@pytest.mark.parametrize("small_sample", [False, True])
def test_route_equals_the_in_memory_fit(simulated, mpdta_panel, control_group, base_period,
                                        small_sample):
    panel = didmem.Panel(simulated, **COLUMNS)
    for data in (panel, mpdta_panel):
        est = didmem.DiDEstimator(control_group=control_group, base_period=base_period,
                                  n_bootstrap=0, small_sample=small_sample)
        ref = est.fit(data)
        res = fit_moments(est, panel_moments(data), outcome=data.outcomes[0],
                          never_treated_code=data.never_treated_code)
        assert res.band == ref.band == "pointwise"
        _compare(res, ref)


def test_route_with_gaussian_draws(simulated):
    panel = didmem.Panel(simulated, **COLUMNS)
    est = didmem.DiDEstimator(n_bootstrap=300, seed=3)  # small_sample: normal draws
    ref = est.fit(panel)
    res = fit_moments(est, panel_moments(panel), outcome="y")
    assert res.band == ref.band == "simultaneous"
    assert res.inference.bootstrap.n_draws == 300
    _assert_close(res.to_frame()["std_error"], ref.to_frame()["std_error"])  # Welch: analytic
    agg = res.aggregate("dynamic")
    assert agg.to_frame()["std_error"].notna().all()
    a, b = res.pretrend_test("max_t"), ref.pretrend_test("max_t")  # from the fits' own draws
    assert a.method == b.method == "max_t" and 0 <= a.pvalue <= 1
    assert a.statistic == pytest.approx(b.statistic, rel=1e-9)  # the largest |t|: no draws
    assert res.inference.bootstrap.multiplier == "normal"


def test_route_refuses_what_moments_cannot_give(simulated):
    panel = didmem.Panel(simulated, **COLUMNS)
    est = didmem.DiDEstimator(n_bootstrap=100, small_sample=False)  # Rademacher by default
    with pytest.raises(ParameterError, match="Gaussian multipliers only"):
        fit_moments(est, panel_moments(panel), outcome="y")


def test_folder_result_equals_the_panels(tmp_path, simulated):
    folder = _write(tmp_path / "data", simulated, n_files=8)
    est = didmem.DiDEstimator(n_bootstrap=0, control_group="not_yet_treated")
    res = fit_dataset(est, ParquetPaths(folder, **COLUMNS, memory_bytes=2000))
    _compare(res, est.fit(didmem.Panel(simulated, **COLUMNS)))


def test_panel_moments_refuses_what_they_cannot_hold(simulated):
    df = simulated.copy()
    df["x"] = np.random.default_rng(0).normal(size=len(df))
    with pytest.raises(ParameterError, match="has covariates"):
        panel_moments(didmem.Panel(df, **COLUMNS, covariates=["x"]))
    with pytest.raises(ParameterError, match="has holes"):
        panel_moments(didmem.Panel(df.drop(index=[3]), **COLUMNS, balance="keep"))


def test_route_with_sampling_weights(simulated):
    df = simulated.copy()
    w = np.random.default_rng(4).uniform(0.5, 2.0, df["unit"].nunique())
    df["w"] = w[df["unit"].to_numpy()]
    panel = didmem.Panel(df, **COLUMNS, weights="w")
    for cg in ("never_treated", "not_yet_treated"):
        est = didmem.DiDEstimator(n_bootstrap=0, control_group=cg)
        _compare(fit_moments(est, panel_moments(panel), outcome="y"), est.fit(panel))


def test_did_fit_takes_a_scanned_folder(tmp_path, simulated):
    folder = _write(tmp_path / "data", simulated, n_files=4)
    data = didmem.Panel.scan(folder, **COLUMNS)
    est = didmem.DiDEstimator(n_bootstrap=0)
    _compare(est.fit(data), est.fit(didmem.Panel(simulated, **COLUMNS)))
    with pytest.raises(ParameterError, match="Gaussian multipliers only"):
        didmem.DiDEstimator(n_bootstrap=10, small_sample=False).fit(data)


@pytest.mark.parametrize("control_group", ["never_treated", "not_yet_treated"])
def test_route_with_anticipation(simulated, control_group):
    panel = didmem.Panel(simulated, **COLUMNS)
    est = didmem.DiDEstimator(n_bootstrap=0, anticipation=1, control_group=control_group)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", didmem.DataDroppedWarning)  # both routes drop alike
        _compare(fit_moments(est, panel_moments(panel), outcome="y"), est.fit(panel))
