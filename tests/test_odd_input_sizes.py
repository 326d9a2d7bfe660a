"""Options that size an allocation are refused by name before numpy, torch or the machine
fails (issue 50): counts of things computed one by one are bounded by the shared
declaration (``didmem._validation.Count``), sizes by this machine's memory
(``check_fits_memory``); and a pilot fitted from moments is refused by power_analysis with
a message, not an AttributeError."""

from __future__ import annotations

import pytest

import didmem
from didmem._validation import MAX_COUNT, check_fits_memory, machine_memory
from didmem.errors import ParameterError
from didmem.power import Assumptions, power_analysis

HUGE = 10 ** 12


@pytest.fixture(scope="module")
def panel():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=12,
                                           n_never_treated=30, n_times=5, seed=0)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


def test_power_analysis_refuses_counts_and_sizes_by_name(panel):
    """n_simulations=10**12 raised numpy's MemoryError (7.28 TiB); units_per_cohort,
    n_validation and an assumed number of checkpoints likewise."""
    with pytest.raises(ParameterError, match=r"'n_simulations' parameter of power_analysis "
                                             rf"must be an integer in \[2, {MAX_COUNT}\]"):
        power_analysis(panel, units_per_cohort=20, n_simulations=HUGE)
    with pytest.raises(ParameterError, match="'units_per_cohort' parameter of power_analysis "
                                             "must leave room for each simulated study's"):
        power_analysis(panel, units_per_cohort=HUGE, n_simulations=2, effect=1.0)
    with pytest.raises(ParameterError, match="'n_validation' parameter of power_analysis "
                                             "must leave room"):
        power_analysis(panel, units_per_cohort=20, n_validation=HUGE, n_simulations=2,
                       effect=1.0)
    with pytest.raises(ParameterError, match="'n_checkpoints' parameter of Assumptions must "
                                             "leave room for the outcome covariance"):
        power_analysis(Assumptions(n_cohorts=2, n_checkpoints=HUGE), units_per_cohort=20,
                       effect=1.0)
    # the analytic route prices a huge design without allocating by its size
    table = power_analysis(panel, units_per_cohort=HUGE, method="analytic",
                           effect=1.0).to_frame()
    assert table["power"].iloc[0] > 0.99


def test_power_analysis_refuses_a_pilot_fitted_from_moments(panel, tmp_path):
    """A result fitted from a folder (per-cohort moments) raised AttributeError ('w') in
    either method."""
    frame = panel.to_frame() if hasattr(panel, "to_frame") else None
    if frame is None:  # pragma: no cover - the panel's own frame
        pytest.skip("Panel has no to_frame")
    units = frame["unit"].unique()
    frame[frame["unit"].isin(units[::2])].to_parquet(tmp_path / "a.parquet")
    frame[~frame["unit"].isin(units[::2])].to_parquet(tmp_path / "b.parquet")
    scan = didmem.Panel.scan(tmp_path, unit="unit", time="time", cohort="cohort",
                             outcome="y")
    result = didmem.DiDEstimator(n_bootstrap=99).fit(scan)
    assert result.prepared.y is None  # the moments route
    for method in ("simulated", "analytic"):
        with pytest.raises(ParameterError, match="fitted from per-cohort moments"):
            power_analysis(result, units_per_cohort=20, method=method, n_simulations=2)


def test_sensitivity_and_band_coverage_bound_their_counts(panel):
    agg = didmem.DiDEstimator(n_bootstrap=99, base_period="universal").fit(
        panel).aggregate("dynamic")
    for name in ("grid_points", "simulations"):
        with pytest.raises(ParameterError, match=rf"'{name}' parameter of sensitivity must be "
                                                 rf"an integer in \[10, {MAX_COUNT}\]"):
            didmem.sensitivity(agg, restriction="relative_magnitudes", m=[0.5],
                               **{name: HUGE})
    from didmem.montecarlo import band_coverage

    with pytest.raises(ParameterError, match="'reps' parameter of band_coverage"):
        band_coverage(reps=HUGE)


@pytest.mark.parametrize("name, what", [("hidden_size", "the model"),
                                        ("n_words", "the model"),
                                        ("max_positions", "the model.s position caches"),
                                        ("n_validation", "the corpus's token ids"),
                                        ("truth_draws", "the truth's draws")])
def test_lab_config_refuses_sizes_beyond_memory(name, what):
    """--hidden-size 10**12 failed in torch's allocator, --n-validation and --truth-draws
    in numpy; --n-words and --max-positions ran on."""
    from didmem.lab import LabConfig

    with pytest.raises(ParameterError, match=rf"'{name}' parameter of LabConfig must leave "
                                             rf"room for {what}"):
        LabConfig(**{name: HUGE})
    LabConfig()  # the defaults fit


def test_check_fits_memory_shape():
    have = machine_memory()
    if have is None:  # pragma: no cover - not a POSIX system
        pytest.skip("the system does not report its memory")
    check_fits_memory("f", "n", 3, have / 2, "its arrays")  # fits: nothing raised
    with pytest.raises(ParameterError, match=r"^The 'n' parameter of f must leave room for "
                                             r"its arrays: about .* GiB, more than this "
                                             r"machine's .* GiB of memory\. Got 3\.$"):
        check_fits_memory("f", "n", 3, 2 * have, "its arrays")


@pytest.mark.parametrize("call", ["random_timing_fisher", "random_timing_draws",
                                  "compare_profiles", "heterogeneity", "moderator_slopes"])
def test_the_fifth_wave_counts_are_bounded(call):
    """``RandomTimingEstimator(n_fisher=10**12)`` ended in numpy's MemoryError (182 TiB); the
    contrasts' ``n_draws`` had no bound either. Each is refused by name, before any work."""
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=10, n_never_treated=10,
                                           n_times=4, seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    huge = 10**12
    calls = {
        "random_timing_fisher": lambda: didmem.RandomTimingEstimator(n_fisher=huge).fit(panel),
        "random_timing_draws": lambda: didmem.RandomTimingEstimator(n_draws=huge).fit(panel),
        "compare_profiles": lambda: didmem.compare_profiles(
            *[didmem.DiDEstimator(n_bootstrap=0).fit(panel)] * 2, n_draws=huge),
        "heterogeneity": lambda: didmem.heterogeneity(
            panel, by=df.groupby("unit")["unit"].first() % 2, n_draws=huge),
        "moderator_slopes": lambda: didmem.moderator_slopes(
            panel, df.groupby("unit")["unit"].first().astype(float), n_draws=huge),
    }
    with pytest.raises(didmem.errors.ParameterError, match=r"'n_(fisher|draws)' parameter .*1000000"):
        calls[call]()
