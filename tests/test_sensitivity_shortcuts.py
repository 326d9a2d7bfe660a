"""The variants' shortcuts take the decisions of the plain tests (didmem.honest._arp, _lp).

Each shortcut of the linear-programming route (bounds on the statistic and on the
least-favourable value, certified stretches of theta, seeded conditioning ranges, scanning the
grid from its ends, HiGHS without linprog's wrapper) is exact: these tests set it beside the
plain computation on the variants' own programs (mpdta, tests/data/honestdid_rm.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize

from didmem.honest import _arp, _lp
from didmem.honest._general import (PolyhedraUnion, monotone_rows, relative_magnitudes_pieces,
                                    sign_rows, smoothness_pieces)

DATA = Path(__file__).resolve().parent / "data"


def _union(restriction, variant, hybrid):
    case = next(c for c in json.loads((DATA / "honestdid_rm.json").read_text())["cases"]
                if c["name"] == "mpdta")
    beta, sigma, n_pre = np.array(case["beta"]), np.array(case["sigma"]), case["n_pre"]
    n_post = beta.size - n_pre
    kind, direction = variant
    extra = (sign_rows if kind == "bias" else monotone_rows)(n_pre, n_post, direction)
    make = smoothness_pieces if restriction == "smoothness" else relative_magnitudes_pieces
    return PolyhedraUnion(beta, sigma, n_pre, np.eye(n_post)[0], 0.05,
                          make(n_pre, n_post, extra), hybrid=hybrid, grid_points=120)


VARIANTS = [("bias", "negative"), ("monotonicity", "increasing")]


@pytest.mark.parametrize("hybrid", [True, False])
@pytest.mark.parametrize("variant", VARIANTS)
def test_line_test_is_the_pointwise_test(variant, hybrid):
    """conditional_test_line (bounds, certified stretches, seeded ranges, a lazy critical
    value) against conditional_test at each theta (one program each, Newton from afar)."""
    union = _union("relative_magnitudes", variant, hybrid)
    m = 1.0
    thetas = union.grid(m)[::3]
    for (_, _, y0, a, x, sig, _, lf), (*_, lazy) in zip(union._tests(m), union._problems(m)):
        point = [_arp.conditional_test(y0 - a * t, x, sig, 0.05, lf, union.kappa)
                 for t in thetas]
        fresh = None if lazy is None else _arp.LeastFavourable(
            x, sig, union.kappa, union.simulations, union.seed, None)
        line = _arp.conditional_test_line(y0, a, x, sig, 0.05, thetas, fresh, union.kappa)
        np.testing.assert_array_equal(line, point)


@pytest.mark.parametrize("restriction", ["relative_magnitudes", "smoothness"])
def test_scanning_from_the_ends_finds_the_same_ends(restriction):
    union = _union(restriction, ("bias", "negative"), hybrid=True)
    m = 1.0 if restriction != "smoothness" else 0.01
    union._problems(m)
    for p, problem in enumerate(union._cache[float(m)]):  # force the LP route
        union._cache[float(m)][p] = (*problem[:6], None, problem[7])
    thetas = union.grid(m)
    accepted = np.flatnonzero(union.accepts(m, thetas))
    assert union.accepted_ends(m, thetas) == (accepted[0], accepted[-1])


def test_seeded_range_is_the_newton_range():
    union = _union("relative_magnitudes", ("monotonicity", "increasing"), hybrid=False)
    _, _, y0, a, x, sig, _, _ = union._tests(0.5)[0]
    sd = np.sqrt(np.diag(sig))
    w = np.column_stack([sd, x])
    known = _arp.DualVertices(y0.size)
    for theta in union.grid(0.5)[::10]:
        y = y0 - a * theta
        eta, lam = _arp.eta_program(y, x, sd)
        plain = _arp._dual_truncation(y, sig, w, lam, eta)
        seeded = _arp._dual_range(y, sig, w, lam, eta, known)[:2]
        np.testing.assert_allclose(seeded, plain, rtol=1e-9, atol=1e-12)


def test_highs_without_the_wrapper_solves_as_linprog():
    union = _union("relative_magnitudes", ("bias", "negative"), hybrid=False)
    rng = np.random.default_rng(0)
    for _, _, y0, a, x, sig, _, _ in union._tests(1.0):
        sd = np.sqrt(np.diag(sig))
        cost = np.zeros(x.shape[1] + 1)
        cost[0] = 1.0
        matrix = np.column_stack([-sd, -x])
        for theta in rng.normal(0.0, 0.05, 4):
            y = y0 - a * theta
            ref = optimize.linprog(cost, A_ub=matrix, b_ub=-y,
                                   bounds=[(None, None)] * cost.size, method="highs")
            got = _lp.linprog(cost, matrix, -y)
            assert got.ok and ref.status == 0
            assert got.fun == ref.fun
            np.testing.assert_array_equal(got.x, ref.x)
            np.testing.assert_array_equal(got.ineqlin_marginals, ref.ineqlin.marginals)
            fallback = _lp._scipy(cost, matrix, -y, None, None, True)
            np.testing.assert_array_equal(fallback.x, ref.x)
