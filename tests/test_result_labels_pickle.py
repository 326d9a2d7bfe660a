"""Regression tests (issue 11): interval labels follow alpha; results pickle and deep-copy."""

import copy
import pickle

import numpy as np
import pytest

import didmem
from didmem.report import render_report


@pytest.fixture(scope="module")
def panel():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20, n_never_treated=40,
                                           seed=0)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


@pytest.fixture(scope="module")
def res90(panel):
    return didmem.DiDEstimator(n_bootstrap=99, seed=0, alpha=0.1).fit(panel)


def test_summary_labels_follow_alpha(res90):
    text = res90.summary()
    assert "90% CI" in text and "95%" not in text
    agg = res90.aggregate("dynamic")
    assert agg.alpha == 0.1
    assert agg.summary().splitlines()[0].count("90% CI") == 1
    assert "95%" not in agg.summary()


def test_report_labels_follow_alpha(res90):
    page = render_report(res90, figures=())
    assert "95%" not in page and "5% level" not in page
    assert "90% CI" in page and "10% level" in page


def test_saved_aggregations_keep_alpha(res90, tmp_path):
    pytest.importorskip("pyarrow")
    loaded = didmem.load_result(res90.save(tmp_path / "r.parquet"))
    assert loaded.aggregate("group").alpha == 0.1
    assert "90% CI" in render_report(loaded, figures=())


def test_summary_shows_the_outcome_used(res90):
    assert "outcome='y'" in res90.summary()
    assert "outcome=None" not in res90.summary()


@pytest.mark.parametrize("clone", [lambda r: pickle.loads(pickle.dumps(r)), copy.deepcopy])
def test_results_pickle_and_deepcopy(res90, clone):
    again = clone(res90)
    assert again.summary() == res90.summary()
    np.testing.assert_array_equal(again.estimates, res90.estimates)
    with pytest.raises(TypeError):
        again.params["alpha"] = 0.5
    assert not again.estimates.flags.writeable
    agg = clone(res90.aggregate("group"))
    assert agg.options["time"] is None
    with pytest.raises(TypeError):
        agg.options["time"] = 1


def test_saved_and_cell_results_pickle(res90, panel, tmp_path):
    pytest.importorskip("pyarrow")
    loaded = didmem.load_result(res90.save(tmp_path / "r.parquet"))
    again = pickle.loads(pickle.dumps(loaded))
    assert again.aggregate("group").overall == loaded.aggregate("group").overall
    twfe = didmem.TWFEEstimator().fit(panel)
    again = pickle.loads(pickle.dumps(twfe))
    assert again.to_frame().equals(twfe.to_frame())
    assert dict(again.params) == dict(twfe.params)
