"""The estimator contract, pre-processing rules, inference options and results."""

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem import DiDEstimator, DifferenceEstimator, EstimationError, ParameterError

from .conftest import staggered_frame


def panel_of(frame, **kw):
    args = dict(unit="unit", time="time", cohort="cohort", outcome="y")
    args.update(kw)
    return didmem.Panel(frame, **args)


def test_parameter_errors_have_one_shape(small_panel):
    with pytest.raises(ParameterError) as err:
        DiDEstimator(control_group="never").fit(small_panel)
    assert str(err.value) == ("The 'control_group' parameter of DiDEstimator must be one of "
                              "{'never_treated', 'not_yet_treated'}. Got 'never'.")
    with pytest.raises(ParameterError, match=r"'n_bootstrap' parameter of DiDEstimator must be an integer in \[0, inf\]. Got -1"):
        DiDEstimator(n_bootstrap=-1).fit(small_panel)
    with pytest.raises(ParameterError, match="'alpha' parameter of DifferenceEstimator"):
        DifferenceEstimator(alpha=1.5).fit(small_panel)
    with pytest.raises(ParameterError, match="needs a didmem.Panel"):
        DiDEstimator().fit(pd.DataFrame())


def test_constructor_stores_and_estimator_keeps_no_state(small_panel):
    est = DiDEstimator(n_bootstrap=0, base_period="universal")
    before = est.get_params()
    a = est.fit(small_panel)
    b = est.fit(small_panel)
    assert est.get_params() == before
    assert not any(k.endswith("_") for k in vars(est))
    np.testing.assert_array_equal(a.estimates, b.estimates)
    assert est.with_params(base_period="varying").base_period == "varying"
    assert "universal" in repr(est)


def test_result_is_immutable_and_records_parameters(small_panel):
    res = DiDEstimator(n_bootstrap=0).fit(small_panel)
    with pytest.raises(ValueError):
        res.estimates[0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.critical_value = 3.0
    with pytest.raises(TypeError):
        res.params["alpha"] = 0.1
    assert res.params["control_group"] == "never_treated" and res.params["n_bootstrap"] == 0
    frame = res.to_frame()
    for col in ["cohort", "time", "estimate", "std_error", "ci_lower", "ci_upper", "significant"]:
        assert col in frame.columns
    profile = res.profile()
    assert profile.shape == (4, 5)  # 4 cohorts x times 2..6 (varying base)
    assert "Sign convention" in res.summary() and "<div>" in res._repr_html_()


def test_contract_snippet_runs(mpdta_panel):
    res = DiDEstimator(control_group="never_treated", base_period="varying", anticipation=0,
                       n_bootstrap=0, seed=0).fit(mpdta_panel)
    agg = res.aggregate("dynamic")
    assert list(agg.to_frame().columns[:2]) == ["event_time", "estimate"]
    assert np.isfinite(agg.overall.estimate) and np.isfinite(agg.overall.std_error)
    pre = res.pretest
    assert np.isfinite(pre.statistic) and pre.df == 5 and 0 < pre.pvalue < 1
    keys = {"group": "cohort", "instantaneous": "cohort", "residual": "cohort",
            "persistent": "event_time", "calendar": "time"}
    for kind, key in keys.items():
        assert res.aggregate(kind).to_frame().columns[0] == key


def test_sign_flip(small_panel):
    up = DiDEstimator(n_bootstrap=50, seed=1).fit(small_panel)
    down = DiDEstimator(n_bootstrap=50, seed=1, lower_is_better=True).fit(small_panel)
    np.testing.assert_allclose(down.estimates, -up.estimates, atol=1e-12)
    np.testing.assert_allclose(down.std_errors, up.std_errors, rtol=1e-12)
    assert down.lower_is_better and "lower is better" in down.summary()


def test_bootstrap_reproducible_and_seed_dependent(small_panel):
    # R's route: bootstrap standard errors
    a = DiDEstimator(n_bootstrap=200, seed=7, small_sample=False).fit(small_panel)
    b = DiDEstimator(n_bootstrap=200, seed=7, small_sample=False).fit(small_panel)
    c = DiDEstimator(n_bootstrap=200, seed=8, small_sample=False).fit(small_panel)
    np.testing.assert_array_equal(a.std_errors, b.std_errors)
    assert a.critical_value == b.critical_value
    assert not np.array_equal(a.std_errors, c.std_errors)
    gen = DiDEstimator(n_bootstrap=200, seed=np.random.default_rng(7),
                       small_sample=False).fit(small_panel)
    np.testing.assert_array_equal(gen.std_errors, a.std_errors)
    # the default: analytic (Welch) standard errors, the band's critical values from the draws
    d = DiDEstimator(n_bootstrap=200, seed=7).fit(small_panel)
    e = DiDEstimator(n_bootstrap=200, seed=7).fit(small_panel)
    f = DiDEstimator(n_bootstrap=200, seed=8).fit(small_panel)
    np.testing.assert_array_equal(d.cell_critical_values, e.cell_critical_values)
    np.testing.assert_array_equal(d.std_errors, f.std_errors)
    assert not np.array_equal(d.cell_critical_values, f.cell_critical_values)


def test_universal_base_period(small_panel):
    uni = DiDEstimator(base_period="universal", n_bootstrap=100, seed=0).fit(small_panel)
    var = DiDEstimator(base_period="varying", n_bootstrap=0).fit(small_panel)
    f, g = uni.to_frame(), var.to_frame()
    ref = f[f["time"] == f["cohort"] - 1]
    assert len(ref) == 4 and (ref["estimate"] == 0).all() and ref["std_error"].isna().all()
    assert not ref["significant"].any()
    post_u = f[f["post"]].set_index(["cohort", "time"])["estimate"]
    post_v = g[g["post"]].set_index(["cohort", "time"])["estimate"]
    np.testing.assert_allclose(post_u, post_v.loc[post_u.index], rtol=1e-12)
    assert np.isfinite(uni.critical_value)


def test_anticipation_moves_the_base_period():
    frame = staggered_frame(seed=2, n_units=90, n_times=6)
    with pytest.warns(didmem.DataDroppedWarning, match="plus anticipation 1"):
        res = DiDEstimator(anticipation=1, n_bootstrap=0).fit(panel_of(frame))
    f = res.to_frame()
    post = f[f["post"]]
    # base = last time t with t + 1 < g
    times = np.array([1.0, 2.0, 4.0, 5.0, 7.0, 8.0])
    expected = [times[times + 1 < g][-1] for g in post["cohort"]]
    np.testing.assert_array_equal(post["base_time"], expected)


def test_late_cohorts_count_as_never_treated():
    frame = staggered_frame(seed=4, n_units=60, n_times=5)
    late = frame.assign(cohort=frame["cohort"].replace(np.inf, 99.0))
    with pytest.warns(didmem.DataDroppedWarning, match="after the last time 7"):
        a = DiDEstimator(n_bootstrap=0).fit(panel_of(late))
    b = DiDEstimator(n_bootstrap=0).fit(panel_of(frame))
    np.testing.assert_array_equal(a.estimates, b.estimates)


def test_units_treated_in_first_period_are_dropped():
    frame = staggered_frame(seed=5, n_units=60, n_times=5)
    first = frame["unit"] < 6
    frame.loc[first, "cohort"] = 1.0
    with pytest.warns(didmem.DataDroppedWarning, match="dropped 6 units of cohorts 1, treated by the first period 1"):
        res = DiDEstimator(n_bootstrap=0).fit(panel_of(frame))
    assert res.n_units == 54 and 1.0 not in res.cohorts


def test_never_treated_required_and_not_yet_fallback():
    frame = staggered_frame(seed=6, n_units=60, n_times=6)
    frame = frame[np.isfinite(frame["cohort"])]
    panel = panel_of(frame)
    with pytest.raises(EstimationError, match="needs never-treated units, but every one of the"):
        DiDEstimator(n_bootstrap=0).fit(panel)
    with pytest.warns(didmem.DataDroppedWarning, match="latest cohort .7.*serves only as a comparison"):
        res = DiDEstimator(control_group="not_yet_treated", n_bootstrap=0).fit(panel)
    assert res.times.max() < 7 and 7.0 not in res.cohorts


def test_small_cohort_warns():
    frame = staggered_frame(seed=7, n_units=60, n_times=5)
    frame.loc[frame["unit"] == 0, "cohort"] = 7.0  # give cohort 7 a single extra unit
    frame = frame[~((frame["cohort"] == 7.0) & (frame["unit"] != 0))]
    with pytest.warns(didmem.SmallCohortWarning, match="1 cohorts have fewer than 5 units \\(7\\)"):
        DiDEstimator(n_bootstrap=0).fit(panel_of(frame))


def test_cluster_of_one_unit_each_equals_unclustered():
    frame = staggered_frame(seed=8, n_units=70, n_times=5)
    frame["cl"] = frame["unit"] * 3 + 1
    # R's rule (the small-sample correction is Welch's without clusters, CR1 with them)
    plain = DiDEstimator(n_bootstrap=0, small_sample=False).fit(panel_of(frame))
    clustered = DiDEstimator(n_bootstrap=0, small_sample=False).fit(panel_of(frame, cluster="cl"))
    np.testing.assert_allclose(clustered.std_errors, plain.std_errors, rtol=1e-12)
    agg_a, agg_b = plain.aggregate("dynamic"), clustered.aggregate("dynamic")
    np.testing.assert_allclose(agg_b.std_errors, agg_a.std_errors, rtol=1e-12)


def test_clustered_bootstrap_tracks_clustered_analytic():
    frame = staggered_frame(seed=9, n_units=400, n_times=5, clusters=40)
    # make outcomes correlated within clusters, so clustering matters
    shock = np.random.default_rng(0).normal(size=(40, 5))
    frame["y"] += shock[frame["cl"], np.searchsorted([1, 2, 4, 5, 7], frame["time"])]
    panel = panel_of(frame, cluster="cl")
    ana = DiDEstimator(n_bootstrap=0).fit(panel)
    boot = DiDEstimator(n_bootstrap=3000, seed=0).fit(panel)
    ratio = boot.std_errors / ana.std_errors
    assert np.all(np.abs(ratio - 1) < 0.15), ratio
    assert ana.n_clusters == 40 and "40 clusters" in ana.summary()


def test_integer_weights_act_like_replication():
    frame = staggered_frame(seed=10, n_units=50, n_times=5)
    reps = 1 + (frame["unit"] % 3)
    frame["w"] = reps.astype(float)
    weighted = DiDEstimator(n_bootstrap=0).fit(panel_of(frame, weights="w"))
    rows = frame.loc[frame.index.repeat(reps)].copy()
    rows["unit"] = rows["unit"].astype(str) + "_" + rows.groupby(["unit", "time"]).cumcount().astype(str)
    replicated = DiDEstimator(n_bootstrap=0).fit(panel_of(rows))
    np.testing.assert_allclose(weighted.estimates, replicated.estimates, rtol=1e-12, atol=1e-14)


def test_difference_estimator_is_the_difference_of_means(small_panel):
    res = DifferenceEstimator(n_bootstrap=0).fit(small_panel)
    frame = small_panel.to_frame()
    means = frame.groupby(["cohort", "time"])["y"].mean().unstack()
    expected = means.loc[means.index[np.isfinite(means.index)]] - means.loc[np.inf]
    got = res.profile()
    np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), rtol=1e-12, atol=1e-12)
    assert res.to_frame()["base_time"].isna().all()
    assert res.estimator == "DifferenceEstimator"


def test_no_effect_panel_is_null(small_panel):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=400, n_never_treated=800,
                                           instantaneous=0.0, residual=0.0, seed=11)
    res = DiDEstimator(n_bootstrap=500, seed=0).fit(panel_of(df))
    z = res.estimates / res.std_errors
    assert np.all(np.abs(z) < 4)
    assert res.significant.sum() <= 1


def test_bootstrap_aggregations_use_the_same_draws(small_panel):
    res = DiDEstimator(n_bootstrap=300, seed=3, small_sample=False).fit(small_panel)
    inst = res.aggregate("instantaneous")
    # instantaneous keys are single cells: same draws, hence identical standard errors
    f = res.to_frame()
    cells = f[f["time"] == f["cohort"]].set_index("cohort")["std_error"]
    np.testing.assert_array_equal(inst.std_errors, cells.loc[inst.keys].to_numpy())
    assert inst.band == "simultaneous" and inst.critical_value >= 1.959
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res.aggregate("dynamic", min_e=-1, max_e=2)
    with pytest.raises(ParameterError, match="Unknown aggregation 'weird'"):
        res.aggregate("weird")


def test_dynamic_balance_e_keeps_cohorts_seen_long_enough(mpdta_panel):
    res = DiDEstimator(n_bootstrap=0).fit(mpdta_panel)
    frame = res.to_frame()
    agg = res.aggregate("dynamic", balance_e=1)
    # cohorts with 2007 - g >= 1 (2004, 2006); event times in [1 - (2007 - 2004), 1]
    np.testing.assert_array_equal(agg.keys, [-2.0, -1.0, 0.0, 1.0])
    sizes = frame.groupby("cohort")["n_treated"].first()
    cells = frame.set_index(["cohort", "time"])["estimate"]
    expected = ((sizes[2004] * cells[(2004, 2005)] + sizes[2006] * cells[(2006, 2007)])
                / (sizes[2004] + sizes[2006]))
    np.testing.assert_allclose(agg.estimates[-1], expected, rtol=1e-12)
    np.testing.assert_allclose(agg.overall.estimate, agg.estimates[2:].mean(), rtol=1e-12)
    window = res.aggregate("dynamic", min_e=-1, max_e=1)
    np.testing.assert_array_equal(window.keys, [-1.0, 0.0, 1.0])
