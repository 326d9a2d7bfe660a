"""A result says the same fitted or saved (issue 36, item 2).

For a fitted result and the same result saved and loaded, with never-treated and with
not-yet-treated controls and a known truth: the HTML reports are identical except for the
date, ``summary()`` and every aggregation's ``to_frame()`` are equal, and so are the resolved
settings the report reads. The panel has sampling weights, so the cohorts' weights in the
averages over cohorts (R did's pg) differ from the cells' treated counts: a saved result that
lost them would set another truth beside the persistent aggregation.
"""

import re

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.datasets import simulate_panel
from didmem.report import render_report

pytest.importorskip("pyarrow")
pytest.importorskip("matplotlib")

STAMP = re.compile(r"<p class='meta'>didmem [^<]*UTC; ")


def _weighted_panel():
    data, truth = simulate_panel(n_cohorts=3, units_per_cohort=20, n_never_treated=30,
                                 n_times=5, cohort_scale=[0.5, 1.0, 2.0], seed=3)
    weight = np.random.default_rng(0).uniform(0.2, 3.0, data["unit"].nunique())
    data["w"] = weight[data["unit"].astype(int).to_numpy() % weight.size]
    panel = didmem.Panel(data, unit="unit", time="time", cohort="cohort", outcome="y",
                         weights="w")
    return panel, truth


@pytest.fixture(scope="module", params=["never_treated", "not_yet_treated"])
def fitted_and_saved(request, tmp_path_factory):
    panel, truth = _weighted_panel()
    fitted = didmem.DiDEstimator(n_bootstrap=99, seed=0,
                                 control_group=request.param).fit(panel)
    path = tmp_path_factory.mktemp("saved") / "result.parquet"
    return fitted, didmem.load_result(fitted.save(path)), truth


def _page(result, truth) -> list:
    text = render_report({"the result": result}, truth=truth)
    assert len(STAMP.findall(text)) == 1  # the date, the one line allowed to differ
    return STAMP.sub("<p class='meta'>", text).splitlines()


def test_reports_are_identical(fitted_and_saved):
    fitted, saved, truth = fitted_and_saved
    page_fitted, page_saved = _page(fitted, truth), _page(saved, truth)
    differ = [(a, b) for a, b in zip(page_fitted, page_saved) if a != b]
    assert len(page_fitted) == len(page_saved) and not differ, differ[:1]
    settings = next(line for line in page_saved if "<h3>Settings</h3>" in line)
    assert f"multiplier</td><td>{fitted.settings.multiplier} (default)" in settings


def test_summary_and_every_aggregation_are_equal(fitted_and_saved):
    fitted, saved, _ = fitted_and_saved
    assert saved.summary() == fitted.summary()
    pd.testing.assert_frame_equal(saved.to_frame(), fitted.to_frame())
    for name in didmem.results.AGGREGATIONS + tuple(didmem.results.ALIASES):
        pd.testing.assert_frame_equal(saved.aggregate(name).to_frame(),
                                      fitted.aggregate(name).to_frame())
        assert saved.aggregate(name).overall == fitted.aggregate(name).overall


def test_settings_are_kept(fitted_and_saved):
    fitted, saved, _ = fitted_and_saved
    assert saved.settings == fitted.settings
    assert fitted.settings.multiplier == "normal"  # the default, resolved
    assert fitted.settings.correction_name == "welch"
    shares = fitted.settings.cohort_shares
    assert sorted(shares) == [1.0, 2.0, 3.0] and all(0 < w < 1 for w in shares.values())
    # the shares are not in the cells' treated counts' proportions here, so which weights
    # the truth beside an aggregation takes matters
    counts = fitted.to_frame().drop_duplicates("cohort").set_index("cohort")["n_treated"]
    share = np.array([shares[g] for g in counts.index])
    assert not np.allclose(share / share.sum(), counts / counts.sum(), rtol=1e-3)
    # a string and an object never share an attribute name
    assert not hasattr(saved, "inference")


def test_settings_pickle(fitted_and_saved):
    import pickle

    _, saved, _ = fitted_and_saved
    again = pickle.loads(pickle.dumps(saved))
    assert again.settings == saved.settings


def test_a_later_exposure_reports_the_same_saved(tmp_path):
    """The second exposure's result too: its truth is matched by exposure, fitted or saved."""
    from didmem.datasets import simulate_exposures

    data, truth = simulate_exposures(n_first=3, units_per_cohort=40, n_never_treated=60,
                                     gaps=(2,), seed=5)
    panel = didmem.Panel(data, unit="unit", time="time", cohort=["cohort", "cohort_2"],
                         outcome="y")
    fitted = didmem.DiDEstimator(n_bootstrap=99, seed=0, exposure=2).fit(panel)
    saved = didmem.load_result(fitted.save(tmp_path / "second.parquet"))
    assert saved.summary() == fitted.summary() and saved.settings == fitted.settings
    page_fitted, page_saved = _page(fitted, truth), _page(saved, truth)
    assert page_fitted == page_saved
    assert sum("true_tau" in line for line in page_saved) > 0
