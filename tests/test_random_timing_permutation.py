"""The fast path of a Fisher permutation (issue 47) equals the direct computation.

A permutation's statistics are computed from the centred paths (the column means taken out
once per test), with the estimands' cohort-major copies prepared once
(:class:`~didmem.inference.random_timing.design.EstimandRows`) and without the cells' degrees of
freedom; each must equal the design built from scratch from the relabelled units and the
statistics computed by the general routines, to 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest

from didmem.inference.random_timing.design import (
    EstimandRows, TimingDesign, cell_estimates, linear_estimates)
from didmem.inference.random_timing.fisher import permuted_design
from didmem.inference.random_timing.fit import _statistics, aggregation_stack


def _paths(rng, offset, n_t=8, cohorts=(2, 3, 5, 6, 8, np.inf), size=7):
    g = np.repeat(np.asarray(cohorts, dtype=float), size)
    y = offset + np.cumsum(rng.standard_normal((g.size, n_t)), axis=1)
    y += rng.standard_normal((g.size, 1))
    return np.arange(1.0, n_t + 1), g, y


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_permuted_design_from_centred_paths_equals_design_of_relabelled_units(offset):
    rng = np.random.default_rng(11)
    times, g, y = _paths(rng, offset)
    values, labels = np.unique(g, return_inverse=True)
    codes = TimingDesign.from_paths(times, g, y).codes
    centre = y.mean(axis=0)
    for _ in range(3):
        new = labels[rng.permutation(labels.size)]
        got = permuted_design(times, codes, values, y - centre, new, centre=centre)
        want = TimingDesign.from_paths(times, values[new], y)
        np.testing.assert_allclose(got.mean, want.mean, rtol=1e-12)
        scale = np.abs(want.cov).max()
        np.testing.assert_allclose(got.cov, want.cov, rtol=0, atol=1e-10 * scale)
        np.testing.assert_array_equal(got.count, want.count)


@pytest.mark.parametrize("beta,last_treated", [(None, False), (0.0, False), (1.0, False),
                                               (1.0, True), (None, True)])
def test_permutation_statistics_equal_direct_computation(beta, last_treated):
    rng = np.random.default_rng(12)
    times, g, y = _paths(rng, 50.0)
    values, labels = np.unique(g, return_inverse=True)
    design = TimingDesign.from_paths(times, g, y)
    stack = aggregation_stack(design, last_treated)
    rows = np.flatnonzero(np.isnan(stack.keys) | (stack.names == "dynamic"))
    prepared = EstimandRows.of(stack.a_theta[rows], stack.a_0[rows])
    centre = y.mean(axis=0)
    for _ in range(3):
        new = labels[rng.permutation(labels.size)]
        fast = _statistics(permuted_design(times, design.codes, values, y - centre, new,
                                           centre=centre), beta, last_treated, prepared)
        direct = TimingDesign.from_paths(times, values[new], y)
        cells = cell_estimates(direct, beta, last_treated, refine=False)
        agg = linear_estimates(direct, stack.a_theta[rows], stack.a_0[rows], beta,
                               refine=False)
        est = np.r_[cells.estimate, agg.estimate]
        se = np.r_[cells.std_error_neyman, agg.std_error_neyman]
        assert np.mean(se > 0) > 0.5  # (a zero Neyman SE gives statistic 0, as in the fit)
        want = np.where(se > 0, est / np.where(se > 0, se, 1.0), 0.0)
        assert fast.shape == want.shape
        np.testing.assert_allclose(fast, want, rtol=1e-10, atol=1e-12)


def test_cells_without_degrees_of_freedom_keep_every_other_number():
    rng = np.random.default_rng(13)
    times, g, y = _paths(rng, 0.0)
    design = TimingDesign.from_paths(times, g, y)
    full = cell_estimates(design, None, False)
    bare = cell_estimates(design, None, False, with_df=False)
    for name in ("estimate", "std_error", "std_error_neyman", "beta", "control_start"):
        np.testing.assert_array_equal(getattr(bare, name), getattr(full, name))
    assert not np.isnan(full.df).any() and np.isnan(bare.df).all()


def _naive_neyman(design, a_theta, a_0):
    """The plug-in beta*, the estimate and the Neyman SE of each row, from the full
    ``(J, K, T)`` arrays by plain einsum (the formulas of the module docstring)."""
    inv_n = 1.0 / design.count
    form = lambda a, b: np.einsum("jks,kst,jkt,k->j", a, design.cov, b, inv_n)  # noqa: E731
    x_var, x_theta = form(a_0, a_0), form(a_0, a_theta)
    beta = np.where(x_var > 0, x_theta / np.where(x_var > 0, x_var, 1.0), 0.0)
    comb = a_theta - beta[:, None, None] * a_0
    estimate = np.einsum("jkt,kt->j", comb, design.mean)
    return beta, estimate, np.sqrt(np.maximum(form(comb, comb), 0.0))


@pytest.mark.parametrize("block_rows", [1, 3, 16, 10_000])
@pytest.mark.parametrize("last_treated", [False, True])
def test_blocked_rows_equal_naive_quadratic_forms(block_rows, last_treated):
    rng = np.random.default_rng(14)
    times, g, y = _paths(rng, 0.0)
    design = TimingDesign.from_paths(times, g, y)
    stack = aggregation_stack(design, last_treated)
    got = linear_estimates(design, EstimandRows.of(stack.a_theta, stack.a_0, block_rows),
                           refine=False)
    beta, estimate, se = _naive_neyman(design, stack.a_theta, stack.a_0)
    assert np.ptp(beta) > 0.1  # rows of different beta*: the forms are not all alike
    np.testing.assert_allclose(got.beta, beta, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.estimate, estimate, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.std_error_neyman, se, rtol=1e-10, atol=1e-12)


def test_result_save_refuses_a_name_that_is_not_parquet_in_one_line(tmp_path):
    """A random-timing fit saves as a results file (tests/test_random_timing_file.py); a
    target that cannot be one is refused in one line and nothing is written."""
    import didmem
    import pandas as pd
    from didmem.errors import ParameterError

    rng = np.random.default_rng(15)
    times, g, y = _paths(rng, 0.0)
    frame = pd.DataFrame({"i": np.repeat(np.arange(g.size), times.size),
                          "t": np.tile(times, g.size), "g": np.repeat(g, times.size),
                          "y": y.ravel()})
    panel = didmem.Panel(frame, unit="i", time="t", cohort="g", outcome="y")
    result = didmem.RandomTimingEstimator(n_draws=0).fit(panel)
    target = tmp_path / "rt.csv"
    with pytest.raises(ParameterError) as caught:
        result.save(target)
    message = str(caught.value)
    assert "\n" not in message and "'.parquet'" in message
    assert "rt.csv" in message and not target.exists()


# ---------------------------------------------------------------- the sparse permutation maps
from didmem.inference.random_timing.fisher import PermutedDesign, fisher_test  # noqa: E402
from didmem.inference.random_timing.permutation import (  # noqa: E402
    PermutationStatistics, cell_decomposition, control_sums)

# cohorts with gaps between them, one treated after the last time, never-treated; and one
# where a cohort is treated at the first time (its cells are not identified: the aggregations
# that include it are no sum of cells, and keep the dense forms)
_COHORTS = {"gaps": (2, 3, 5, 6, 8, 10, np.inf), "first": (1, 3, 4, 6, 8, np.inf)}


def _tested(design, last_treated):
    stack = aggregation_stack(design, last_treated)
    rows = np.flatnonzero(np.isnan(stack.keys) | (stack.names == "dynamic"))
    return stack.a_theta[rows], stack.a_0[rows]


@pytest.mark.parametrize("cohorts", sorted(_COHORTS))
@pytest.mark.parametrize("beta,last_treated", [(None, False), (0.0, False), (1.0, False),
                                               (1.0, True), (None, True)])
def test_sparse_permutation_statistics_equal_direct_computation(cohorts, beta, last_treated):
    rng = np.random.default_rng(21)
    times, g, y = _paths(rng, 50.0, cohorts=_COHORTS[cohorts])
    values, labels = np.unique(g, return_inverse=True)
    design = TimingDesign.from_paths(times, g, y)
    a_theta, a_0 = _tested(design, last_treated)
    statistic = PermutationStatistics(design, beta, last_treated, a_theta, a_0)
    assert statistic.sparse_rows.size >= 5  # the event times take the sparse maps
    oracle = EstimandRows.of(a_theta, a_0)
    centre = y.mean(axis=0)
    for _ in range(3):
        new = labels[rng.permutation(labels.size)]
        for sums in (False, True):
            permuted = permuted_design(times, design.codes, values, y - centre, new,
                                       centre=centre, control_sums=sums)
            assert isinstance(permuted, PermutedDesign) == sums
            want = _statistics(permuted, beta, last_treated, oracle)
            assert np.mean(want != 0) > 0.5
            np.testing.assert_allclose(statistic(permuted), want, rtol=1e-10, atol=1e-12)


def test_rows_that_are_no_sum_of_cells_keep_the_dense_forms():
    rng = np.random.default_rng(22)
    times, g, y = _paths(rng, 0.0)
    design = TimingDesign.from_paths(times, g, y)
    a_theta, a_0 = _tested(design, False)
    noise = rng.standard_normal(a_theta[:2].shape)  # not in the span of the cells
    a_theta = np.concatenate([a_theta, a_theta[:2] + noise])
    a_0 = np.concatenate([a_0, a_0[:2]])
    statistic = PermutationStatistics(design, None, False, a_theta, a_0)
    last = a_theta.shape[0] - np.arange(1, 3)
    assert np.isin(last, statistic.dense_rows).all()
    want = _statistics(design, None, False, EstimandRows.of(a_theta, a_0))
    np.testing.assert_allclose(statistic(design), want, rtol=1e-10, atol=1e-12)
    # a limit of 0 pairs sends every row to the dense forms, with the same numbers
    dense = PermutationStatistics(design, None, False, a_theta, a_0, pair_limit=0)
    assert dense.sparse_rows.size == 0
    np.testing.assert_allclose(dense(design), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("last_treated", [False, True])
def test_cell_decomposition_rebuilds_the_event_times(last_treated):
    rng = np.random.default_rng(23)
    times, g, y = _paths(rng, 0.0, cohorts=_COHORTS["gaps"])
    design = TimingDesign.from_paths(times, g, y)
    stack = aggregation_stack(design, last_treated)
    cells = cell_estimates(design, None, last_treated, refine=False)
    dynamic = stack.names == "dynamic"
    theta_w, _, x_w, exact = cell_decomposition(
        stack.a_theta[dynamic], stack.a_0[dynamic], design.count, design.codes,
        cells.cohort_index, cells.time_index, cells.control_start)
    assert exact.all()
    # an event time's theta is a sum of one cell per cohort, with the cohorts' shares
    for j in range(theta_w.shape[0]):
        used = np.flatnonzero(theta_w[j])
        assert np.unique(cells.cohort_index[used]).size == used.size
        assert np.all(theta_w[j, used] > 0) and np.all(theta_w[j, used] <= 1 + 1e-12)
    assert np.abs(x_w).sum() > 0


def test_control_sums_of_a_permutation_are_the_suffix_sums_of_its_covariances():
    rng = np.random.default_rng(24)
    times, g, y = _paths(rng, 1e3)
    values, labels = np.unique(g, return_inverse=True)
    codes = TimingDesign.from_paths(times, g, y).codes
    new = labels[rng.permutation(labels.size)]
    got = permuted_design(times, codes, values, y - y.mean(0), new, centre=y.mean(0),
                          control_sums=True)
    want = TimingDesign.from_paths(times, values[new], y)
    scale = np.abs(want.cov).max()
    np.testing.assert_allclose(got.cov, want.cov, rtol=0, atol=1e-10 * scale)
    sums = control_sums(want.count, want.cov)
    assert sums.shape == (values.size + 1,) + want.cov.shape[1:] and not sums[-1].any()
    np.testing.assert_allclose(got.control_sums, sums, rtol=0,
                               atol=1e-10 * np.abs(sums).max())
    np.testing.assert_allclose(sums[0], (want.count[:, None, None] * want.cov).sum(0),
                               rtol=1e-12)


@pytest.mark.parametrize("randomised", [None, "treated"])
def test_fisher_test_through_the_sparse_maps_gives_the_same_p_values(randomised):
    """Same seed, same permutations: the statistics of the fast route equal the direct
    ones to 1e-10, so the p-values are the same."""
    rng = np.random.default_rng(25)
    times, g, y = _paths(rng, 5.0, cohorts=_COHORTS["gaps"])
    mask = None if randomised is None else np.isfinite(g)
    design = TimingDesign.from_paths(times, g, y)
    a_theta, a_0 = _tested(design, False)
    oracle = EstimandRows.of(a_theta, a_0)
    slow = fisher_test(times, g, y, lambda d: _statistics(d, None, False, oracle),
                       n_permutations=40, seed=3, randomised=mask)
    fast = fisher_test(times, g, y, PermutationStatistics(design, None, False, a_theta, a_0),
                       n_permutations=40, seed=3, randomised=mask, control_sums=True)
    np.testing.assert_allclose(fast.observed, slow.observed, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fast.permuted, slow.permuted, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(fast.pvalue, slow.pvalue)
    assert np.ptp(fast.pvalue) > 0.2  # the p-values differ across rows: not a trivial test


# ---------------------------------------------------------------- the band's draws
def test_band_draws_run_through_the_one_bootstrap_loop_as_linear_maps_of_cohort_draws(
        monkeypatch):
    """Each chunk of the band's multipliers is per-cohort Gaussian draws ``w`` (K, T, m);
    the loop's cells are ``sum_c a_(g,t)[c] (w_c[t] - beta w_c[p])`` and the rows
    ``comb . w``, chunk after chunk, whether drawn ahead or in turn."""
    from didmem.inference import bootstrap
    from didmem.inference.random_timing import weights
    from didmem.inference.random_timing.fisher import band_multipliers
    from didmem.inference.random_timing.fit import _band_draws

    rng = np.random.default_rng(26)
    times, g, y = _paths(rng, 0.0, cohorts=_COHORTS["gaps"], size=12)  # S_g definite
    design = TimingDesign.from_paths(times, g, y)
    cells = cell_estimates(design, None, False)
    stack = aggregation_stack(design, False)
    comb = (stack.a_theta - 0.5 * stack.a_0).reshape(stack.names.size, -1)
    n_draws = 2500
    # chunks of 300 draws (of K x T numbers each): several chunks, the last one shorter
    monkeypatch.setattr(bootstrap, "_CHUNK_ELEMENTS", 300 * design.cohorts.size * design.n_times)
    draws = _band_draws(design, cells, comb, n_draws, seed=7)
    assert draws.shape == (n_draws, cells.estimate.size + comb.shape[0])
    chunks = band_multipliers(design, n_draws, np.random.default_rng(7), ahead=0)
    assert chunks.from_source
    row0, n_chunks = 0, 0
    for start, w in chunks:
        assert start == row0 and w.shape[:2] == (design.cohorts.size, design.n_times)
        m = w.shape[2]
        for j, (gi, ti) in enumerate(zip(cells.cohort_index, cells.time_index)):
            a = weights.cell_weights(design.codes, design.count, gi, ti, False)
            p = int(design.codes[gi]) - 1
            want = a @ (w[:, ti, :] - cells.beta[j] * w[:, p, :])
            np.testing.assert_allclose(draws[row0:row0 + m, j], want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(draws[row0:row0 + m, cells.estimate.size:],
                                   (comb @ w.reshape(comb.shape[1], m)).T, rtol=1e-10,
                                   atol=1e-12)
        row0 += m
        n_chunks += 1
    assert row0 == n_draws and n_chunks == 9
    # the cohorts' draws have covariance S_g / N_g (their roots square to it exactly)
    again = band_multipliers(design, 1, np.random.default_rng(7), ahead=0)
    xi = np.random.default_rng(7).standard_normal((design.cohorts.size, design.n_times, 1))
    (_, w), = list(again)
    assert np.allclose(w, np.linalg.cholesky(design.cov / design.count[:, None, None]) @ xi)


# ---------------------------------------------------------------- every aggregation row tested
@pytest.mark.parametrize("cohorts", sorted(_COHORTS))
@pytest.mark.parametrize("beta,last_treated", [(None, False), (1.0, True)])
def test_permutation_statistics_of_every_aggregation_row_equal_direct_computation(
        cohorts, beta, last_treated):
    """The keys of group and calendar too (issue 47 item 2): each row's statistic through the
    sparse maps (or its dense forms) equals the direct computation to 1e-10."""
    rng = np.random.default_rng(26)
    times, g, y = _paths(rng, 50.0, cohorts=_COHORTS[cohorts])
    values, labels = np.unique(g, return_inverse=True)
    design = TimingDesign.from_paths(times, g, y)
    stack = aggregation_stack(design, last_treated)
    keys = np.flatnonzero(np.isin(stack.names, ["group", "calendar"]) & ~np.isnan(stack.keys))
    assert keys.size >= 8
    statistic = PermutationStatistics(design, beta, last_treated, stack.a_theta, stack.a_0)
    assert np.isin(keys, statistic.sparse_rows).sum() >= 4  # keys take the sparse maps
    oracle = EstimandRows.of(stack.a_theta, stack.a_0)
    centre = y.mean(axis=0)
    for _ in range(3):
        new = labels[rng.permutation(labels.size)]
        permuted = permuted_design(times, design.codes, values, y - centre, new,
                                   centre=centre, control_sums=True)
        want = _statistics(permuted, beta, last_treated, oracle)
        n_cells = want.size - stack.names.size
        assert np.mean(want[n_cells + keys] != 0) > 0.5
        np.testing.assert_allclose(statistic(permuted), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("randomised", [None, "treated"])
def test_fit_fisher_tests_every_row_with_the_direct_statistics_and_old_rows_unchanged(
        randomised):
    """The fit's p-values of every row (cells, overall values, keys of group and calendar,
    event times) are those of the direct statistics on the same permutations; the rows tested
    before the keys were added (cells, overall values, event times) keep the p-values of a test
    of those rows alone (same seed, same permutations)."""
    from didmem.inference.random_timing.fit import fit_random_timing

    rng = np.random.default_rng(27)
    times, g, y = _paths(rng, 5.0, cohorts=_COHORTS["gaps"])
    mask = None if randomised is None else np.isfinite(g)
    seed, n_fisher = 8, 60
    design, tables = fit_random_timing(times, g, y, beta=None, last_treated=False,
                                       randomised=mask, alpha=0.05, n_draws=0,
                                       n_fisher=n_fisher, seed=seed)
    # the fit's Fisher seed: the second of two integers from its generator (fit.py)
    f_seed = np.random.default_rng(seed).integers(2**63, size=2)[1]
    stack = aggregation_stack(design, False)
    oracle = EstimandRows.of(stack.a_theta, stack.a_0)
    slow = fisher_test(times, g, y, lambda d: _statistics(d, None, False, oracle),
                       n_permutations=n_fisher, seed=f_seed, randomised=mask)
    np.testing.assert_array_equal(tables.fisher_pvalue, slow.pvalue)
    np.testing.assert_array_equal(tables.fisher_pvalue_r, slow.pvalue_r)
    n_cells = int((tables.kind == "cell").sum())
    keys = n_cells + np.flatnonzero(np.isin(stack.names, ["group", "calendar"])
                                    & ~np.isnan(stack.keys))
    assert np.isfinite(tables.fisher_pvalue).all() and np.ptp(tables.fisher_pvalue[keys]) > 0.2
    old = np.flatnonzero(np.isnan(stack.keys) | (stack.names == "dynamic"))
    before = fisher_test(times, g, y,
                         PermutationStatistics(design, None, False, stack.a_theta[old],
                                               stack.a_0[old]),
                         n_permutations=n_fisher, seed=f_seed, randomised=mask,
                         control_sums=True)
    tested = np.r_[np.arange(n_cells), n_cells + old]
    np.testing.assert_array_equal(tables.fisher_pvalue[tested], before.pvalue)
    np.testing.assert_array_equal(tables.fisher_pvalue_r[tested], before.pvalue_r)
    sup = (1.0 + (before.permuted[:, :n_cells].max(axis=1) >= before.observed[:n_cells].max())
           .sum()) / (1.0 + n_fisher)
    assert tables.fisher_sup_pvalue == sup
