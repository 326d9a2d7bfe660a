"""The event-study figure (issue 50, item 5): the dynamic aggregation's estimates and band before
and after treatment on one axes, as R did's ``ggdid``; from the library, a saved result, the
command line and the report."""

import numpy as np
import pytest

import didmem
from didmem.cli import main
from didmem.report import render_report
from didmem.results.plotting import plot_event_study

pytest.importorskip("matplotlib")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture(scope="module")
def result():
    import matplotlib

    matplotlib.use("Agg")
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=12, n_never_treated=24,
                                           seed=5)
    return didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y"))


def _points(container):
    return np.asarray(container.lines[0].get_xdata(), float), \
        np.asarray(container.lines[0].get_ydata(), float)


def test_pre_and_post_event_times_with_the_band(result, tmp_path):
    agg = result.aggregate("dynamic").to_frame()
    for res in (result, didmem.load_result(result.save(tmp_path / "r.parquet"))):
        ax = plot_event_study(res)
        pre, post = ax.containers
        x_pre, y_pre = _points(pre)
        x_post, y_post = _points(post)
        np.testing.assert_array_equal(np.r_[x_pre, x_post], agg["event_time"].to_numpy())
        np.testing.assert_allclose(np.r_[y_pre, y_post], agg["estimate"].to_numpy(), rtol=1e-12)
        assert (x_pre < 0).all() and (x_post >= 0).all()
        bars = post.lines[2][0].get_segments()  # the band of each post-treatment event time
        np.testing.assert_allclose([seg[:, 1].min() for seg in bars],
                                   agg.loc[agg["event_time"] >= 0, "ci_lower"], rtol=1e-12)
        assert "Event study" in ax.get_title()


def test_cli_and_report_draw_it(result, tmp_path):
    path = result.save(tmp_path / "r.parquet")
    png = tmp_path / "es.png"
    assert main(["plot", str(path), "--figure", "event_study", "--out", str(png)]) == 0
    assert png.stat().st_size > 0
    page = render_report(result, figures=["profile", "event_study"])
    assert "<b>Event study</b>" in page
