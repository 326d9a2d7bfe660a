"""Regression tests (issue 11): unusual but legitimate input gives the right number or a
clear error, never a silent wrong number."""

import warnings

import numpy as np
import pandas as pd
import pytest

import didmem


def _float_time_frame(first_cohort):
    """Times 0.1 .. 0.6, cohorts ``first_cohort`` and 0.4, a true effect of 1 after treatment."""
    rng = np.random.default_rng(0)
    times = np.round(np.arange(1, 7) * 0.1, 10)
    rows = []
    for i in range(200):
        g = [first_cohort, 0.4, np.inf, np.inf][i % 4]
        a = rng.normal()
        for t in times:
            treated = np.isfinite(g) and t >= round(g, 10)
            rows.append((i, t, g, a + t + (1.0 if treated else 0.0) + rng.normal(scale=0.1)))
    return pd.DataFrame(rows, columns=["unit", "time", "cohort", "y"])


def test_cohort_with_rounding_noise_is_matched_to_the_time_grid():
    df = _float_time_frame(0.1 + 0.2)  # 0.30000000000000004, not the time 0.3
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    assert 0.3 in set(panel.cohorts)
    res = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    inst = res.aggregate("instantaneous").to_frame()
    np.testing.assert_allclose(inst["estimate"], 1.0, atol=0.1)
    frame = res.to_frame()
    # the cohort's own period is post-treatment and its base is the period before
    own = frame[(frame["cohort"] == 0.3) & (frame["time"] == 0.3)]
    assert own["post"].item() and own["base_time"].item() == pytest.approx(0.2)


def test_cohort_between_times_is_refused():
    df = _float_time_frame(0.35)
    with pytest.raises(didmem.PanelError, match=r"not times of column 'time': 0\.35"):
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


def test_dynamic_overall_of_pre_periods_only_is_nan():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20,
                                           n_never_treated=40, seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    for draws in (0, 49):
        res = didmem.DiDEstimator(n_bootstrap=draws, seed=0).fit(panel)
        with warnings.catch_warnings():  # few draws: the band may fall back to pointwise
            warnings.simplefilter("ignore", didmem.InferenceWarning)
            agg = res.aggregate("dynamic", min_e=-3, max_e=-1)
        assert agg.keys.tolist() == [-3.0, -2.0, -1.0][-agg.keys.size:] and agg.keys.max() < 0
        o = agg.overall
        assert np.isnan(o.estimate) and np.isnan(o.std_error)
        assert np.isnan(o.ci_lower) and np.isnan(o.ci_upper) and not o.significant
        assert np.isfinite(agg.estimates).all()  # the keys themselves are estimated


@pytest.fixture(scope="module")
def r_coded():
    """R's convention: never-treated units have cohort 0 (times 2003..2007)."""
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20,
                                           n_never_treated=40, seed=0)
    df["time"] += 2003
    df["cohort"] = np.where(np.isinf(df["cohort"]), 0, df["cohort"] + 2003)
    return df


def test_never_treated_zero_gets_advice(r_coded):
    panel = didmem.Panel(r_coded, unit="unit", time="time", cohort="cohort", outcome="y")
    with pytest.raises(didmem.EstimationError, match="never_treated=0"):
        didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    with pytest.warns(didmem.DataDroppedWarning, match="pass never_treated=0"):
        with pytest.warns(didmem.DataDroppedWarning, match="no never-treated"):
            didmem.DiDEstimator(n_bootstrap=0, control_group="not_yet_treated").fit(panel)
    coded = didmem.Panel(r_coded, unit="unit", time="time", cohort="cohort", outcome="y",
                         never_treated=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        didmem.DiDEstimator(n_bootstrap=0).fit(coded)


@pytest.mark.parametrize("control", ["never_treated", "not_yet_treated"])
def test_everyone_treated_at_the_first_period(control):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20,
                                           n_never_treated=40, seed=0)
    df["cohort"] = df["time"].min() + 1
    df["time"] += 1  # the first period is 1: every unit is treated from it on
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    with pytest.raises(didmem.EstimationError,
                       match="every one of the 100 units is treated by the first period 1"):
        didmem.DiDEstimator(n_bootstrap=0, control_group=control).fit(panel)


def test_constant_outcome_pretest_note_agrees_with_the_cell_count():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20,
                                           n_never_treated=40, seed=0)
    panel = didmem.Panel(df.assign(c=1.0), unit="unit", time="time", cohort="cohort",
                         outcome="c")
    res = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    n_pre = int((~res.to_frame()["post"]).sum())
    assert n_pre == 3
    assert res.pretest.df == 0
    assert "no pre-treatment cells" not in res.pretest.note
    assert f"none of the {n_pre} pre-treatment cells has a standard error" in res.pretest.note
    ax = res.plot("pretrends")
    title = ax.get_title()
    plt.close(ax.figure)
    assert f"{n_pre} pre-treatment cells" in title and f"none of the {n_pre}" in title
    assert f"none of the {n_pre}" in res.summary()


def test_pretrends_title_says_which_cells_the_pretest_leaves_out():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20,
                                           n_never_treated=40, seed=0)
    df.loc[df["time"] <= 1, "y"] = 0.0  # every change from time 0 to 1 is zero
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    res = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    assert res.pretest.df == 1
    ax = res.plot("pretrends")
    title = ax.get_title()
    plt.close(ax.figure)
    assert "3 pre-treatment cells" in title
    assert f"event-time pre-test p = {res.pretrend_test().pvalue:.3g}" in title
    assert "(2 cells without a standard error left out)" in title


@pytest.mark.parametrize("kwargs", [{"n_cohorts": 10**30},
                                    {"n_cohorts": 10**6, "units_per_cohort": 10**6}])
def test_simulate_panel_larger_than_memory_is_refused_with_its_size(kwargs):
    """A panel no machine holds is refused by name and size before numpy is asked for it
    (was numpy's "Maximum allowed size exceeded" or an allocation error)."""
    with pytest.raises(didmem.ParameterError, match=r"simulate_panel would make .* rows .*GiB"):
        didmem.datasets.simulate_panel(**kwargs)
