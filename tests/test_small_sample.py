"""The small-sample correction of the cells: Welch variances, degrees of freedom, t bands."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import didmem
from didmem.inference.small_sample import (
    cluster_correction, t_critical_values, t_to_normal, treated_variance, welch_correction,
)

from .conftest import staggered_frame


def panel_of(frame, **kw):
    args = dict(unit="unit", time="time", cohort="cohort", outcome="y")
    args.update(kw)
    return didmem.Panel(frame, **args)


def two_period_panel(treated, control):
    """One cohort treated at t = 2, never-treated controls; outcome 0 at t = 1."""
    y2 = np.concatenate([treated, control])
    n = y2.size
    cohort = np.r_[np.full(len(treated), 2.0), np.full(len(control), np.inf)]
    df = pd.DataFrame({"unit": np.repeat(np.arange(n), 2), "time": np.tile([1.0, 2.0], n),
                       "cohort": np.repeat(cohort, 2),
                       "y": np.column_stack([np.zeros(n), y2]).ravel()})
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


def test_welch_correction_by_hand():
    # plug-in parts 2/3 (n = 3) and 4/5 (n = 5): unbiased parts 1 and 1;
    # df = (1 + 1)^2 / (1/2 + 1/4) = 16/3
    v, df = welch_correction(np.array([2 / 3]), np.array([0.8]), np.array([3]), np.array([5]))
    assert v[0] == pytest.approx(2.0, rel=1e-14)
    assert df[0] == pytest.approx(16 / 3, rel=1e-14)
    # a single treated unit contributes no term to the df; zero variance gives NaN df
    v, df = welch_correction(np.array([0.0, 0.0]), np.array([0.5, 0.0]), np.array([1, 4]),
                             np.array([11, 4]))
    assert v[0] == pytest.approx(0.55) and df[0] == pytest.approx(10.0)
    assert v[1] == 0 and np.isnan(df[1])


def test_cell_matches_scipy_welch_t_test():
    treated = np.array([1.2, 0.4, 2.5, 1.9, 0.1, 1.4])
    control = np.array([0.3, -0.2, 0.8, 0.1, 1.1, -0.6, 0.4, 0.0, 0.9])
    panel = two_period_panel(treated, control)
    res = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    ref = stats.ttest_ind(treated, control, equal_var=False)
    t = res.estimates[0] / res.std_errors[0]
    assert t == pytest.approx(ref.statistic, rel=1e-10)
    assert res.small_sample.df[0] == pytest.approx(ref.df, rel=1e-10)
    frame = res.to_frame()
    half = (frame["ci_upper"] - frame["estimate"]).iloc[0]
    assert half == pytest.approx(stats.t.ppf(0.975, ref.df) * res.std_errors[0], rel=1e-10)
    # R's rule: plug-in variance and the normal quantile
    r = didmem.DiDEstimator(n_bootstrap=0, small_sample=False).fit(panel)
    plug_in = np.sqrt(treated.var() / treated.size + control.var() / control.size)
    assert r.std_errors[0] == pytest.approx(plug_in, rel=1e-12)
    assert r.cell_critical_values is None and r.small_sample is None
    assert (r.to_frame()["ci_upper"] - r.to_frame()["estimate"]).iloc[0] == pytest.approx(
        1.959963984540054 * plug_in, rel=1e-12)


def test_small_sample_false_is_the_uncorrected_route(small_panel):
    ana = didmem.DiDEstimator(n_bootstrap=0, small_sample=False).fit(small_panel)
    default = didmem.DiDEstimator(n_bootstrap=0).fit(small_panel)
    # the uncorrected analytic standard errors are kept beside the corrected ones
    np.testing.assert_array_equal(ana.std_errors, ana.analytic_std_errors)
    np.testing.assert_array_equal(default.analytic_std_errors, ana.analytic_std_errors)
    assert np.all(default.std_errors > ana.std_errors)
    np.testing.assert_allclose(default.std_errors**2 / ana.std_errors**2,
                               default.small_sample.factor, rtol=1e-12)
    boot = didmem.DiDEstimator(n_bootstrap=300, seed=1, small_sample=False).fit(small_panel)
    assert boot.bootstrap.multiplier == "rademacher" and boot.cell_critical_values is None
    assert not np.array_equal(boot.std_errors, boot.analytic_std_errors)  # IQR of the draws


def test_factor_between_smallest_and_largest_group_factor(small_panel):
    res = didmem.DiDEstimator(n_bootstrap=0).fit(small_panel)
    f = res.small_sample.factor
    # 30 treated, 60 never-treated units per cell: a weighted mean of 30/29 and 60/59
    assert np.all((f >= 60 / 59 - 1e-12) & (f <= 30 / 29 + 1e-12))
    df = res.small_sample.df
    assert np.all((df >= 29 - 1e-9) & (df <= 29 + 59 + 1e-9))


def test_treated_variance_by_hand_and_on_the_influence_route():
    frame = staggered_frame(seed=4, n_units=90, n_times=5)
    res = didmem.DiDEstimator(n_bootstrap=0).fit(panel_of(frame))
    got = treated_variance(res.prepared, res.cells, res.stats)
    wide = frame.pivot(index="unit", columns="time", values="y")
    cohort = frame.groupby("unit")["cohort"].first()
    f = res.to_frame()
    for c, row in f.iterrows():
        d = wide.loc[cohort == row["cohort"], row["time"]] - wide.loc[cohort == row["cohort"],
                                                                     row["base_time"]]
        psi = (d - d.mean()) / d.size
        assert got[c] == pytest.approx(float((psi**2).sum()), rel=1e-9)
    # generic route (a covariate): the cohort's rows of the dense influence matrix
    frame["x"] = np.repeat(np.random.default_rng(1).normal(size=90), 5)
    cov = didmem.DiDEstimator(n_bootstrap=0, est_method="reg").fit(
        panel_of(frame, covariates=["x"]))
    dense = cov.influence.dense()
    expect = np.array([np.sum(dense[cov.prepared.starts[k]:cov.prepared.starts[k + 1], c] ** 2)
                       for c, k in enumerate(cov.cells.k)])
    np.testing.assert_allclose(treated_variance(cov.prepared, cov.cells, cov.stats, cov.influence),
                               expect, rtol=1e-12)


def test_clusters_use_cr1():
    v, df = cluster_correction(np.array([1.0, 2.0]), 40)
    np.testing.assert_allclose(v, [40 / 39, 80 / 39], rtol=1e-14)
    np.testing.assert_array_equal(df, [39.0, 39.0])
    frame = staggered_frame(seed=9, n_units=120, n_times=5, clusters=12)
    res = didmem.DiDEstimator(n_bootstrap=0).fit(panel_of(frame, cluster="cl"))
    r = didmem.DiDEstimator(n_bootstrap=0, small_sample=False).fit(panel_of(frame, cluster="cl"))
    np.testing.assert_allclose(res.std_errors**2, r.std_errors**2 * 12 / 11, rtol=1e-12)
    np.testing.assert_allclose(res.cell_critical_values, stats.t.ppf(0.975, 11), rtol=1e-10)


def test_t_quantile_mapping():
    c = 3.1
    level = stats.norm.cdf(c)
    crit = t_critical_values(level, np.array([5.0, 30.0, 1e7, np.inf]))
    assert crit[0] > crit[1] > crit[2]
    assert crit[2] == pytest.approx(c, rel=1e-5) and crit[3] == pytest.approx(c, rel=1e-14)
    np.testing.assert_allclose(crit[:2], stats.t.ppf(level, [5, 30]), rtol=1e-10)
    # t_to_normal inverts it, also far in the tail
    np.testing.assert_allclose(t_to_normal(crit[:3], np.array([5.0, 30.0, 1e7])), c, rtol=1e-9)
    assert t_to_normal(np.array([40.0]), np.array([3.0]))[0] == pytest.approx(
        -stats.norm.ppf(stats.t.sf(40.0, 3)), rel=1e-9)


def test_band_uses_each_cells_critical_value(small_panel):
    res = didmem.DiDEstimator(n_bootstrap=400, seed=2).fit(small_panel)
    assert res.band == "simultaneous" and res.bootstrap.multiplier == "normal"
    f = res.to_frame()
    np.testing.assert_allclose(f["ci_upper"] - f["estimate"],
                               res.cell_critical_values * res.std_errors, rtol=1e-12)
    assert res.critical_value == pytest.approx(np.nanmax(res.cell_critical_values))
    # each cell's value is the t quantile, at its df, of one common pointwise level
    levels = stats.t.cdf(res.cell_critical_values, res.small_sample.df)
    np.testing.assert_allclose(levels, levels[0], rtol=1e-9)
    assert "small-sample" in res.summary()


def test_multiplier_choice_is_validated(small_panel):
    with pytest.raises(didmem.errors.ParameterError, match="multiplier"):
        didmem.DiDEstimator(multiplier="webb").fit(small_panel)
    res = didmem.DiDEstimator(n_bootstrap=50, multiplier="rademacher", seed=0).fit(
        small_panel)
    assert res.bootstrap.multiplier == "rademacher"


def test_aggregations_are_corrected_alike(small_panel):
    from didmem.inference.small_sample import block_welch

    res = didmem.DiDEstimator(n_bootstrap=300, seed=4).fit(small_panel)
    inst = res.aggregate("instantaneous")
    f = res.to_frame()
    cells = f[f["time"] == f["cohort"]].set_index("cohort")
    # a single-cell key is its cell, with the cell's Welch standard error
    np.testing.assert_allclose(inst.std_errors, cells.loc[inst.keys, "std_error"], rtol=1e-10)
    r = didmem.DiDEstimator(n_bootstrap=300, seed=4, small_sample=False).fit(small_panel)
    assert inst.critical_value > r.aggregate("instantaneous").critical_value
    # block_welch by hand: parts 2/3 and 4/5 with 3 and 5 units, as welch_correction
    v, df = block_welch(np.array([[2 / 3], [0.8]]), np.array([3, 5]))
    assert v[0] == pytest.approx(2.0) and df[0] == pytest.approx(16 / 3)


@pytest.mark.parametrize("kw, says", [
    ({}, "small-sample correction (Welch), not R did's bootstrap-IQR one"),
    ({"small_sample": False, "n_bootstrap": 99}, "bootstrap standard error (IQR of the draws)"),
    ({"small_sample": False, "n_bootstrap": 0}, "analytic (influence-function) standard error, "
                                                "as R did's bstrap=FALSE"),
])
def test_summaries_say_which_standard_error_the_column_holds(small_panel, tmp_path, kw, says):
    """Issue 23: the corrected std_error can be below R's bootstrap-IQR one while the band is
    wider; the cells' and the aggregations' summaries (also after saving) say which it is."""
    res = didmem.DiDEstimator(seed=0, **kw).fit(small_panel)
    assert says in res.summary()
    for kind in ("dynamic", "simple"):
        assert says in res.aggregate(kind).summary()
    path = res.save(tmp_path / "r.parquet")
    assert says in didmem.load_result(path).aggregate("dynamic").summary()
