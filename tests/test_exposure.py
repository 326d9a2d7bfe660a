"""Repeated exposure: the panel's cohort columns and DiDEstimator(exposure=k)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.datasets import simulate_exposures
from didmem.inference.prepared import did_cells, prepare_panel
from didmem.inference.exposure.kernel import exposure_cells_numpy
from didmem.panel.exposures import exposure_view, subset_units


def _panel(df, cohort=("cohort", "cohort_2")):
    return didmem.Panel(df, unit="unit", time="time", cohort=list(cohort), outcome="y")


@pytest.fixture(scope="module")
def two_exposures():
    df, truth = simulate_exposures(n_first=3, units_per_cohort=30, n_never_treated=40,
                                   gap_slope=0.5, seed=3)
    return df, truth


def test_panel_reads_the_exposure_columns(two_exposures):
    df, _ = two_exposures
    panel = _panel(df)
    assert panel.cohort_columns == ("cohort", "cohort_2")
    assert panel.exposure_cohorts.shape == (panel.n_units, 2)
    np.testing.assert_array_equal(panel.exposure_cohorts[:, 0], panel.cohorts)
    first = df.groupby("unit")["cohort_2"].first().fillna(np.inf).to_numpy()
    np.testing.assert_array_equal(panel.exposure_cohorts[:, 1], first)
    assert "cohort_2" in panel.to_frame().columns


def test_panel_refuses_exposures_out_of_order(two_exposures):
    df, _ = two_exposures
    back = df.copy()
    back.loc[back["unit"] == 0, "cohort_2"] = 0.0  # before its first exposure at 1
    with pytest.raises(didmem.PanelError, match=r"'cohort_2' \(exposure 2\) is earlier.*for 1 units, e.g. units 0\."):
        _panel(back)
    skip = df.copy()
    never = int(df.loc[df["cohort"].isna(), "unit"].iloc[0])
    skip.loc[skip["unit"] == never, "cohort_2"] = 3.0
    with pytest.raises(didmem.PanelError, match=f"for 1 units that have no exposure 1.*units {never}\\."):
        _panel(skip)
    with pytest.raises(didmem.PanelError, match="Missing columns: cohort of exposure 2"):
        _panel(df, cohort=("cohort", "cohort_two"))


def test_exposure_one_is_todays_estimator(two_exposures):
    df, _ = two_exposures
    one = didmem.DiDEstimator(n_bootstrap=50, seed=1).fit(
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y"))
    many = didmem.DiDEstimator(exposure=1, n_bootstrap=50, seed=1).fit(_panel(df))
    pd.testing.assert_frame_equal(one.to_frame(), many.to_frame())


def test_too_few_cohort_columns(two_exposures):
    df, _ = two_exposures
    with pytest.raises(didmem.ParameterError, match=r"exposure=3.*has 2: \['cohort', 'cohort_2'\]"):
        didmem.DiDEstimator(exposure=3).fit(_panel(df))
    with pytest.raises(didmem.ParameterError, match="'exposure' parameter"):
        didmem.DiDEstimator(exposure=0).fit(_panel(df))


def test_kernel_matches_the_numpy_twin(two_exposures):
    df, _ = two_exposures
    panel = _panel(df)
    view = exposure_view(panel, 2, "test")
    sub = subset_units(panel, view.rows, view.cohorts)
    prepared = prepare_panel(sub, None, need_never_treated=False, anticipation=0,
                            lower_is_better=False, owner="test")
    codes = pd.Index(np.asarray(panel.units)[view.rows]).get_indexer(prepared.unit_labels)
    hist = view.history[codes]
    cells = did_cells(prepared, base_period="varying", not_yet=True, anticipation=0)
    att, psi = exposure_cells_numpy(prepared.y, prepared.w, prepared.starts, hist, cells)
    res = didmem.DiDEstimator(exposure=2, control_group="not_yet_treated", n_bootstrap=0,
                              small_sample=False).fit(panel)
    np.testing.assert_allclose(res.estimates, att, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.influence.dense(), psi, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.analytic_std_errors, np.sqrt((psi**2).sum(axis=0)),
                               rtol=1e-10)


def _history_fits(df, control_group):
    """The standard estimator on each first cohort's units, with cohort_2 as the cohort."""
    fits = {}
    for g1, part in df[df["cohort"].notna()].groupby("cohort"):
        sub = didmem.Panel(part, unit="unit", time="time", cohort="cohort_2", outcome="y")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", didmem.SmallCohortWarning)
            fits[g1] = didmem.DiDEstimator(control_group=control_group, n_bootstrap=0,
                                           small_sample=False).fit(sub).to_frame()
    return fits


@pytest.mark.parametrize("control_group", ["never_treated", "not_yet_treated"])
def test_pooled_cells_are_the_treated_weighted_history_fits(two_exposures, control_group):
    """tau_2(g, t) = sum_h n_{h,g} tau_2(g, t | h) / n_g, each history fitted on its own."""
    df, _ = two_exposures
    res = didmem.DiDEstimator(exposure=2, control_group=control_group, n_bootstrap=0,
                              small_sample=False).fit(_panel(df)).to_frame()
    fits = pd.concat(_history_fits(df, control_group), names=["history"]).reset_index(0)
    fits["weighted"] = fits["estimate"] * fits["n_treated"]
    pooled = fits.groupby(["cohort", "time"])[["weighted", "n_treated"]].sum()
    expected = (pooled["weighted"] / pooled["n_treated"]).rename("expected").reset_index()
    both = res.merge(expected, on=["cohort", "time"], how="outer", indicator=True)
    assert (both["_merge"] == "both").all()
    np.testing.assert_allclose(both["estimate"], both["expected"], rtol=0, atol=1e-10)
    # a cohort with one history: the standard errors are that history's fit's
    counts = fits.groupby("cohort")["history"].nunique()
    single = counts.index[counts == 1]
    assert single.size
    one = fits[fits["cohort"].isin(single)].merge(res, on=["cohort", "time"],
                                                  suffixes=("_h", ""))
    np.testing.assert_allclose(one["std_error"], one["std_error_h"], rtol=1e-10)
    np.testing.assert_array_equal(one["n_control"], one["n_control_h"])


@pytest.mark.parametrize("dgp, gaps", [("decay", (2, 4)), ("heterogeneous", (1, 2, 3, 4, 5))])
def test_matched_comparison_beats_the_naive_one(dgp, gaps):
    df, truth = simulate_exposures(n_first=4, units_per_cohort=400, n_never_treated=50,
                                   dgp=dgp, gaps=gaps, seed=7)
    panel = _panel(df)
    errors = {}
    for history in ("matched", "ignored"):
        res = didmem.DiDEstimator(exposure=2, history=history, n_bootstrap=0).fit(panel)
        frame = res.to_frame().merge(truth[truth["exposure"] == 2], on=["cohort", "time"])
        post = frame[frame["post"]]
        z = (post["estimate"] - post["tau"]) / post["std_error"]
        errors[history] = float(np.sqrt(np.mean(z**2)))  # root mean squared t of the truth
        assert res.history == history
    # seed 7: decay 0.79 matched, 2.51 ignored; heterogeneous 0.73, 4.20
    # (the Monte Carlo: benchmarks/exposure_montecarlo.py)
    assert errors["matched"] < 1.3 and errors["ignored"] > 1.8


def test_history_without_controls_is_dropped_and_named():
    df, _ = simulate_exposures(n_first=3, units_per_cohort=30, n_never_treated=20, seed=2)
    g2 = df.groupby("unit")[["cohort", "cohort_2"]].first()
    # every unit of first cohort 1 is seen again at 3: history (1) has no control
    seen = g2.index[g2["cohort"] == 1.0]
    df.loc[df["unit"].isin(seen), "cohort_2"] = 3.0
    with pytest.warns(didmem.DataDroppedWarning, match=r"dropped 1 histories.*\(1\); 30 units"):
        res = didmem.DiDEstimator(exposure=2, n_bootstrap=0).fit(_panel(df))
    table = res.histories.set_index("cohort")
    assert table.loc[1.0, "status"] == "dropped"
    assert (table.drop(index=1.0)["status"] == "used").all()
    assert "1 dropped" in res.summary()


def test_no_usable_history_is_an_error():
    df, _ = simulate_exposures(n_first=2, units_per_cohort=10, n_never_treated=10,
                               repeat_share=1.0, gaps=(1,), seed=0)
    with pytest.raises(didmem.EstimationError, match="no history has both.*2 histories"):
        didmem.DiDEstimator(exposure=2, n_bootstrap=0).fit(_panel(df))


def test_exposure_result_aggregates_saves_and_plots(two_exposures, tmp_path):
    df, _ = two_exposures
    res = didmem.DiDEstimator(exposure=2, n_bootstrap=100, seed=0).fit(_panel(df))
    assert isinstance(res, didmem.ExposureResult)
    frame = res.to_frame()
    assert (frame["exposure"] == 2).all()
    assert set(frame["n_histories"]) <= {1, 2, 3}
    inst = res.aggregate("instantaneous").to_frame()
    assert set(inst["cohort"]) == set(frame["cohort"])
    assert np.isfinite(res.pretrend_test().pvalue)
    path = res.save(tmp_path / "exposure2.parquet")
    saved = didmem.load_result(path)
    assert saved.params["exposure"] == 2
    pd.testing.assert_frame_equal(saved.to_frame(), frame)
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from didmem.results.plotting import plot_profile

    ax = plot_profile(saved)
    assert ax.get_title() or ax.figure is not None


def test_cli_estimate_exposure(two_exposures, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    from didmem.cli import main

    df, _ = two_exposures
    panel = tmp_path / "panel.csv"
    df.to_csv(panel, index=False)
    out = tmp_path / "second.parquet"
    assert main(["estimate", str(panel), "--outcome", "y", "--exposure", "2",
                 "--n-bootstrap", "50", "--out", str(out)]) == 0
    assert "exposure 2: controls of the same history" in capsys.readouterr().out
    saved = didmem.load_result(out)
    assert saved.params["exposure"] == 2 and (saved.to_frame()["exposure"] == 2).all()
    assert main(["estimate", str(panel), "--outcome", "y", "--exposure", "3",
                 "--out", str(out)]) == 2
    assert "cohort_3" in capsys.readouterr().err


def test_profiles_per_exposure_side_by_side(two_exposures, tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("pyarrow")
    import matplotlib

    matplotlib.use("Agg")
    from didmem.results.plotting import plot_exposure_profiles, plot_profile
    from didmem.report import render_report

    df, _ = two_exposures
    panel = _panel(df)
    first = didmem.DiDEstimator(n_bootstrap=50, seed=0).fit(panel)
    second = didmem.DiDEstimator(exposure=2, n_bootstrap=50, seed=0).fit(panel)
    saved = didmem.load_result(second.save(tmp_path / "second.parquet"))
    assert plot_profile(saved).get_ylabel() == "step g of exposure 2"
    axes = plot_exposure_profiles({"first": first, "second": saved}, significant_only=False)
    assert [ax.get_title().split(":")[0] for ax in axes] == ["exposure 1", "exposure 2"]
    limits = {ax.images[0].get_clim() for ax in axes}
    assert len(limits) == 1  # one shared colour scale
    lim = limits.pop()[1]
    biggest = max(np.nanmax(np.abs(r.to_frame().query("post")["estimate"])) for r in (first, saved))
    assert lim == pytest.approx(biggest)
    page = render_report({"first": first, "second": saved}, figures=["profile"])
    assert "Profiles per exposure" in page and "second: exposure 2" in page


@pytest.mark.parametrize("multiplier", ["rademacher", "normal"])
def test_grouped_bootstrap_equals_the_stored_influence_route(multiplier):
    """The fast path (grouped sums per history, no per-unit psi) gives the draws, variances
    and band of the explicit influence functions, on a panel with several histories."""
    from didmem.inference.influence import bootstrap_influence

    df, _ = simulate_exposures(n_first=5, units_per_cohort=40, n_never_treated=30,
                               gaps=(1, 2, 3, 5), seed=11)
    df["y"] *= 1 + 0.5 * (df["unit"] % 3)  # unequal spread across units
    res = didmem.DiDEstimator(exposure=2, n_bootstrap=0).fit(_panel(df))
    inf = res.influence
    assert inf.grouped and inf.n_hist >= 4
    stored = inf.stored()
    np.testing.assert_allclose(inf.variance(), stored.variance(), rtol=1e-12, atol=0)
    treated = np.array([(stored.dense()[inf.prepared.starts[k]:inf.prepared.starts[k + 1], c]**2)
                        .sum() for c, k in enumerate(inf.cells.k)])
    np.testing.assert_allclose(inf.treated_variance(), treated, rtol=1e-12, atol=1e-300)
    # the cells' statistics from sums by history equal the unit-by-unit kernel's
    from didmem.inference.exposure.cells import exposure_cells, grouped_cells

    kernel, _ = exposure_cells(inf.prepared, inf.cells, inf.hist, inf.n_hist, store=False)
    grouped = grouped_cells(inf.prepared, inf.cells, inf.hist, inf.n_hist)
    for name, a, b in zip(["att", "mu1", "mu0", "w1", "w0", "n_control", "missing", "var",
                           "treated_var"], kernel, grouped):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-13, err_msg=name)
    fast = inf.bootstrap(301, multiplier, np.random.default_rng(5))
    slow = bootstrap_influence(inf.prepared, stored, n_draws=301, multiplier=multiplier,
                               rng=np.random.default_rng(5))
    assert np.abs(fast.cells).max() > 1e-3
    np.testing.assert_allclose(fast.cells, slow.cells, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.block_weights, slow.block_weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.total, slow.total, rtol=0, atol=1e-12)
