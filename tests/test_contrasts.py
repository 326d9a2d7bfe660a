"""Contrasts of profiles (issue 49): exact properties of the paired difference, subgroup
profiles and moderator slopes. Statistical properties (coverage, size, the variance saved by
pairing) are Monte Carlo results: benchmarks/contrasts_mc.py and benchmarks/RESULTS.md."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.contrasts import compare_profiles, heterogeneity, moderator_slopes
from didmem.errors import EstimationError, PanelError, ParameterError

ANALYTIC = dict(n_bootstrap=0, small_sample=False)


def _frame(n_cohorts=3, per_cohort=30, n_never=60, seed=0, effect=1.0, first_unit=0,
           noise=None):
    """A balanced panel's long table; ``noise`` (units x times) replaces the noise."""
    rng = np.random.default_rng(seed)
    times = np.arange(n_cohorts + 2, dtype=float)
    cohorts = np.concatenate([np.repeat(times[1:n_cohorts + 1], per_cohort),
                              np.full(n_never, np.inf)])
    n = cohorts.size
    eps = rng.standard_normal((n, times.size)) if noise is None else noise
    event = times[None, :] - cohorts[:, None]
    y = rng.standard_normal(n)[:, None] + 0.3 * times[None, :] + 0.5 * eps
    y = y + np.where(event >= 0, effect * 0.7 ** np.maximum(event, 0), 0.0)
    return pd.DataFrame({"unit": np.repeat(np.arange(n) + first_unit, times.size),
                         "time": np.tile(times, n), "cohort": np.repeat(cohorts, times.size),
                         "y": y.ravel()})


def _fit(frame, **params):
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")
    return didmem.DiDEstimator(**(ANALYTIC | params)).fit(panel)


@pytest.fixture(scope="module")
def pair():
    """Two models on the same instances: b's noise is a's plus a little of its own."""
    rng = np.random.default_rng(1)
    noise = rng.standard_normal((150, 5))
    a = _fit(_frame(seed=2, noise=noise))
    b = _fit(_frame(seed=2, noise=noise + 0.3 * rng.standard_normal(noise.shape), effect=0.8))
    return a, b


def test_identical_results_differ_by_zero_with_zero_standard_error(pair):
    a, _ = pair
    diff = compare_profiles(a, a)
    frame = diff.to_frame()
    assert len(frame) > 0
    assert np.all(frame["difference"] == 0.0) and np.all(frame["std_error"] == 0.0)
    assert diff.pairing == "paired" and diff.n_shared == a.n_units
    agg = diff.aggregate("instantaneous")
    assert np.all(agg.table["difference"] == 0.0) and agg.overall.std_error == 0.0
    test = diff.test("wald")
    assert np.isnan(test.statistic) and "same" in test.note


def test_cell_influence_gives_the_results_analytic_standard_errors(pair):
    a, b = pair
    frame = compare_profiles(a, b, small_sample=False).to_frame()
    se_a = pd.Series(np.asarray(a.analytic_std_errors),
                     index=pd.MultiIndex.from_arrays([a.cohorts, a.times]))
    se_b = pd.Series(np.asarray(b.analytic_std_errors),
                     index=pd.MultiIndex.from_arrays([b.cohorts, b.times]))
    key = pd.MultiIndex.from_frame(frame[["cohort", "time"]])
    np.testing.assert_allclose(frame["unpaired_std_error"],
                               np.hypot(se_a[key].to_numpy(), se_b[key].to_numpy()), rtol=1e-10)


@pytest.mark.parametrize("aggregation", ["instantaneous", "persistent", "residual", "simple",
                                         "group", "dynamic", "calendar"])
def test_aggregation_influence_gives_the_results_analytic_standard_errors(pair, aggregation):
    """Against each result's own aggregate() (analytic SEs with the estimated-weights term):
    the same numbers from the route's combination moments."""
    a, b = pair
    agg = compare_profiles(a, b, small_sample=False).aggregate(aggregation)
    own_a, own_b = a.aggregate(aggregation), b.aggregate(aggregation)
    expected = np.append(np.hypot(own_a.std_errors, own_b.std_errors),
                         np.hypot(own_a.overall.std_error, own_b.overall.std_error))
    got = np.append(agg.table["unpaired_std_error"].to_numpy() if agg.key_name else [],
                    agg.unpaired_overall_std_error)
    np.testing.assert_allclose(got, expected, rtol=1e-8)
    np.testing.assert_allclose(agg.table["estimate_a"].to_numpy()[:own_a.estimates.size]
                               if agg.key_name else [agg.table["estimate_a"].iloc[0]],
                               own_a.estimates if agg.key_name else [own_a.overall.estimate],
                               rtol=1e-10)


def test_disjoint_instances_add_variances(pair):
    a, _ = pair
    other = _fit(_frame(seed=5, first_unit=10_000))
    diff = compare_profiles(a, other)
    frame = diff.to_frame()
    assert diff.pairing == "independent" and diff.n_shared == 0
    np.testing.assert_allclose(frame["std_error"], frame["unpaired_std_error"], rtol=1e-12)
    agg = diff.aggregate("instantaneous")
    np.testing.assert_allclose(agg.table["std_error"], agg.table["unpaired_std_error"],
                               rtol=1e-12)
    assert "independent" in diff.sentence("instantaneous")


def test_pairing_with_a_positive_correlation_shrinks_the_standard_error(pair):
    a, b = pair
    diff = compare_profiles(a, b)
    frame = diff.to_frame()
    assert diff.pairing == "paired"
    assert np.all(frame["std_error"] < 0.7 * frame["unpaired_std_error"])
    agg = diff.aggregate("instantaneous")
    assert np.all(agg.table["std_error"] < agg.table["unpaired_std_error"])


def test_partial_overlap_pairs_the_shared_instances_only(pair):
    """Against the dense influence matrices matched by hand."""
    a, _ = pair
    frame = _frame(seed=2).query("unit >= 20")  # units 20.. shared; new never-treated below
    extra = _frame(seed=9, n_cohorts=3, per_cohort=0, n_never=25, first_unit=500)
    b = _fit(pd.concat([frame, extra], ignore_index=True))
    diff = compare_profiles(a, b, small_sample=False)
    assert diff.pairing == "partial" and diff.n_only_a == 20 and diff.n_only_b == 25
    out = diff.to_frame()
    psi_a = pd.DataFrame(a.inference.influence.dense(), index=a.prepared.unit_labels)
    psi_b = pd.DataFrame(b.inference.influence.dense(), index=b.prepared.unit_labels)
    units = psi_a.index.union(psi_b.index)
    cell_a = {(c, t): i for i, (c, t) in enumerate(zip(a.cohorts, a.times))}
    cell_b = {(c, t): i for i, (c, t) in enumerate(zip(b.cohorts, b.times))}
    for row in out.itertuples():
        da = psi_a[cell_a[row.cohort, row.time]].reindex(units, fill_value=0.0)
        db = psi_b[cell_b[row.cohort, row.time]].reindex(units, fill_value=0.0)
        assert row.std_error == pytest.approx(np.sqrt(np.sum((da - db) ** 2)), rel=1e-10)


def test_two_subgroups_wald_is_the_squared_t_of_their_difference():
    frame = _frame(per_cohort=40, n_never=80, seed=3)
    units = frame["unit"].unique()
    feature = pd.Series(np.where(units % 2 == 0, "even", "odd"), index=units, name="parity")
    het = heterogeneity(didmem.Panel(frame, unit="unit", time="time", cohort="cohort",
                                     outcome="y"), feature,
                        estimator=didmem.DiDEstimator(**ANALYTIC))
    diff = het.difference("even", "odd")
    assert diff.pairing == "independent"
    cells = diff.to_frame()
    eq = het.equality()
    np.testing.assert_allclose(eq["statistic"], (cells["difference"] / cells["std_error"]) ** 2,
                               rtol=1e-10)
    agg = diff.aggregate("instantaneous")
    eq_agg = het.equality("instantaneous")
    np.testing.assert_allclose(eq_agg["statistic"].iloc[:-1],
                               (agg.table["difference"] / agg.table["std_error"]) ** 2,
                               rtol=1e-10)
    assert eq_agg["statistic"].iloc[-1] == pytest.approx(
        (agg.overall.estimate / agg.overall.std_error) ** 2, rel=1e-10)


def test_subgroups_need_every_unit_and_two_values():
    frame = _frame(seed=3)
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")
    units = frame["unit"].unique()
    with pytest.raises(PanelError, match="no value of the feature"):
        heterogeneity(panel, pd.Series("a", index=units[5:], name="f"))
    with pytest.raises(ParameterError, match="at least two"):
        heterogeneity(panel, pd.Series("a", index=units, name="f"))
    with pytest.raises(ParameterError, match="not a covariate"):
        heterogeneity(panel, "length")


def test_moderator_slope_is_exact_without_noise():
    """y = a_i + 0.3 t + (1 + 0.5 m_i) * post: the projection's slope is 0.5 after treatment
    and 0 before, in every cell."""
    frame = _frame(seed=4, noise=np.zeros((150, 5)), effect=0.0)
    rng = np.random.default_rng(4)
    m = pd.Series(rng.standard_normal(150), index=np.arange(150), name="m")
    post = frame["time"] >= frame["cohort"]
    frame["y"] += post * (1.0 + 0.5 * m.reindex(frame["unit"]).to_numpy())
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")
    out = moderator_slopes(panel, m).to_frame()
    np.testing.assert_allclose(out["slope"], np.where(out["post"], 0.5, 0.0), atol=1e-10)


def test_moderator_standard_error_is_the_sum_of_the_two_regressions_hc0():
    frame = _frame(seed=6)
    rng = np.random.default_rng(6)
    m = pd.Series(rng.standard_normal(150), index=np.arange(150), name="m")
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")
    out = moderator_slopes(panel, m, small_sample=False).to_frame()
    wide = frame.pivot(index="unit", columns="time", values="y")
    cohort = frame.groupby("unit")["cohort"].first()
    row = out[(out["cohort"] == 2.0) & (out["time"] == 3.0)].iloc[0]  # base period 1

    def hc0(units):
        x = np.column_stack([np.ones(units.size), m[units]])
        y = (wide.loc[units, 3.0] - wide.loc[units, 1.0]).to_numpy()
        bread = np.linalg.inv(x.T @ x)
        beta = bread @ x.T @ y
        e = y - x @ beta
        return beta[1], (bread @ (x.T * e ** 2) @ x @ bread)[1, 1]

    b1, v1 = hc0(cohort.index[cohort == 2.0])
    b0, v0 = hc0(cohort.index[np.isinf(cohort)])
    assert row["slope"] == pytest.approx(b1 - b0, rel=1e-10)
    assert row["std_error"] == pytest.approx(np.sqrt(v1 + v0), rel=1e-10)


def test_saved_results_are_refused_with_what_to_do(pair, tmp_path):
    a, b = pair
    saved = didmem.load_result(a.save(tmp_path / "a.parquet"))
    with pytest.raises(EstimationError, match="refit") as info:
        compare_profiles(saved, b)
    # every keyword the advice names is one compare_profiles takes
    import inspect
    import re

    named = re.findall(r"(\w+)=", str(info.value))
    assert set(named) <= set(inspect.signature(compare_profiles).parameters), named


def test_plot_slopes_draws_the_dynamic_slopes():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    frame = _frame(seed=7)
    m = pd.Series(np.random.default_rng(7).standard_normal(150), index=np.arange(150), name="m")
    result = moderator_slopes(didmem.Panel(frame, unit="unit", time="time", cohort="cohort",
                                           outcome="y"), m)
    ax = result.plot()
    line = ax.get_lines()[-1]
    np.testing.assert_allclose(line.get_ydata(),
                               result.aggregate("dynamic").query("~overall")["slope"])


def test_plot_difference_draws_the_aggregations_difference(pair):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    diff = compare_profiles(*pair, labels=("1.4B", "410M"))
    ax = diff.plot("instantaneous")
    np.testing.assert_allclose(ax.get_lines()[-1].get_ydata(),
                               diff.aggregate("instantaneous").table["difference"])
    assert "1.4B" in ax.get_title()
    with pytest.raises(ParameterError, match="has none"):
        diff.plot("simple")


@pytest.mark.parametrize("route", ["holes", "covariates"])
def test_other_routes_give_their_own_analytic_standard_errors(route):
    """Panels with holes (dense influence only) and covariates (stored influence): the
    per-unit influence read through the protocol gives each result's own SEs."""
    rng = np.random.default_rng(11)
    frames = [_frame(seed=3), _frame(seed=4, first_unit=1000)]
    options, params = [{}, {}], {}
    if route == "holes":
        frames[0] = frames[0].drop(index=rng.choice(len(frames[0]), 40, replace=False))
        options[0] = {"balance": "keep"}
    else:
        for f in frames:
            f["x"] = rng.standard_normal(len(f))
        options = [{"covariates": ["x"]}] * 2
        params = {"est_method": "dr"}
    a, b = (didmem.DiDEstimator(**(ANALYTIC | params)).fit(
        didmem.Panel(f, unit="unit", time="time", cohort="cohort", outcome="y", **o))
        for f, o in zip(frames, options))
    diff = compare_profiles(a, b, small_sample=False)
    assert diff.pairing == "independent"
    for name in ("instantaneous", "persistent", "simple"):
        agg = diff.aggregate(name)
        expected = np.hypot(a.aggregate(name).overall.std_error,
                            b.aggregate(name).overall.std_error)
        assert agg.overall.std_error == pytest.approx(expected, rel=1e-8)
    assert np.all(compare_profiles(a, a).to_frame()["std_error"] == 0.0)


def test_welch_correction_of_disjoint_results_is_each_results_own():
    """With the small-sample correction (the default of both), a difference of results on
    disjoint instances has each cell's and each aggregation's Welch standard error equal to
    the two results' own Welch standard errors added in quadrature."""
    a, b = (_fit(_frame(seed=s, per_cohort=12, n_never=30, first_unit=f), small_sample=True)
            for s, f in ((12, 0), (13, 10_000)))
    diff = compare_profiles(a, b)
    frame = diff.to_frame()
    own = {}
    for r, name in ((a, "a"), (b, "b")):
        f = r.to_frame().set_index(["cohort", "time"])["std_error"]
        own[name] = f.loc[pd.MultiIndex.from_frame(frame[["cohort", "time"]])].to_numpy()
    np.testing.assert_allclose(frame["std_error"], np.hypot(own["a"], own["b"]), rtol=1e-10)
    assert np.all(frame["std_error"] > compare_profiles(a, b, small_sample=False)
                  .to_frame()["std_error"])
    for name in ("instantaneous", "persistent", "simple"):
        expected = np.hypot(a.aggregate(name).overall.std_error,
                            b.aggregate(name).overall.std_error)
        assert diff.aggregate(name).overall.std_error == pytest.approx(expected, rel=1e-10)


def test_report_states_and_draws_the_difference_of_two_fitted_results(pair, tmp_path):
    pytest.importorskip("matplotlib")
    from didmem.report import render_report

    a, b = pair
    page = render_report({"1.4B": a, "410M": b}, figures=["profile"])
    assert "Differences of profiles" in page
    assert "1.4B&#x27;s instantaneous memorisation is" in page
    assert "paired on all instances" in page
    saved = didmem.load_result(b.save(tmp_path / "b.parquet"))
    page = render_report({"1.4B": a, "410M": saved}, figures=["profile"])
    assert "Not available" in page and "refit" in page


def test_three_subgroups_wald_is_the_precision_weighted_dispersion():
    """Independent subgroups: the Wald statistic of equality of a cell is
    sum_s (tau_s - tau_bar)**2 / v_s with the precision-weighted mean tau_bar."""
    frame = _frame(per_cohort=45, n_never=90, seed=8)
    units = frame["unit"].unique()
    feature = pd.Series(np.array(["x", "y", "z"])[units % 3], index=units, name="f")
    het = heterogeneity(didmem.Panel(frame, unit="unit", time="time", cohort="cohort",
                                     outcome="y"), feature,
                        estimator=didmem.DiDEstimator(**ANALYTIC), small_sample=False)
    eq = het.equality()
    assert (eq["df"] == 2).all()
    keyed = {g: r.to_frame().set_index(["cohort", "time"]) for g, r in het.results.items()}
    key = pd.MultiIndex.from_frame(eq[["cohort", "time"]])
    tau = np.stack([keyed[g].loc[key, "estimate"].to_numpy() for g in "xyz"])
    v = np.stack([keyed[g].loc[key, "std_error"].to_numpy() ** 2 for g in "xyz"])
    bar = np.sum(tau / v, axis=0) / np.sum(1 / v, axis=0)
    np.testing.assert_allclose(eq["statistic"], np.sum((tau - bar) ** 2 / v, axis=0),
                               rtol=1e-8)
    assert het.joint_test().df == 2 * int(eq["post"].sum())


def test_a_feature_given_as_covariate_is_not_a_covariate_within_its_subgroups():
    frame = _frame(per_cohort=30, n_never=60, seed=9)
    frame["long"] = (frame["unit"] % 2).astype(float)
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y",
                         covariates=["long"])
    het = heterogeneity(panel, "long", estimator=didmem.DiDEstimator(**ANALYTIC))
    assert het.groups == [0.0, 1.0]
    assert all(r.prepared.x is None for r in het.results.values())
    by_hand = didmem.DiDEstimator(**ANALYTIC).fit(didmem.Panel(
        frame[frame["long"] == 1.0], unit="unit", time="time", cohort="cohort", outcome="y"))
    np.testing.assert_allclose(het.results[1.0].estimates, by_hand.estimates, rtol=1e-10)
