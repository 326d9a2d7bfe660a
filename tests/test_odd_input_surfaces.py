"""Odd input on the fifth wave's surfaces (issue 50's probe): a folder's options, random
timing on a weighted panel, moderators without spread, contrasts' results handed to the report
and the figures, a tracker's step. Each is refused in one line naming what is wrong, never a
silently ignored input or a foreign exception."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import didmem  # noqa: E402
from didmem.errors import EstimationError, ParameterError  # noqa: E402
from didmem.results import plotting  # noqa: E402

COLUMNS = dict(unit="unit", time="time", cohort="cohort", outcome="y")


@pytest.fixture(scope="module")
def frame():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=12, n_never_treated=14,
                                           n_times=5, seed=21)
    return df


@pytest.fixture(scope="module")
def panel(frame):
    return didmem.Panel(frame, **COLUMNS)


@pytest.fixture
def folder(tmp_path, frame):
    frame.iloc[::2].to_parquet(tmp_path / "a.parquet", index=False)
    frame.iloc[1::2].to_parquet(tmp_path / "b.parquet", index=False)
    return tmp_path


# ------------------------------------------------------------------------ a folder's options
@pytest.mark.parametrize("options, name", [
    ({"never_treated": "zero"}, "never_treated"),  # before: numpy's ValueError at the fit
    ({"never_treated": True}, "never_treated"),
    ({"memory_bytes": 0}, "memory_bytes"),  # before: 0 and False were read as the default
    ({"memory_bytes": True}, "memory_bytes"),
    ({"memory_bytes": -5}, "memory_bytes"),
])
def test_scan_refuses_odd_options_by_name(folder, options, name):
    with pytest.raises(ParameterError, match=f"'{name}' parameter of Panel.scan"):
        didmem.Panel.scan(folder, **COLUMNS, **options)


def test_scan_with_a_never_treated_code_equals_the_panel(folder, frame):
    coded = frame.assign(cohort=frame["cohort"].replace(np.inf, 0.0))
    for f in folder.glob("*.parquet"):
        f.unlink()
    coded.iloc[::2].to_parquet(folder / "a.parquet", index=False)
    coded.iloc[1::2].to_parquet(folder / "b.parquet", index=False)
    est = didmem.DiDEstimator(n_bootstrap=0)
    got = est.fit(didmem.Panel.scan(folder, **COLUMNS, never_treated=0)).to_frame()
    want = est.fit(didmem.Panel(frame, **COLUMNS)).to_frame()
    np.testing.assert_allclose(got["estimate"], want["estimate"], atol=1e-9)


# ------------------------------------------------------------------------ random timing
@pytest.mark.parametrize("role", ["weights", "cluster"])
def test_random_timing_refuses_what_it_would_ignore(frame, role):
    # before: a weighted panel gave the unweighted estimates, silently
    data = frame.assign(extra=1.0 + frame["unit"] % 3)
    with_role = didmem.Panel(data, **COLUMNS, **{role: "extra"})
    with pytest.raises(ParameterError, match=f"{role} column 'extra'"):
        didmem.RandomTimingEstimator(n_draws=0).fit(with_role)


# ------------------------------------------------------------------------ moderators
def test_a_moderator_without_spread_is_refused_naming_the_cohort(panel):
    # before: every slope NaN, and the summary ended in numpy's LinAlgError
    constant = pd.Series(1.0, index=panel.units, name="length")
    with pytest.raises(EstimationError, match="moderator 'length' takes the single value 1 "
                                              "among the instances of cohort 1"):
        didmem.moderator_slopes(panel, constant, n_draws=99, seed=0)


def test_a_moderator_of_strings_is_refused(panel):
    # before: numpy's TypeError on pandas' string dtype
    text = pd.Series("x", index=panel.units, dtype="string")
    with pytest.raises(ParameterError, match="not numeric"):
        didmem.moderator_slopes(panel, text, n_draws=99, seed=0)


def test_an_unnamed_feature_is_not_called_none(panel):
    values = pd.Series(np.linspace(0, 1, len(panel.units)), index=panel.units)
    values.iloc[2] = np.inf
    with pytest.raises(ParameterError) as info:
        didmem.moderator_slopes(panel, values, n_draws=99, seed=0)
    assert "None" not in str(info.value) and "unit 2" in str(info.value)


# ------------------------------------------------------------ contrasts in the report and plots
@pytest.fixture(scope="module")
def contrasts(panel):
    fit = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    feature = pd.Series(np.where(panel.units % 2 == 0, "even", "odd"), index=panel.units)
    moderator = pd.Series(np.linspace(0, 1, len(panel.units)), index=panel.units)
    return {"ProfileDifference": didmem.compare_profiles(fit, fit, n_draws=99, seed=0),
            "Heterogeneity": didmem.heterogeneity(panel, feature, n_draws=99, seed=0),
            "ModeratorResult": didmem.moderator_slopes(panel, moderator, n_draws=99, seed=0)}


@pytest.mark.parametrize("kind", ["ProfileDifference", "Heterogeneity", "ModeratorResult"])
def test_the_report_refuses_a_contrast_naming_what_to_do(tmp_path, contrasts, kind):
    # before: AttributeError: ... has no attribute 'outcome'
    with pytest.raises(ParameterError, match=f"is a {kind}: "):
        didmem.report.write_report(contrasts[kind], tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("kind", ["ProfileDifference", "Heterogeneity", "ModeratorResult"])
@pytest.mark.parametrize("figure", sorted(plotting.PLOTS))
def test_a_figure_of_cells_refuses_a_contrast(contrasts, kind, figure):
    # before: AttributeError ('band'), KeyError ('estimate') or a message about 'value'
    with pytest.raises(ParameterError, match=f"got a {kind}: draw"):
        plotting.plot_result(contrasts[kind], figure)
    plt.close("all")


def test_the_pretrends_figure_draws_a_membership_result(panel):
    # before: AttributeError: 'MembershipResult' object has no attribute 'pretest'
    result = didmem.MembershipInferenceEstimator().fit(panel)
    ax = plotting.plot_result(result, "pretrends")
    assert "no pre-test of parallel trends" in ax.get_title() and len(ax.containers) > 0
    plt.close("all")


# ------------------------------------------------------------------------ the tracker
def test_the_tracker_refuses_a_step_beyond_int64(tmp_path):
    # before: accepted, and the next score ended in OverflowError
    pytest.importorskip("torch")
    from didmem.track import MemorisationTracker

    tracker = MemorisationTracker(tmp_path / "t", np.ones((3, 8), dtype=int))
    with pytest.raises(ParameterError, match="at most 2\\*\\*63 - 1"):
        tracker.observe(np.uint64(2**64 - 1), [0])
    tracker.observe(np.int64(2**62), [0])  # a large step that fits is kept
    assert tracker._last_observed == 2**62


# ------------------------------------------------------------------------ cohorts
def test_a_sequence_index_beyond_int64_is_refused_not_read_as_validation():
    # before: uint64 2**63 + 5 wrapped to a negative index, cohort inf (never treated)
    huge = np.array([3, 2**63 + 5], dtype=np.uint64)
    with pytest.raises(ParameterError, match="9223372036854775813 at entry 1"):
        didmem.cohort_from_sequence_index(huge, batch_size=1, steps_per_checkpoint=1)
    fits = np.array([3, 5], dtype=np.uint64)
    np.testing.assert_array_equal(
        didmem.cohort_from_sequence_index(fits, batch_size=1, steps_per_checkpoint=1),
        didmem.cohort_from_sequence_index([3, 5], batch_size=1, steps_per_checkpoint=1))


def test_an_anticipation_beyond_every_cohort_is_named(panel):
    # before: "no treated cohort with a pre-treatment period remains", naming no option
    with pytest.raises(EstimationError, match="with anticipation=1000000000 every treated cohort"):
        didmem.DiDEstimator(n_bootstrap=0, anticipation=10**9).fit(panel)


def test_the_event_study_draws_a_random_timing_result(panel):
    # before: AttributeError: 'RandomTimingAggregate' object has no attribute 'alpha'
    result = didmem.RandomTimingEstimator(n_draws=199, seed=0).fit(panel)
    ax = plotting.plot_result(result, "event_study")
    assert "the estimator's 95% band" in ax.get_title()
    assert "no pre-test of parallel trends for a RandomTimingResult" in ax.get_title()
    assert len(ax.containers) == 2  # before and after treatment
    plt.close("all")


def test_comparing_a_saved_result_advises_only_what_exists(tmp_path, panel):
    # before: "... or pass independent=True", a keyword compare_profiles does not take
    import inspect

    fit = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    fit.save(tmp_path / "r.parquet")
    saved = didmem.load_result(tmp_path / "r.parquet")
    with pytest.raises(EstimationError, match="refit the panel") as info:
        didmem.compare_profiles(saved, fit, n_draws=99)
    taken = inspect.signature(didmem.compare_profiles).parameters
    for advised in ("independent",):
        assert advised in taken or f"{advised}=" not in str(info.value)
