"""The lab with repeats: a recorded order where analysed instances are seen again."""

import warnings

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.lab.config import demo_config, quick_config
from didmem.lab.design import build_design


def _tiny(**changes):
    settings = dict(n_steps=36, checkpoint_every=12, burn_in=0, n_analysed=48,
                    n_validation=32, exposures=2, repeat_share=0.5)
    settings.update(changes)
    return quick_config(seed=2, **settings)


def test_design_places_later_exposures_in_later_macro_batches():
    design = build_design(demo_config(exposures=3, repeat_share=0.3))
    cohorts = design.exposure_cohorts()
    assert np.isfinite(cohorts[:, 1]).sum() > 100 and np.isfinite(cohorts[:, 2]).sum() > 10
    finite = np.isfinite(cohorts[:, 1])
    assert (cohorts[finite, 1] > cohorts[finite, 0]).all()
    third = np.isfinite(cohorts[:, 2])
    assert (cohorts[third, 2] > cohorts[third, 1]).all() and finite[third].all()
    # the order holds the instance again at the repeat positions, never at analysed ones
    order = design.order
    np.testing.assert_array_equal(order[design.repeat_positions],
                                  design.analysed_ids[design.repeat_analysed])
    assert not np.isin(design.repeat_positions, design.analysed_positions).any()
    # the twin replaces every position of every analysed instance
    twin = design.twin_order()
    assert not np.isin(twin, design.analysed_ids).any()
    # the exact run of exposure 2 at a cohort replaces exactly those repeats
    g = int(np.nanmin(np.where(np.isfinite(cohorts[:, 1]), cohorts[:, 1], np.nan)))
    changed = np.flatnonzero(design.exposure_order(2, g) != order)
    sel = (design.repeat_exposures == 2) & (design.repeat_cohorts == g)
    np.testing.assert_array_equal(changed, design.repeat_positions[sel])


def test_exposure_groups_are_the_history_matched_controls():
    design = build_design(demo_config(exposures=2))
    cohorts = design.exposure_cohorts()
    g = int(np.nanmin(np.where(np.isfinite(cohorts[:, 1]), cohorts[:, 1], np.nan))) + 40
    treated, controls, control_hist, treated_hist = design.exposure_groups(2, g)
    assert (cohorts[treated, 1] == g).all() and treated.size > 50
    assert np.isinf(cohorts[controls, 1]).all() and controls.size > 50
    assert set(cohorts[controls, 0]) == set(cohorts[treated, 0])
    # the codes name the first cohorts consistently for treated and controls
    first = dict(zip(control_hist, cohorts[controls, 0]))
    assert all(first[h] == c for h, c in zip(treated_hist, cohorts[treated, 0]))


def test_demo_with_repeats_has_longer_macro_batches():
    cfg = demo_config(exposures=2)
    assert (cfg.n_steps, cfg.checkpoint_every, cfg.n_analysed) == (320, 40, 320)
    assert len(cfg.cohorts) == len(demo_config().cohorts) == 7
    assert cfg.repeat_gap == "geometric" and cfg.repeat_share == 0.5
    assert demo_config(exposures=2, n_analysed=200).n_analysed == 200


def test_one_exposure_keeps_the_design():
    one = build_design(quick_config(seed=4))
    assert one.repeat_positions.size == 0
    assert one.exposure_cohorts().shape == (len(one.analysed_ids), 1)


def test_no_room_for_repeats_is_refused():
    with pytest.raises(didmem.ParameterError, match="no filler position left for exposure 2"):
        build_design(quick_config(exposures=2, n_analysed=180, repeat_share=1.0))
    with pytest.raises(didmem.ParameterError, match="'repeat_share' parameter of LabConfig"):
        quick_config(exposures=2, repeat_share=0.0)


@pytest.fixture(scope="module")
def repeat_run(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from didmem.lab import run

    return run(tmp_path_factory.mktemp("lab") / "repeats", config=_tiny())


def test_panel_and_truth_of_a_run_with_repeats(repeat_run):
    panel, truth = repeat_run.panel, repeat_run.truth
    assert "cohort_2" in panel.columns and "exposure" == truth.columns[0]
    sample = pd.read_parquet(repeat_run.out_dir / "sample.parquet")
    per_unit = panel.groupby("unit")["cohort_2"].first()
    expected = sample.set_index("unit")["cohort_2"].reindex(per_unit.index)
    pd.testing.assert_series_equal(per_unit, expected, check_names=False)
    later = truth[truth["exposure"] == 2]
    assert later["exact"].all() and later["tau_twin"].isna().all()
    assert (later.loc[later["time"] < later["cohort"], "tau"] == 0).all()
    # the direct effect: the exact run's total effect less its drift on the controls
    np.testing.assert_allclose(later["tau"], later["tau_total"] - later["spillover"])
    assert (later.loc[later["time"] < later["cohort"], "spillover"] == 0).all()
    assert (later.loc[later["time"] >= later["cohort"], "spillover"] != 0).any()
    first = truth[truth["exposure"] == 1]  # the first exposure's truth is direct too
    np.testing.assert_allclose(first["tau"], first["tau_total"] - first["spillover"])
    assert (first.loc[first["time"] >= first["cohort"], "spillover"] != 0).any()
    assert later[["tau_nyt", "spillover_nyt", "tau_se"]].isna().all().all()
    counts = per_unit.value_counts()
    for g, part in later.groupby("cohort"):
        assert (part["n_units"] == counts[g]).all()
    # the second exposure's instantaneous effect is positive on the log-likelihood
    inst = later[(later["metric"] == "mean_token_loglik") & (later["time"] == later["cohort"])]
    assert (inst["tau"] > 0).all()
    order = pd.read_parquet(repeat_run.out_dir / "data_order.parquet")
    assert set(order["exposure"]) == {0, 1, 2}
    assert repeat_run.instantaneous()["cohort"].tolist() == [12, 24, 36]


def test_did_estimates_the_second_exposure_on_the_lab(repeat_run):
    panel = didmem.Panel(repeat_run.panel, unit="unit", time="time",
                         cohort=["cohort", "cohort_2"], outcome="mean_token_loglik")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", didmem.SmallCohortWarning)
        res = didmem.DiDEstimator(exposure=2, n_bootstrap=0).fit(panel)
    frame = res.to_frame()
    assert set(frame["cohort"]) == set(repeat_run.panel["cohort_2"].dropna())
    assert np.isfinite(frame["estimate"]).all()
    assert (res.histories["status"] == "used").sum() == 2  # first cohorts 12 and 24
