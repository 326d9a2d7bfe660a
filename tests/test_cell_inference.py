"""didmem.inference.cell_inference: one object owns the scale, draws, alpha and band rule."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from didmem import DiDEstimator
from didmem.inference.bands import bootstrap_se, normal_quantile, simultaneous_band
from didmem.inference.cell_inference import CellInference
from didmem.inference.linear import cell_covariance, combination_draws


@pytest.fixture(scope="module")
def fitted(small_panel):
    """R's rule (small_sample=False): bootstrap standard errors and the plain sup-t band."""
    return DiDEstimator(n_bootstrap=199, seed=3, small_sample=False).fit(small_panel)


@pytest.fixture(scope="module")
def corrected(small_panel):
    """The default: Welch standard errors, t critical values at the sup-t's level."""
    return DiDEstimator(n_bootstrap=199, seed=3).fit(small_panel)


def test_the_result_holds_one_inference_object(fitted):
    inf = fitted.inference
    assert isinstance(inf, CellInference)
    assert fitted.prepared is inf.prepared and fitted.bootstrap is inf.bootstrap
    assert inf.n_bootstrap == 199 and inf.multiplier == "rademacher" and inf.alpha == 0.05
    n, g = inf.prepared.n_units, inf.prepared.n_clusters or inf.prepared.n_units
    assert inf.scale == pytest.approx(n / np.sqrt(g))
    with pytest.raises(ValueError, match="read-only"):
        inf.stats["mu1"][0] = 1.0


def test_cells_band_is_the_sup_t_of_the_draws(fitted):
    inf = fitted.inference
    se = bootstrap_se(inf.bootstrap.cells, inf.scale)
    crit, kind = simultaneous_band(inf.bootstrap.cells, se, inf.alpha, inf.scale,
                                   at_least_normal=False)
    assert kind == fitted.band == "simultaneous"
    assert fitted.critical_value == pytest.approx(crit, rel=1e-12)
    finite = np.isfinite(fitted.analytic_std_errors)
    np.testing.assert_allclose(np.asarray(fitted.std_errors)[finite], se[finite], rtol=1e-12)


def test_aggregations_use_the_same_draws_and_rule(fitted):
    agg = fitted.aggregate("dynamic")
    from didmem.results.aggregations import build_aggregation

    spec = build_aggregation(fitted.prepared, fitted.cells, np.asarray(fitted.estimates), "dynamic")
    inf = fitted.inference
    draws = combination_draws(inf.prepared, inf.bootstrap, spec.weights, spec.omega)
    se = bootstrap_se(draws, inf.scale)
    crit, kind = simultaneous_band(draws[:, :-1], se[:-1], inf.alpha, inf.scale,
                                   at_least_normal=True)
    np.testing.assert_allclose(agg.std_errors, se[:-1], rtol=1e-12)
    assert agg.critical_value == pytest.approx(crit, rel=1e-12) and agg.band == kind
    assert agg.overall.std_error == pytest.approx(se[-1], rel=1e-12)


def test_without_draws_everything_is_pointwise(small_panel):
    res = DiDEstimator(n_bootstrap=0, alpha=0.1, small_sample=False).fit(small_panel)
    assert res.inference.bootstrap is None and res.inference.n_bootstrap == 0
    z = normal_quantile(0.95)
    assert res.band == "pointwise" and res.critical_value == pytest.approx(z)
    agg = res.aggregate("group")
    assert agg.band == "pointwise" and agg.critical_value == pytest.approx(z)
    assert agg.draws is None
    assert "pointwise" in res.inference.describe(res.critical_value, res.band)


def test_corrected_cells_take_t_quantiles_at_the_sup_t_level(corrected):
    inf = corrected.inference
    assert inf.multiplier == "normal" and inf.correction is not None
    analytic = np.asarray(corrected.analytic_std_errors)
    c_normal, kind = simultaneous_band(inf.bootstrap.cells, analytic, inf.alpha, inf.scale,
                                       at_least_normal=False)
    assert kind == corrected.band == "simultaneous"
    level = stats.norm.cdf(c_normal)
    finite = np.isfinite(analytic)
    df = inf.correction.df[finite]
    expected = stats.t.ppf(level, df)
    np.testing.assert_allclose(np.asarray(corrected.cell_critical_values)[finite], expected,
                               rtol=1e-9)
    assert corrected.critical_value == pytest.approx(expected.max(), rel=1e-9)
    np.testing.assert_allclose(np.asarray(corrected.std_errors)[finite],
                               np.sqrt(inf.correction.variance[finite]), rtol=1e-12)
    # every interval uses its own cell's multiplier
    frame = corrected.to_frame()
    half = (frame["ci_upper"] - frame["estimate"]).to_numpy()[finite]
    np.testing.assert_allclose(half, expected * frame["std_error"].to_numpy()[finite],
                               rtol=1e-9)


def test_corrected_aggregation_overall_is_a_t_interval(small_panel):
    res = DiDEstimator(n_bootstrap=0).fit(small_panel)
    agg = res.aggregate("simple")
    o = agg.overall
    z = normal_quantile(0.975)
    half = o.ci_upper - o.estimate
    assert half / o.std_error > z  # t quantile with finite degrees of freedom


def test_pretest_is_the_wald_statistic_of_the_pre_cells(fitted):
    pre = np.flatnonzero((fitted.cohorts > fitted.times)
                         & np.isfinite(fitted.analytic_std_errors))
    cov = cell_covariance(fitted.prepared, fitted.cells, fitted.stats, pre, fitted.influence)
    est = np.asarray(fitted.estimates)[pre]
    assert fitted.pretest.statistic == pytest.approx(est @ np.linalg.solve(cov, est), rel=1e-9)
    assert fitted.pretest.df == pre.size
    stat, df, p, note = fitted.inference.pretest(np.asarray(fitted.estimates), pre[:0])
    assert np.isnan(stat) and df == 0 and np.isnan(p) and note


def test_results_leave_inference_to_the_object():
    """Results import the inference object only, never its kernels (besides it: the light
    modules of its choices and of the pre-test's result, which a saved result reads without
    loading numba)."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("check_imports", root / "tools" / "check_imports.py")
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    graph = checker.import_graph(root / "didmem")
    for module in ("didmem.results.cells", "didmem.results.aggregations",
                   "didmem.results.common", "didmem.results.saving"):
        inference = {m for m in graph[module] if m.startswith("didmem.inference")}
        assert inference <= {"didmem.inference.cell_inference", "didmem.inference.choices",
                             "didmem.inference.pretrend.result"}, (module, inference)
