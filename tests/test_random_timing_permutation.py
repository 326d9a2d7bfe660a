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


def test_result_save_is_refused_in_one_line_naming_the_alternative(tmp_path):
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
    target = tmp_path / "rt.parquet"
    with pytest.raises(ParameterError) as caught:
        result.save(target)
    message = str(caught.value)
    assert "\n" not in message and "to_frame().to_parquet" in message
    assert "rt.parquet" in message and not target.exists()
