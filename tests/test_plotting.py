"""The paper's figures: each is rendered to PNG (Agg) and its content checked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from didmem import plotting  # noqa: E402


def _fit(seed, decay=0.5):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=5, units_per_cohort=40, n_never_treated=120,
                                           time_step=100, decay=decay, seed=seed)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    return didmem.DiDEstimator(n_bootstrap=199, seed=seed).fit(panel)


@pytest.fixture(scope="module")
def res():
    return _fit(0)


@pytest.fixture(scope="module")
def res2():
    return _fit(1, decay=0.8)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _png(ax, tmp_path, name):
    path = tmp_path / f"{name}.png"
    ax.figure.savefig(path, dpi=60)
    assert path.stat().st_size > 2000
    return path


def test_profile_masks_insignificant_and_pre_cells(res, tmp_path):
    ax = plotting.plot_profile(res, end_of_epoch=250)
    _png(ax, tmp_path, "profile")
    data = ax.images[0].get_array()
    frame = res.to_frame()
    shown = frame["significant"] & frame["post"]
    n_cohorts, n_times = frame["cohort"].nunique(), frame["time"].nunique()
    assert data.shape == (n_cohorts, n_times)
    assert int(data.count()) == int(shown.sum()) > 0
    assert int(np.ma.getmaskarray(data).sum()) == data.size - int(shown.sum())
    assert ax.get_xlabel() == "checkpoint c" and ax.get_ylabel() == "treatment step g"
    assert any(line.get_linestyle() == "--" for line in ax.get_lines())  # end-of-epoch marker


def test_profile_all_cells_and_given_axes(res):
    fig, ax = plt.subplots()
    assert plotting.plot_profile(res, ax=ax, significant_only=False, post_only=False,
                                 colorbar=False) is ax
    assert int(ax.images[0].get_array().count()) == len(res.to_frame())


def test_instantaneous_with_band_and_learning_rate(res, tmp_path):
    schedule = pd.Series(np.linspace(1e-3, 1e-4, 11), index=np.arange(0, 1100, 100))
    ax = plotting.plot_instantaneous(res, lr_schedule=schedule)
    _png(ax, tmp_path, "instantaneous")
    inst = res.aggregate("instantaneous").to_frame()
    points = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == len(inst)]
    assert len(points) == 1 and np.allclose(points[0].get_ydata(), inst["estimate"])
    assert len(ax.collections) == 1  # the band
    assert ax.lr_axis.get_ylabel() == "learning rate"
    assert np.allclose(ax.lr_axis.get_lines()[0].get_ydata(), schedule.to_numpy())
    with pytest.raises(didmem.ParameterError, match="lr_schedule"):
        plotting.plot_instantaneous(res, lr_schedule=[1, 2, 3])


def test_persistent_by_event_time(res, tmp_path):
    ax = plotting.plot_persistent(res)
    _png(ax, tmp_path, "persistent")
    pers = res.aggregate("persistent").to_frame()
    line = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == len(pers)][0]
    assert np.allclose(line.get_xdata(), pers["event_time"])
    assert (pers["event_time"] > 0).all()
    assert "c - g" in ax.get_xlabel()


def test_residual_significance_by_colour_strength(res, tmp_path):
    ax = plotting.plot_residual(res)
    _png(ax, tmp_path, "residual")
    resid = res.aggregate("residual").to_frame()
    assert len(ax.patches) == len(resid)
    alphas = np.array([p.get_alpha() for p in ax.patches])
    assert np.array_equal(alphas == 1.0, resid["significant"].to_numpy())


def test_profile_correlation_on_shared_cells(res, res2, tmp_path):
    corr = didmem.profile_correlation(res, res2, res)
    assert corr.shape == (3, 3) and np.allclose(np.diag(corr), 1)
    assert corr.iat[0, 2] == pytest.approx(1.0)
    post = res.to_frame()["post"]
    assert corr.attrs["n_cells"] == int(post.sum())
    a = res.to_frame()[post]["estimate"].to_numpy()
    b = res2.to_frame()[res2.to_frame()["post"]]["estimate"].to_numpy()
    assert corr.iat[0, 1] == pytest.approx(np.corrcoef(a, b)[0, 1])
    ax = plotting.plot_profile_correlation(corr)
    _png(ax, tmp_path, "correlation")
    assert ax.images[0].get_array().shape == (3, 3) and len(ax.texts) == 9
    with pytest.raises(didmem.ParameterError, match="at least two"):
        didmem.profile_correlation(res)


def test_pretrends_draws_every_pre_cell(res, tmp_path):
    ax = plotting.plot_pretrends(res)
    _png(ax, tmp_path, "pretrends")
    pre = res.to_frame().query("not post")
    drawn = sum(len(c.lines[0].get_xdata()) for c in ax.containers)
    assert drawn == len(pre) > 0
    test = res.pretrend_test()  # the title leads with the calibrated test, as the report does
    assert f"event-time pre-test p = {test.pvalue:.3g} (power {test.power:.2f}" in ax.get_title()
    assert ax.get_xlabel().startswith("training steps relative to treatment")
    ax = plotting.plot_pretrends(res, by="event_time")
    dyn = res.aggregate("dynamic").to_frame().query("event_time < 0")
    line = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == len(dyn)][0]
    assert np.allclose(line.get_ydata(), dyn["estimate"])
    assert len(plotting.plot_pretrends(res, max_cells=3).containers) == 0  # auto: event time
    with pytest.raises(didmem.ParameterError, match="'by'"):
        plotting.plot_pretrends(res, by="cohort")


def test_plots_accept_a_saved_result(res, tmp_path):
    pytest.importorskip("pyarrow")
    loaded = didmem.load_result(res.save(tmp_path / "r.parquet"))
    for name, draw in plotting.PLOTS.items():
        _png(draw(loaded), tmp_path, name)
        assert len(loaded.plot(name).figure.axes) == len(res.plot(name).figure.axes)
    with pytest.raises(didmem.ParameterError, match="Unknown figure"):
        res.plot("pie")


def test_axes_name_the_unit_they_count(res):
    per = plotting.plot_persistent(res)
    assert per.get_xlabel() == "training steps after treatment, c - g"
    top = [c for c in per.child_axes if hasattr(c, "get_xlabel")]
    assert [t.get_xlabel() for t in top] == ["checkpoints after treatment"]
    assert "(y)" in per.get_ylabel()  # the outcome
    resid = plotting.plot_residual(res)
    t = res.aggregate("residual").to_frame()
    assert resid.get_title() == (f"Residual memorisation at checkpoint {res.times.max():.0f}\n"
                                 f"significant in {int(t['significant'].sum())} of {len(t)} "
                                 "cohorts (full colour)")


def test_correlation_figure_grows_with_models_and_takes_labels(res, res2):
    names = {f"/very/long/path/to/model_{i}_checkpoint_run.parquet": (res if i % 2 else res2)
             for i in range(12)}
    corr = didmem.profile_correlation(names)
    ax = plotting.plot_profile_correlation(corr)
    # the part the names share is left out: the paths differ in the model number only
    assert [t.get_text() for t in ax.get_yticklabels()] == [str(i) for i in range(12)]
    assert ax.figure.get_size_inches()[1] >= 8
    labels = [f"m{i}" for i in range(12)]
    ax = plotting.plot_profile_correlation(corr, labels=labels)
    assert [t.get_text() for t in ax.get_xticklabels()] == labels
    assert len(ax.texts) == 144
    with pytest.raises(didmem.ParameterError, match="one name per model: 12; got 2"):
        plotting.plot_profile_correlation(corr, labels=["a", "b"])


def test_a_results_file_path_is_refused_with_how_to_read_it(res, tmp_path):
    """plot_profile("results.parquet") failed with AttributeError: 'str' object has no
    attribute 'to_frame'. Plotting cannot read files (results import plotting to draw
    themselves), so the path is refused by name, saying how to read it."""
    pytest.importorskip("pyarrow")
    path = res.save(tmp_path / "results.parquet")
    for name, draw in plotting.PLOTS.items():
        with pytest.raises(didmem.ParameterError) as err:
            draw(str(path))
        assert f"not the path {str(path)!r}" in str(err.value)
        assert "didmem.load_result(path)" in str(err.value)
        assert len(draw(didmem.load_result(path)).figure.axes) >= 1


def test_exposure_profiles_take_one_result(res, tmp_path):
    """plot_exposure_profiles(result) with one result draws one heatmap (it raised
    TypeError: 'GroupTimeResult' object is not iterable)."""
    axes = plotting.plot_exposure_profiles(res)
    assert len(axes) == 1 and axes[0].images
    pytest.importorskip("pyarrow")
    saved = didmem.load_result(res.save(tmp_path / "one.parquet"))
    assert len(plotting.plot_exposure_profiles(saved)) == 1
    assert len(plotting.plot_exposure_profiles({"a": res, "b": saved})) == 2


@pytest.mark.parametrize("draw", [plotting.plot_profile, plotting.plot_instantaneous,
                                  plotting.plot_persistent, plotting.plot_residual,
                                  plotting.plot_pretrends, plotting.plot_exposure_profiles,
                                  plotting.plot_result])
@pytest.mark.parametrize("bad", [None, 3, [1, 2], {"a": 1}, np.zeros(3)])
def test_plots_refuse_what_is_not_a_result_by_name(draw, bad):
    if draw is plotting.plot_exposure_profiles and isinstance(bad, (list, dict)):
        bad = [bad]  # a list or mapping is its container: what is in it must be a result
    with pytest.raises(didmem.ParameterError, match=rf"parameter of {draw.__name__}|"
                       r"parameter of plot_exposure_profiles|parameter of plot_result"):
        draw(bad)


def test_a_path_in_a_list_of_exposures_is_named(tmp_path):
    with pytest.raises(didmem.ParameterError, match="'results' parameter of "
                       "plot_exposure_profiles takes .* not the path .*nowhere.parquet"):
        plotting.plot_exposure_profiles([tmp_path / "nowhere.parquet"])
