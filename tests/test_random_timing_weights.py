"""The aggregations' weights, built for all their cells at once, equal the sum of R
``staggered``'s per-cell vectors (:func:`~didmem.inference.random_timing.weights.cell_weights`)
cell by cell, as the formulas of the module docstring state them (issue 47)."""

from __future__ import annotations

import numpy as np
import pytest

from didmem.inference.random_timing import weights
from didmem.inference.random_timing.design import cohort_codes

N_T = 8
DESIGNS = {"gaps": [2, 3, 5, 6, 8, 10, np.inf], "first": [0, 1, 3, 4, 6, 8, np.inf],
           "no never-treated": [2, 4, 7, 12, 15]}


def _design(name, seed=0):
    codes = cohort_codes(np.arange(1.0, N_T + 1), np.asarray(DESIGNS[name], dtype=float))
    sizes = np.random.default_rng(seed).integers(2, 9, codes.size).astype(float)
    return codes, sizes


def _sum_of_cells(codes, sizes, cells, last_treated):
    """``sum_i w_i cell_weights(g_i, t_i)`` at ``t_i`` (theta) and ``g_i - 1`` (A_0)."""
    a_theta = np.zeros((codes.size, N_T))
    a_0 = np.zeros((codes.size, N_T))
    for gi, t, w in cells:
        vector = w * weights.cell_weights(codes, sizes, gi, t, last_treated)
        a_theta[:, t] += vector
        p = codes[gi] - 1
        if 0 <= p <= N_T - 1:
            a_0[:, int(p)] += vector
    return a_theta, a_0


def _periods(codes, gi):
    return [t for t in range(N_T) if codes[gi] <= t < codes.max()]


def _oracle(name, codes, sizes, last_treated, key=None):
    k = codes.size
    if name == "simple":
        cells = [(gi, t, sizes[gi]) for gi in range(k) for t in _periods(codes, gi)]
        total = sum(w for _, _, w in cells)
        return _sum_of_cells(codes, sizes, [(g, t, w / total) for g, t, w in cells],
                             last_treated)
    if name == "cohort_mean":
        periods = _periods(codes, key)
        return _sum_of_cells(codes, sizes, [(key, t, 1 / len(periods)) for t in periods],
                             last_treated)
    if name == "calendar_period":
        treated = [gi for gi in range(k) if codes[gi] <= key]
        total = sum(sizes[gi] for gi in treated)
        return _sum_of_cells(codes, sizes, [(gi, key, sizes[gi] / total) for gi in treated],
                             last_treated)
    raise AssertionError(name)


@pytest.mark.parametrize("design", sorted(DESIGNS))
@pytest.mark.parametrize("last_treated", [False, True])
def test_vectorised_weights_equal_the_sum_of_cell_vectors(design, last_treated):
    codes, sizes = _design(design)
    got = weights.simple_weights(codes, sizes, N_T, last_treated)
    want = _oracle("simple", codes, sizes, last_treated)
    assert np.abs(want[0]).sum() > 0
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-14)
    keys = weights.cohort_key_weights(codes, sizes, N_T, last_treated)
    assert keys
    for gi, a_theta, a_0 in keys:
        want = _oracle("cohort_mean", codes, sizes, last_treated, gi)
        np.testing.assert_allclose(a_theta, want[0], rtol=0, atol=1e-14)
        np.testing.assert_allclose(a_0, want[1], rtol=0, atol=1e-14)
    keys = weights.calendar_key_weights(codes, sizes, N_T, last_treated)
    assert keys
    for t, a_theta, a_0 in keys:
        want = _oracle("calendar_period", codes, sizes, last_treated, t)
        np.testing.assert_allclose(a_theta, want[0], rtol=0, atol=1e-14)
        np.testing.assert_allclose(a_0, want[1], rtol=0, atol=1e-14)
