"""The report never says more than the estimates show (issue 40, item 3).

Each wording rule of the finding has a test here: a count of significant keys is never read as
the effect's extent ("persists for", "remains in"); what the band of the keys that are not
significant cannot exclude is stated; the truth, where known, stands beside every average and
range of the finding; a later exposure is named in the title, the heading and the finding;
the two kinds of interval on a page (pointwise, simultaneous over a table's keys or over all
cells) are named; the profile's title fits its figure.
"""

from __future__ import annotations

import re
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.errors import InferenceWarning

pytest.importorskip("matplotlib")
from didmem.report import render_report  # noqa: E402
from didmem.report._finding import _instantaneous  # noqa: E402
from didmem.report._html import fmt  # noqa: E402


def _finding(text: str) -> str:
    body = text.split("<div class='finding'>", 1)[1].split("</div>", 1)[0]
    return re.sub(r"<[^>]+>", "", body)


@pytest.fixture(scope="module")
def simulated():
    df, truth = didmem.datasets.simulate_panel(n_cohorts=5, units_per_cohort=60,
                                               n_never_treated=150, time_step=20, seed=3)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    res = didmem.DiDEstimator(n_bootstrap=199, seed=0).fit(panel)
    return res, truth


@pytest.fixture(scope="module")
def second_exposure():
    df, truth = didmem.datasets.simulate_exposures(seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort=["cohort", "cohort_2"],
                         outcome="y")
    return didmem.DiDEstimator(exposure=2, n_bootstrap=199, seed=0).fit(panel)


def test_counts_are_never_read_as_extent(simulated):
    res, truth = simulated
    finding = _finding(render_report(res, figures=[], truth=truth))
    assert "persists for" not in finding and "remains in" not in finding
    for kind, words in (("persistent", "later event times"), ("residual", "cohorts")):
        t = res.aggregate(kind).to_frame()
        k = int((t["significant"] & (t["estimate"] > 0)).sum())
        assert f"significant {'at' if kind == 'persistent' else 'in'} {k} of {len(t)} {words}" \
            in finding


def test_what_a_band_that_includes_zero_cannot_exclude_is_stated(simulated):
    res, truth = simulated
    finding = _finding(render_report(res, figures=[], truth=truth))
    for kind in ("persistent", "residual"):
        t = res.aggregate(kind).to_frame()
        rest = t[~t["significant"]]
        if rest.empty:
            continue
        upper = fmt(rest["ci_upper"].max())
        assert (f"an effect as large as {upper}" in finding if len(rest) == 1
                else f"reach up to {upper}" in finding)
        assert "not significant does not mean absent" in finding
    # the panel is built so that some keys are not significant: the rule was exercised
    assert "not significant does not mean absent" in finding


def test_the_truth_stands_beside_every_average(simulated):
    res, truth = simulated
    finding = _finding(render_report(res, figures=[], truth=truth))
    true = truth.set_index(["cohort", "time"])["tau"]
    cells = res.to_frame()
    # balanced, equal cohorts: the cohort-weighted averages are plain means of the truth
    inst = np.mean([true[(g, g)] for g in cells["cohort"].unique()])
    last = cells["time"].max()
    resid = np.mean([true[(g, last)] for g in cells["cohort"].unique()])
    post = cells[cells["event_time"] > 0]
    per = post.assign(tau=[true[(g, c)] for g, c in zip(post["cohort"], post["time"])]) \
        .groupby("event_time")["tau"].mean().mean()
    for value in (inst, resid, per):
        assert f"truth {fmt(value)}" in finding
    # without a truth, no truth is claimed
    assert "truth" not in _finding(render_report(res, figures=[]))


def test_an_interval_that_excludes_the_truth_says_so():
    frame = pd.DataFrame({"cohort": [1.0, 2.0], "estimate": [0.07, 0.068],
                          "ci_lower": [0.05, 0.05], "ci_upper": [0.09, 0.09],
                          "significant": [True, True]})
    agg = SimpleNamespace(to_frame=lambda: frame, alpha=0.05, band="simultaneous",
                          keys=frame["cohort"].to_numpy(), key_name="cohort",
                          overall=SimpleNamespace(estimate=0.069, ci_lower=0.061,
                                                  ci_upper=0.076))
    cells = pd.DataFrame({"cohort": [1.0, 2.0], "time": [1.0, 2.0], "event_time": [0.0, 0.0],
                          "n_treated": [10, 10], "tau": [0.06, 0.0606], "post": [True, True]})
    result = SimpleNamespace(aggregate=lambda kind: agg, design=None,
                             settings=SimpleNamespace(cohort_shares=None))
    text, _ = _instantaneous(result, "nats", cells)
    assert "truth 0.0603, outside this interval" in text


def test_no_cohort_significant_but_the_average_is_explained():
    frame = pd.DataFrame({"cohort": [1.0, 2.0, 3.0], "estimate": [0.02, 0.03, 0.025],
                          "ci_lower": [-0.01, -0.005, -0.01], "ci_upper": [0.05, 0.065, 0.06],
                          "significant": [False, False, False]})
    agg = SimpleNamespace(to_frame=lambda: frame, alpha=0.05, band="simultaneous",
                          keys=frame["cohort"].to_numpy(), key_name="cohort",
                          overall=SimpleNamespace(estimate=0.025, ci_lower=0.01,
                                                  ci_upper=0.04))
    result = SimpleNamespace(aggregate=lambda kind: agg, design=None,
                             settings=SimpleNamespace(cohort_shares=None))
    text, _ = _instantaneous(result, "nats", None)
    assert "significant in 0 of 3 cohorts" in text
    assert "No single cohort's band excludes zero, but the average's pointwise interval does" \
        in text
    assert "In all 3 cohorts the bands include zero but reach up to 0.065" in text


def test_a_later_exposure_is_named_in_title_heading_and_finding(second_exposure):
    text = render_report({"lab": second_exposure}, figures=["profile"])
    assert "<title>didmem report: exposure 2</title>" in text
    assert "<h2>lab: exposure 2</h2>" in text
    assert "<h3>Finding: exposure 2</h3>" in text
    assert "Exposure 2: the effect of the second time training sees an instance" in text
    # a title that names it already is kept as given
    own = render_report({"x": second_exposure}, figures=[], title="Second exposure (k=2)")
    assert "<title>Second exposure (k=2)</title>" in own


def test_the_first_exposure_is_named_beside_a_later_one(simulated, second_exposure):
    first = didmem.DiDEstimator(n_bootstrap=199, seed=0).fit(
        didmem.Panel(didmem.datasets.simulate_exposures(seed=0)[0], unit="unit", time="time",
                     cohort=["cohort", "cohort_2"], outcome="y"))
    text = render_report({"a": first, "b": second_exposure}, figures=[])
    assert "<h2>a: exposure 1</h2>" in text and "<h2>b: exposure 2</h2>" in text


def test_both_kinds_of_interval_are_named(simulated):
    res, _ = simulated
    text = render_report(res, figures=[])
    n_cells = len(res.to_frame())
    n_cohorts = len(res.aggregate("instantaneous").to_frame())
    assert "pointwise 95% CI" in text and "95% CI [" not in text.replace("pointwise 95% CI [", "")
    assert f"simultaneous 95% band over the {n_cohorts} cohorts of this table" in text
    assert f"simultaneous 95% band over all {n_cells} cells" in text
    finding = _finding(text)
    assert f"simultaneous 95% band over the {n_cohorts} cohorts" in finding
    assert "(pointwise 95% CI" in finding


def test_one_cohort_reads_in_the_singular():
    df, truth = didmem.datasets.simulate_panel(n_cohorts=1, units_per_cohort=60,
                                               n_never_treated=100, n_times=5, seed=0)
    res = didmem.DiDEstimator(n_bootstrap=199, seed=0).fit(
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y"))
    with warnings.catch_warnings():  # one key: its sup-t value may fall below the pointwise
        warnings.simplefilter("ignore", InferenceWarning)  # one (as R, by the draws)
        finding = _finding(render_report(res, figures=[], truth=truth))
    assert "of 1 cohort " in finding and "of 1 cohorts" not in finding
    assert "across cohorts" not in finding  # no range over one cohort
    # a band over one key is that key's pointwise interval, and is called so
    assert "significant in 1 of 1 cohort (where the pointwise 95% interval excludes zero)" \
        in finding or "significant in 0 of 1 cohort (where the pointwise 95% interval" in finding
    assert "band over the 1 cohort" not in finding
    assert "1 training steps" not in finding  # time_step 1: "1 training step"


@pytest.mark.parametrize("outcome", ["y", "a_rather_long_outcome_name_of_a_study_metric"])
def test_the_profile_title_fits_its_figure(second_exposure, outcome):
    import matplotlib

    matplotlib.use("Agg")
    from didmem.results.plotting import plot_profile

    df, _ = didmem.datasets.simulate_exposures(seed=0)
    df = df.rename(columns={"y": outcome})
    res = didmem.DiDEstimator(exposure=2, n_bootstrap=99, seed=0).fit(
        didmem.Panel(df, unit="unit", time="time", cohort=["cohort", "cohort_2"],
                     outcome=outcome))
    ax = plot_profile(res)
    fig = ax.figure
    fig.canvas.draw()
    box = ax.title.get_window_extent(fig.canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width, (box, fig.bbox)
    assert ax.get_title().startswith("Exposure 2: ")
    matplotlib.pyplot.close(fig)
