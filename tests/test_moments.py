"""Per-cohort moments: the oracle, adding partitions up, and a fit from moments equal to the
in-memory fit (estimates, standard errors, the Wald pre-test, aggregations' covariances) to
1e-9, with Gaussian bootstrap draws of the influence covariance within Monte Carlo error."""


import numpy as np
import pytest
from scipy import sparse

import didmem
from didmem.errors import DataDroppedWarning, EstimationError, PanelError
from didmem.inference.prepared import did_cells
from didmem.inference.cell_inference import CellInference, InferenceSettings
from didmem.inference.linear import combination_moments
from didmem.inference.moments.cells import MomentsInfluence, prepare_moments
from didmem.inference.moments.cohort import CohortMoments, reference_moments
from didmem.inference.small_sample import small_sample_correction

TOL = 1e-9


def _paths(panel):
    return panel.times, panel.cohorts, panel.outcome_matrix(panel.outcomes[0])


def _moments(panel, n_parts=1, seed=0):
    """The panel's moments, summed over ``n_parts`` random partitions of its units."""
    times, cohorts, y = _paths(panel)
    if n_parts == 1:
        return CohortMoments.from_paths(times, cohorts, y)
    part = np.random.default_rng(seed).integers(0, n_parts, cohorts.size)
    pieces = [CohortMoments.from_paths(times, cohorts[part == p], y[part == p])
              for p in range(n_parts)]
    return sum(pieces[::-1])


def _from_moments(moments, control_group, base_period, anticipation=0, lower_is_better=False,
                  never_treated_code=None):
    not_yet = control_group == "not_yet_treated"
    prepared = prepare_moments(moments, need_never_treated=not not_yet, anticipation=anticipation,
                             lower_is_better=lower_is_better, owner="DiDEstimator",
                             never_treated_code=never_treated_code)
    cells = did_cells(prepared, base_period=base_period, not_yet=not_yet,
                      anticipation=anticipation)
    return prepared, cells, MomentsInfluence.build(prepared, cells)


def _settings(n_draws, seed=0):
    return InferenceSettings(n_draws=n_draws, multiplier="normal", seed=seed,
                             alpha=0.05, cband=None, small_sample=False, owner="test")


def _assert_close(actual, desired):
    actual, desired = np.asarray(actual, dtype=float), np.asarray(desired, dtype=float)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(desired))
    ok = ~np.isnan(desired)
    np.testing.assert_allclose(actual[ok], desired[ok], rtol=TOL, atol=TOL * np.abs(desired[ok]).max())


# ---------------------------------------------------------------- the pass and its sum
@pytest.mark.parametrize("weighted", [False, True])
def test_from_paths_equals_the_unit_by_unit_oracle(weighted):
    rng = np.random.default_rng(1)
    n, n_t = 70, 5
    cohorts = rng.choice([2.0, 3.0, np.nan, np.inf], n)
    y = rng.normal(5.0, 2.0, (n, n_t))
    w = rng.uniform(0.5, 2.0, n) if weighted else None
    got = CohortMoments.from_paths(np.arange(n_t), cohorts, y, w)
    ref = reference_moments(np.arange(n_t), cohorts, y, w)
    np.testing.assert_array_equal(got.cohorts, [2.0, 3.0, np.inf])
    np.testing.assert_array_equal(got.count, ref.count)
    for name in ("weight", "weight_sq", "mean", "lever", "cross"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-12,
                                   atol=1e-10, err_msg=name)


@pytest.mark.parametrize("weighted", [False, True])
def test_partitions_add_up_to_the_whole_in_any_order(weighted):
    rng = np.random.default_rng(2)
    n, n_t = 300, 4
    cohorts = rng.choice([1.0, 2.0, 3.0, np.inf], n)
    y = rng.normal(100.0, 1.0, (n, n_t))  # large mean, small spread: centring matters
    w = rng.uniform(0.5, 2.0, n) if weighted else None
    whole = CohortMoments.from_paths(np.arange(n_t), cohorts, y, w)
    part = rng.integers(0, 5, n)
    pieces = [CohortMoments.from_paths(np.arange(n_t), cohorts[part == p], y[part == p],
                                       None if w is None else w[part == p]) for p in range(5)]
    # a partition may lack a cohort; adding is commutative and associative to rounding
    summed = (pieces[3] + pieces[0]) + (pieces[4] + (pieces[1] + pieces[2]))
    np.testing.assert_array_equal(summed.cohorts, whole.cohorts)
    np.testing.assert_array_equal(summed.count, whole.count)
    for name in ("weight", "weight_sq", "mean", "lever", "cross"):
        np.testing.assert_allclose(getattr(summed, name), getattr(whole, name), rtol=1e-11,
                                   atol=1e-9, err_msg=name)
    assert (CohortMoments.empty(np.arange(n_t)) + whole).n_units == n


def test_moments_over_other_times_are_refused():
    a = CohortMoments.from_paths([1, 2], [2.0, np.inf], np.zeros((2, 2)))
    b = CohortMoments.from_paths([1, 3], [2.0, np.inf], np.zeros((2, 2)))
    with pytest.raises(EstimationError, match="different times"):
        a + b


# ---------------------------------------------------------------- a fit from moments
SETTINGS = [(cg, bp) for cg in ("never_treated", "not_yet_treated")
            for bp in ("varying", "universal")]


@pytest.fixture(scope="module")
def simulated():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=5, units_per_cohort=25, n_never_treated=40,
                                           n_times=7, seed=11)
    df["y"] += 50.0  # far from zero, as a loss or a log-likelihood is
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


@pytest.fixture(scope="module", params=["simulated", "mpdta"])
def panel(request, simulated, mpdta_panel):
    return simulated if request.param == "simulated" else mpdta_panel


@pytest.mark.parametrize("control_group, base_period", SETTINGS)
@pytest.mark.parametrize("small_sample", [False, True])
def test_cells_equal_the_in_memory_fit(panel, control_group, base_period, small_sample):
    est = didmem.DiDEstimator(control_group=control_group, base_period=base_period,
                              n_bootstrap=0, small_sample=small_sample)
    res = est.fit(panel)
    prepared, cells, inf = _from_moments(_moments(panel, n_parts=3), control_group, base_period,
                                       never_treated_code=panel.never_treated_code)
    frame = res.to_frame()
    _assert_close(inf.att, frame["estimate"])
    var = inf.variance()
    var[cells.ref == 1] = np.nan
    _assert_close(np.sqrt(var), res.analytic_std_errors)
    if small_sample:
        corrected = small_sample_correction(inf, var)
        _assert_close(np.where(np.isnan(var), np.nan, np.sqrt(corrected.variance)),
                      frame["std_error"])
        _assert_close(corrected.df, res.inference.correction.df)
    # the Wald pre-test over the pre-treatment cells with a standard error
    before = res.cohorts > res.times
    which = np.flatnonzero(before & np.isfinite(res.analytic_std_errors))
    inference = CellInference.draw(inf, _settings(n_draws=0))
    stat, df, pvalue, _ = inference.pretest(inf.att, which, n_before=int(before.sum()))
    assert df == res.pretest.df
    _assert_close([stat, pvalue], [res.pretest.statistic, res.pretest.pvalue])


@pytest.mark.parametrize("control_group, base_period", SETTINGS)
def test_combinations_equal_the_in_memory_route(simulated, control_group, base_period):
    res = didmem.DiDEstimator(control_group=control_group, base_period=base_period,
                              n_bootstrap=0, small_sample=False).fit(simulated)
    _, cells, inf = _from_moments(_moments(simulated, n_parts=2), control_group, base_period)
    rng = np.random.default_rng(5)
    n_keys = 4
    weights = sparse.random(n_keys, cells.size, density=0.3, random_state=6, format="csr")
    omega = rng.normal(size=(n_keys, res.inference.prepared.n_cohorts))
    cov_ref, parts_ref = combination_moments(res.inference.prepared, res.inference.cells,
                                             res.inference.stats, weights, omega)
    cov, parts = inf.combination_moments(weights, omega)
    _assert_close(cov, cov_ref)
    _assert_close(parts, parts_ref)


def test_preprocessing_as_in_memory(simulated):
    """Late cohorts become never-treated; without never-treated units the latest cohort is the
    comparison and its periods are dropped: same warnings, same cells."""
    df = simulated.to_frame()
    last = df["time"].max()
    df.loc[df["cohort"] == df["cohort"].max(), "cohort"] = last + 5  # after the panel
    df = df[np.isfinite(df["cohort"])]  # no never-treated units left but the late cohort
    df = df[df["cohort"] != last + 5]
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    with pytest.warns(DataDroppedWarning, match="no never-treated units"):
        res = didmem.DiDEstimator(control_group="not_yet_treated", n_bootstrap=0,
                                  small_sample=False).fit(panel)
    with pytest.warns(DataDroppedWarning, match="no never-treated units"):
        _, _, inf = _from_moments(_moments(panel), "not_yet_treated", "varying")
    _assert_close(inf.att, res.to_frame()["estimate"])
    with pytest.raises(EstimationError, match="needs never-treated units"):
        _from_moments(_moments(panel), "never_treated", "varying")


def test_lower_is_better_flips_the_outcome(simulated):
    res = didmem.DiDEstimator(n_bootstrap=0, lower_is_better=True,
                              small_sample=False).fit(simulated)
    _, _, inf = _from_moments(_moments(simulated), "never_treated", "varying",
                              lower_is_better=True)
    _assert_close(inf.att, res.to_frame()["estimate"])
    _assert_close(np.sqrt(inf.variance()), res.analytic_std_errors)


# ---------------------------------------------------------------- the Gaussian bootstrap
@pytest.mark.parametrize("control_group", ["never_treated", "not_yet_treated"])
def test_gaussian_draws_have_the_influence_covariance(simulated, control_group):
    """Draws from the moments are N(0, V) with V the cells' influence covariance: the sample
    covariance of 20,000 draws is within Monte Carlo error of V, entry by entry (an entry's
    standard error is sqrt((V_ii V_jj + V_ij**2) / n))."""
    _, cells, inf = _from_moments(_moments(simulated), control_group, "varying")
    live = np.flatnonzero(cells.ref == 0)[:60]
    cov = inf.covariance(live)
    n = 20_000
    boot = inf.bootstrap(n, "normal", np.random.default_rng(7))
    draws = boot.cells[:, live]
    assert abs(draws.mean(axis=0) / np.sqrt(np.diag(cov) / n)).max() < 5
    sample = draws.T @ draws / n
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    z = (sample - cov) / se
    assert np.abs(z).max() < 5.5, np.abs(z).max()
    # the block sums of the weights: sum_i U_i w_i has variance sum_i w_i**2 = n_g
    counts = np.diff(inf.prepared.starts)
    var_w = boot.block_weights.var(axis=0)
    assert np.all(np.abs(var_w / counts - 1) < 5 * np.sqrt(2 / n))


def test_only_gaussian_multipliers_follow_from_moments(simulated):
    _, _, inf = _from_moments(_moments(simulated), "never_treated", "varying")
    with pytest.raises(EstimationError, match="Gaussian"):
        inf.bootstrap(10, "rademacher", np.random.default_rng(0))


def test_sup_t_value_matches_the_per_unit_bootstrap(simulated):
    """The 0.95 quantile of the sup-t statistic from moment draws (the default Gaussian
    bootstrap, in memory and out of core) and from per-unit Gaussian multipliers (the
    balanced route's unit-by-unit kernel) agree within Monte Carlo error (two independent
    sets of 4,000 draws; the quantile's error from its binomial standard error through the
    density)."""
    from didmem.inference.influence import CellInfluence

    res = didmem.DiDEstimator(n_bootstrap=4000, multiplier="normal", small_sample=False,
                              seed=1).fit(simulated)
    grouped = res.inference.influence
    sigma = res.analytic_std_errors
    keep = np.isfinite(sigma)

    def sup_t(cells):
        return np.abs(cells[:, keep] / sigma[keep]).max(axis=1)

    per_unit = sup_t(CellInfluence.bootstrap(grouped, 4000, "normal",
                                             np.random.default_rng(2)).cells)
    lo, hi = np.quantile(per_unit, [0.95 - 2 * 0.0034, 0.95 + 2 * 0.0034])  # 2 binomial s.e.
    width = (hi - lo) * np.sqrt(2)
    in_memory = sup_t(res.inference.bootstrap.cells)
    _, _, inf = _from_moments(_moments(simulated), "never_treated", "varying")
    inference = CellInference.draw(inf, _settings(n_draws=4000, seed=3))
    out_of_core = sup_t(inference.bootstrap.cells)
    for draws in (in_memory, out_of_core):
        gap = abs(np.quantile(draws, 0.95) - np.quantile(per_unit, 0.95))
        assert gap < width, (gap, width)


# ---------------------------------------------------------------- memorised-index lists
def test_pattern_counts_give_the_binary_panels_moments():
    """The per-cohort counts of each 0/1 path (:func:`didmem.panel.patterns.count_patterns`,
    from each unit's bits) give the moments of the dense 0/1 panel of every unit (its zeros
    never written)."""
    from didmem.inference.moments.cohort import pattern_moments
    from didmem.panel.patterns import count_patterns, pattern_bits

    rng = np.random.default_rng(3)
    n_seq, times = 5000, np.arange(1.0, 8.0)
    cohort_values = np.array([2.0, 3.0, 4.0, 5.0, np.inf])
    codes = rng.integers(0, 5, n_seq)
    cohorts = cohort_values[codes]
    p = np.where(times[None, :] >= cohorts[:, None], 0.3, 0.1)
    dense = (rng.random((n_seq, times.size)) < p).astype(float)
    bits = pattern_bits(n_seq, times.size)
    for t in range(times.size):
        bits[np.flatnonzero(dense[:, t])] |= np.uint8(1 << t)
    panel = count_patterns(times, bits, lambda lo, hi: codes[lo:hi], cohort_values)
    assert panel.n_units == n_seq
    got = pattern_moments(panel.times, panel.cohorts, panel.patterns, panel.counts)
    ref = CohortMoments.from_paths(times, cohorts, dense)
    np.testing.assert_array_equal(got.cohorts, ref.cohorts)
    np.testing.assert_array_equal(got.count, ref.count)
    for name in ("weight", "weight_sq", "mean", "cross"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-12,
                                   atol=1e-9, err_msg=name)
    with pytest.raises(PanelError, match="Cohort codes must index the 5 cohort values"):
        count_patterns(times, bits, lambda lo, hi: codes[lo:hi] + 1, cohort_values)