"""Pre-tests of parallel trends: event-time Wald, max-|t| and R's Wald."""

import warnings

import numpy as np
import pytest
from scipy import stats

import didmem
from didmem.errors import ParameterError
from didmem.inference.pretrend.statistics import linear_drift, max_t_test, wald_power, wald_test


@pytest.fixture(scope="module")
def fitted(small_panel_module):
    return didmem.DiDEstimator(n_bootstrap=400, seed=5).fit(small_panel_module)


@pytest.fixture(scope="module")
def small_panel_module():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=5, units_per_cohort=30, n_never_treated=80,
                                           n_times=8, seed=11)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


def test_wald_method_is_r_pretest(fitted):
    w = fitted.pretrend_test(method="wald")
    pre = fitted.pretest
    assert w.method == "wald"
    assert (w.statistic, w.pvalue, w.df) == (pre.statistic, pre.pvalue, pre.df)


def test_default_is_the_event_time_wald(fitted, small_panel_module):
    t = fitted.pretrend_test()
    assert t.method == "event" and t == fitted.pretrend_test("event")
    assert 0 <= t.pvalue <= 1 and t.df == t.n_restrictions
    # by hand, on R's rule: event-time aggregates e < 0 and their covariance
    r = didmem.DiDEstimator(n_bootstrap=0, small_sample=False).fit(small_panel_module)
    agg = r.aggregate("dynamic")
    keep = agg.keys < 0
    est = agg.estimates[keep]
    cov = agg.vcov().to_numpy()[np.ix_(keep, keep)]
    stat = est @ np.linalg.solve(cov, est)
    e = r.pretrend_test()
    assert e.statistic == pytest.approx(stat, rel=1e-9)
    assert e.pvalue == pytest.approx(stats.chi2.sf(stat, keep.sum()), rel=1e-9)
    assert e.df_denominator is None
    # the default scales the covariance by n / (n - 1) and refers to Hotelling's F
    n = r.n_units
    p = int(keep.sum())
    assert t.statistic == pytest.approx(stat * (n - 1) / n, rel=1e-9)
    assert t.df_denominator == n - p
    assert t.pvalue == pytest.approx(
        stats.f.sf(t.statistic * (n - p) / (p * (n - 1)), p, n - p), rel=1e-9)


def test_max_t_uses_the_fits_draws(fitted, small_panel_module):
    m = fitted.pretrend_test("max_t")
    f = fitted.to_frame()
    pre = ~f["post"].to_numpy()
    assert m.method == "max_t" and m.df is None and m.n_restrictions == int(pre.sum())
    # p-value from the same draws, studentised by the uncorrected analytic SEs
    raw = fitted.analytic_std_errors[pre]
    boot = np.max(np.abs(fitted.bootstrap.cells[:, pre] / raw), axis=1)
    assert m.pvalue == pytest.approx((1 + np.sum(boot >= m.statistic)) / (boot.size + 1))
    # without draws in the fit, 999 fresh ones seeded by seed: reproducible
    a = didmem.DiDEstimator(n_bootstrap=0, seed=3).fit(small_panel_module)
    assert a.pretrend_test("max_t") == a.pretrend_test("max_t")
    assert a.pretrend_test("max_t").statistic == pytest.approx(m.statistic, rel=1e-12)


def test_unknown_method_is_refused(fitted):
    with pytest.raises(ParameterError, match="'method' of pretrend_test must be one of"):
        fitted.pretrend_test("f_test")


def test_summary_leads_with_the_calibrated_test(fitted):
    text = fitted.summary()
    assert text.index("event-time Wald") < text.index("R did's Wald")
    assert "power" in text


def test_wald_test_and_power_formulas():
    stat, p, df2, note = wald_test(np.array([1.0, 2.0]), np.diag([1.0, 4.0]))
    assert stat == 2.0 and p == pytest.approx(np.exp(-1.0)) and df2 is None and note == ""
    stat, p, df2, _ = wald_test(np.array([1.0, 2.0]), np.diag([1.0, 4.0]), n_obs=12)
    assert df2 == 10 and p == pytest.approx(stats.f.sf(2.0 * 10 / (2 * 11), 2, 10))
    assert np.isnan(wald_test(np.ones(2), np.ones((2, 2)))[0])  # singular
    assert "do not exceed" in wald_test(np.ones(3), np.eye(3), n_obs=3)[3]
    assert wald_power(np.zeros(3), np.eye(3)) == pytest.approx(0.05)
    # one restriction: the power of a two-sided z test at mean 2.5 sd
    z = stats.norm.isf(0.025)
    expect = stats.norm.sf(z - 2.5) + stats.norm.cdf(-z - 2.5)
    assert wald_power(np.array([2.5]), np.eye(1)) == pytest.approx(expect, rel=1e-9)
    assert wald_power(np.array([2.5]), np.eye(1), n_obs=30) < expect  # F: heavier tails
    np.testing.assert_allclose(linear_drift([3, 4, 2], [2, 1, -1], 0.5), [0.5, 1.5, np.nan])


def test_max_t_formula_by_hand():
    draws = np.array([[1.0, 0.0], [0.0, -3.0], [2.5, 0.5], [0.1, 0.2]])
    stat, p = max_t_test(np.array([2.0, -1.0]), np.array([1.0, 1.0]), draws, np.ones(2))
    # maxima of the draws: 1, 3, 2.5, 0.2; two reach 2
    assert stat == 2.0 and p == pytest.approx(3 / 5)
    # with df, |t| is first mapped to the normal value of the same tail area
    stat_df, _ = max_t_test(np.array([2.0]), np.array([1.0]), draws[:, :1], np.ones(1),
                            df=np.array([4.0]))
    assert stat_df == pytest.approx(stats.norm.isf(stats.t.sf(2.0, 4)), rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("units,never,n_cohorts", [(30, 100, 8), (100, 400, 20)])
def test_pretests_hold_their_size(units, never, n_cohorts):
    """Rejection rates at 5% under parallel trends on two designs (200 replications each:
    Monte Carlo sd 1.5 points); the full study is benchmarks/pretest_size_power.py."""
    rng = np.random.default_rng([units, n_cohorts])
    reps, rejected = 200, {"event": 0, "max_t": 0}
    for _ in range(reps):
        df, _ = didmem.datasets.simulate_panel(
            n_cohorts=n_cohorts, units_per_cohort=units, n_never_treated=never,
            noise_sd=1.0, seed=int(rng.integers(2**62)))
        panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", didmem.DidmemWarning)
            res = didmem.DiDEstimator(n_bootstrap=400,
                                      seed=int(rng.integers(2**62))).fit(panel)
        for m in rejected:
            rejected[m] += res.pretrend_test(m).pvalue < 0.05
    for m, k in rejected.items():
        assert 0.015 <= k / reps <= 0.09, (m, k / reps)


def test_report_leads_with_the_calibrated_test(fitted):
    from didmem.report import render_report

    text = render_report({"m": fitted}, figures=[])
    assert "event-time Wald" in text and "power" in text
    assert text.index("event-time Wald") < text.index("Wald test over all pre-treatment cells")


def test_saved_result_keeps_the_calibrated_test(fitted, tmp_path):
    pytest.importorskip("pyarrow")
    loaded = didmem.load_result(fitted.save(tmp_path / "r.parquet"))
    assert loaded.pretrend_test() == fitted.pretrend_test()
    assert loaded.pretrend_test("wald").statistic == fitted.pretest.statistic
    with pytest.raises(ValueError, match="fit the panel again"):
        loaded.pretrend_test("max_t")
