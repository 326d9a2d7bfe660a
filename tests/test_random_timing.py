"""RandomTimingEstimator and its kernels: oracles, properties, parity through the public API.

The numbers of R ``staggered`` are in tests/test_reference_random_timing.py; here the
estimator's public path is checked against the same reference files, the vectorised cells
against the general linear-estimand path, the fast generalised inverse against numpy's, and
the Fisher test and the band draws against direct computations.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.errors import DataDroppedWarning, ParameterError
from didmem.inference.random_timing import weights
from didmem.inference.random_timing.design import (
    TimingDesign,
    cell_estimates,
    generalised_inverse,
    linear_estimates,
)
from didmem.inference.random_timing.fisher import fisher_test, permuted_design
from didmem.inference.random_timing.fit import _cell_draws

from .conftest import reference_file


def _panel(name):
    frame = pd.read_csv(reference_file(f"rt_{name}.csv"))
    return frame, didmem.Panel(frame, unit="i", time="t", cohort="g", outcome="y")


def _random_design(rng, n_t=7, cohorts=(2, 3, 5, 6, np.inf), size=9):
    g = np.repeat(np.asarray(cohorts, dtype=float), size)
    y = np.cumsum(rng.standard_normal((g.size, n_t)), axis=1) + rng.standard_normal((g.size, 1))
    return TimingDesign.from_paths(np.arange(1.0, n_t + 1), g, y), g, y


@pytest.mark.reference
@pytest.mark.parametrize("method,params", [
    ("staggered", {}), ("staggered_beta0", {"beta": 0.0}), ("staggered_cs", {"beta": 1}),
    ("staggered_sa", {"beta": 1, "control_group": "last_treated"})])
@pytest.mark.parametrize("panel", ["sim1", "sim2"])
def test_estimator_gives_r_staggered_numbers(panel, method, params):
    ref = pd.read_csv(reference_file("rt_estimates.csv"))
    ref = ref[(ref.panel == panel) & (ref.method == method)]
    _, data = _panel(panel)
    est = didmem.RandomTimingEstimator(n_draws=0, **params)
    if panel == "sim2" and params.get("beta") == 1:
        with pytest.warns(DataDroppedWarning, match="first checkpoint"):
            result = est.fit(data)
    else:
        result = est.fit(data)
    for ours, theirs in (("simple", "simple"), ("group", "cohort"), ("calendar", "calendar")):
        row = result.aggregate(ours).overall
        want = ref[ref.estimand == theirs].iloc[0]
        for a, b in (("estimate", "estimate"), ("std_error", "se"),
                     ("std_error_neyman", "se_neyman")):
            assert row[a] == pytest.approx(want[b], rel=1e-8, abs=1e-13), (ours, a)
    dyn = result.aggregate("dynamic").to_frame().set_index("event_time")
    want = ref[ref.estimand == "eventstudy"].set_index("event_time")
    got = dyn.loc[want.index]
    np.testing.assert_allclose(got["estimate"], want["estimate"], rtol=1e-8, atol=1e-13)
    np.testing.assert_allclose(got["std_error"], want["se"], rtol=1e-8, atol=1e-13)
    np.testing.assert_allclose(got["std_error_neyman"], want["se_neyman"], rtol=1e-8,
                               atol=1e-13)


@pytest.mark.parametrize("last_treated", [False, True])
@pytest.mark.parametrize("beta", [None, 0.0, 1.0, 0.4])
def test_vectorised_cells_equal_general_path(last_treated, beta):
    design, _, _ = _random_design(np.random.default_rng(3))
    cells = cell_estimates(design, beta, last_treated)
    assert cells.estimate.size > 10
    for g, t, est, se, se_n, df in zip(cells.cohort_index, cells.time_index, cells.estimate,
                                       cells.std_error, cells.std_error_neyman, cells.df):
        a_theta = np.zeros((design.cohorts.size, design.n_times))
        a_0 = np.zeros_like(a_theta)
        w = weights.cell_weights(design.codes, design.count, g, t, last_treated)
        a_theta[:, t] = w
        a_0[:, int(design.codes[g]) - 1] = w
        ref = linear_estimates(design, a_theta, a_0, beta)
        np.testing.assert_allclose([est, se, se_n], [ref.estimate[0], ref.std_error[0],
                                                     ref.std_error_neyman[0]],
                                   rtol=1e-10, atol=1e-14)
        if np.isfinite(ref.df[0]):
            assert df == pytest.approx(ref.df[0], rel=1e-9)


def test_generalised_inverse_matches_pinv_on_singular_and_regular():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 6, 3))
    singular = a @ a.transpose(0, 2, 1)  # rank 3 of 6
    b = rng.standard_normal((4, 6, 20))
    regular = b @ b.transpose(0, 2, 1)
    for m in (singular, regular):
        np.testing.assert_allclose(generalised_inverse(m), np.linalg.pinv(m, rcond=1.5e-8,
                                                                           hermitian=True),
                                   rtol=1e-7, atol=1e-9)


def test_invariances():
    rng = np.random.default_rng(5)
    design, g, y = _random_design(rng)
    times = design.times
    base = cell_estimates(design)
    shifted = cell_estimates(TimingDesign.from_paths(times, g, y + 7.0))
    scaled = cell_estimates(TimingDesign.from_paths(times, g, 3.0 * y))
    order = rng.permutation(g.size)
    permuted = cell_estimates(TimingDesign.from_paths(times, g[order], y[order]))
    np.testing.assert_allclose(shifted.estimate, base.estimate, atol=1e-10)
    np.testing.assert_allclose(scaled.estimate, 3.0 * base.estimate, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(scaled.std_error, 3.0 * base.std_error, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(permuted.estimate, base.estimate, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(permuted.std_error, base.std_error, rtol=1e-9, atol=1e-12)


def test_lower_is_better_negates():
    _, data = _panel("sim1")
    up = didmem.RandomTimingEstimator(n_draws=0).fit(data).to_frame()
    down = didmem.RandomTimingEstimator(n_draws=0, lower_is_better=True).fit(data).to_frame()
    np.testing.assert_allclose(down["estimate"], -up["estimate"], atol=1e-12)
    np.testing.assert_allclose(down["std_error"], up["std_error"], rtol=1e-10)


def test_parameters_checked_at_fit_with_the_shared_message():
    _, data = _panel("sim1")
    est = didmem.RandomTimingEstimator(control_group="never")
    with pytest.raises(ParameterError, match="'control_group' parameter of "
                                             "RandomTimingEstimator must be one of"):
        est.fit(data)
    with pytest.raises(ParameterError, match="'randomised' parameter"):
        didmem.RandomTimingEstimator(randomised="some").fit(data)
    with pytest.raises(ParameterError, match="aggregation"):
        didmem.RandomTimingEstimator(n_draws=0).fit(data).aggregate("everything")


def test_singleton_cohort_is_dropped_with_a_warning():
    frame, _ = _panel("sim1")
    lone = frame[frame.i == frame.i.max()].copy()
    lone["i"] = frame.i.max() + 1
    lone["g"] = 8.0
    data = didmem.Panel(pd.concat([frame, lone]), unit="i", time="t", cohort="g", outcome="y")
    with pytest.warns(DataDroppedWarning, match=r"\[8.0\]"):
        result = didmem.RandomTimingEstimator(n_draws=0).fit(data)
    assert 8.0 not in result.design.cohorts


def test_permuted_design_equals_moments_of_relabelled_units():
    rng = np.random.default_rng(2)
    design, g, y = _random_design(rng)
    values, labels = np.unique(g, return_inverse=True)
    new = labels[rng.permutation(labels.size)]
    got = permuted_design(design.times, design.codes, values, y, new)
    want = TimingDesign.from_paths(design.times, values[new], y)
    np.testing.assert_allclose(got.mean, want.mean, rtol=1e-12)
    np.testing.assert_allclose(got.cov, want.cov, rtol=1e-10, atol=1e-12)


def test_fisher_keeps_unrandomised_units_and_counts_exactly():
    rng = np.random.default_rng(4)
    design, g, y = _random_design(rng)
    randomised = np.isfinite(g)
    seen = []

    def statistic(d):
        seen.append(d.mean[-1].copy())  # never-treated: fixed
        return np.array([d.mean[0, 0]])

    test = fisher_test(design.times, g, y, statistic, n_permutations=30, seed=1,
                       randomised=randomised)
    assert all(np.array_equal(s, seen[0]) for s in seen)
    p = test.pvalue[0]
    count = (test.permuted[:, 0] >= test.observed[0]).sum()
    assert p == pytest.approx((1 + count) / 31)
    assert 1 / 31 <= p <= 1


def test_cell_band_draws_are_the_cells_linear_map():
    rng = np.random.default_rng(6)
    design, _, _ = _random_design(rng)
    for last in (False, True):
        cells = cell_estimates(design, None, last, refine=False)
        w = rng.standard_normal((design.cohorts.size, design.n_times, 4))
        got = _cell_draws(design, cells, w)
        for j, (g, t, b) in enumerate(zip(cells.cohort_index, cells.time_index, cells.beta)):
            c = weights.cell_weights(design.codes, design.count, g, t, last)
            p = int(design.codes[g]) - 1
            want = c @ (w[:, t, :] - b * w[:, p, :])
            np.testing.assert_allclose(got[:, j], want, rtol=1e-10, atol=1e-12)


def test_fit_from_moments_equals_fit_from_the_panel():
    from didmem.inference.moments.cohort import CohortMoments

    frame, data = _panel("sim1")
    wide = frame.pivot(index="i", columns="t", values="y")
    g = frame.groupby("i")["g"].first().loc[wide.index].to_numpy(dtype=float)
    moments = CohortMoments.from_paths(wide.columns.to_numpy(float), g, wide.to_numpy())
    est = didmem.RandomTimingEstimator(n_draws=0)
    a = est.fit(data).to_frame()
    b = est.fit(moments).to_frame()
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-10, atol=1e-12)
    with pytest.raises(ParameterError, match="Fisher test permutes"):
        est.with_params(n_fisher=10).fit(moments)


def test_welch_df_of_one_mean_is_n_minus_one():
    rng = np.random.default_rng(8)
    design, _, _ = _random_design(rng, size=12)
    a_theta = np.zeros((design.cohorts.size, design.n_times))
    a_theta[1, 3] = 1.0
    got = linear_estimates(design, a_theta, np.zeros_like(a_theta), 0.0)
    assert got.df[0] == pytest.approx(11.0)


def test_result_balance_test_frame():
    _, data = _panel("sim1")
    frame = didmem.RandomTimingEstimator(n_draws=0).fit(data).balance_test(event_times=(0, 1))
    assert list(frame.estimand) == ["simple", "cohort", "calendar", "ES0", "ES1"]
    assert frame.attrs["df"] == 5 and 0 <= frame.attrs["pvalue_wald"] <= 1
    assert np.all((frame.pvalue > 0) & (frame.pvalue <= 1))


def test_checkpoint_steps_are_positions_on_the_grid():
    """Times in training steps (1000, 2000, ...; a gap) give the same numbers as positions."""
    frame, data = _panel("sim1")
    steps = {t: s for t, s in zip(range(1, 9), (1000, 2000, 3000, 5000, 8000, 9000, 9500,
                                                12000))}
    moved = frame.assign(t=frame.t.map(steps),
                         g=frame.g.map(lambda g: steps.get(g, g)).astype(float))
    other = didmem.Panel(moved, unit="i", time="t", cohort="g", outcome="y")
    est = didmem.RandomTimingEstimator(n_draws=0)
    a, b = est.fit(data), est.fit(other)
    np.testing.assert_allclose(b.to_frame()["estimate"], a.to_frame()["estimate"], rtol=1e-12)
    np.testing.assert_allclose(b.to_frame()["std_error"], a.to_frame()["std_error"],
                               rtol=1e-10)
    for name in ("simple", "group", "calendar", "dynamic"):
        np.testing.assert_allclose(b.aggregate(name).to_frame()["estimate"],
                                   a.aggregate(name).to_frame()["estimate"], rtol=1e-12)


def test_a_scanned_folder_equals_the_panel_fit(tmp_path):
    """The estimator takes a parquet folder (``Panel.scan``) through its per-cohort moments,
    as the group-time estimators do, and gives the panel's numbers (1e-9); the Fisher test,
    which permutes paths, is refused there by name."""
    from .test_panel_scan import COLUMNS, _write

    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=15, n_never_treated=20,
                                           n_times=6, seed=47)
    folder = _write(tmp_path / "data", df, n_files=3)
    est = didmem.RandomTimingEstimator(n_draws=0)
    ref = est.fit(didmem.Panel(df, **COLUMNS)).aggregate("simple").to_frame()
    got = est.fit(didmem.Panel.scan(folder, **COLUMNS)).aggregate("simple").to_frame()
    for column in ("estimate", "std_error", "std_error_neyman"):
        np.testing.assert_allclose(got[column], ref[column], rtol=1e-9, atol=1e-12)
    with pytest.raises(didmem.errors.ParameterError, match="n_fisher=0"):
        didmem.RandomTimingEstimator(n_fisher=10).fit(didmem.Panel.scan(folder, **COLUMNS))


@pytest.mark.parametrize("beta", [None, 1])
def test_dropped_cohorts_are_said_and_the_same_from_the_panel_and_the_moments(beta):
    # one instance alone in a new cohort, and (with beta=1) a cohort treated at the first
    # checkpoint: R staggered drops both; the panel and its moments drop the same ones
    from didmem.errors import DataDroppedWarning
    from didmem.inference.moments.cohort import CohortMoments

    frame, _ = _panel("sim1")
    times = np.sort(frame["t"].unique())
    units = frame["i"].unique()
    frame = frame.copy()
    frame.loc[frame["i"] == units[0], "g"] = times[-1] + 1  # a cohort of one instance
    frame.loc[frame["i"].isin(units[1:4]), "g"] = times[0]  # treated at the first checkpoint
    wide = frame.pivot(index="i", columns="t", values="y")
    g = frame.groupby("i")["g"].first().loc[wide.index].to_numpy(dtype=float)
    moments = CohortMoments.from_paths(wide.columns.to_numpy(float), g, wide.to_numpy())
    panel = didmem.Panel(frame, unit="i", time="t", cohort="g", outcome="y")
    est = didmem.RandomTimingEstimator(n_draws=0, beta=beta)
    with pytest.warns(DataDroppedWarning) as seen:
        a = est.fit(panel).to_frame()
    with pytest.warns(DataDroppedWarning) as seen_moments:
        b = est.fit(moments).to_frame()
    said = [str(w.message) for w in seen]
    assert [str(w.message) for w in seen_moments] == said
    assert any("single instance" in m for m in said)
    assert any("3 instances of cohorts treated at or before the first checkpoint" in m
               for m in said) == (beta == 1)
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-10, atol=1e-12)
