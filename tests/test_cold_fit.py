"""The cold fit's Gaussian bootstrap (issue 46 item 4): no numba kernel loaded, every block's
root of its Gram matrix exact, the cells' draws of the right law. The draws are matrix
products in another summation order than the numba kernel's (equal to rounding, see
tests/test_kernels.py), so their law is tested here, not their bits; the estimates and
standard errors of a seeded fit do not depend on them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import didmem

from .conftest import staggered_frame


def _fit(weights=False, control_group="never_treated", n_bootstrap=0, n_units=90, **kw):
    frame = staggered_frame(seed=3, n_units=n_units, n_times=6, weights=weights)
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y",
                         weights="w" if weights else None)
    return didmem.DiDEstimator(control_group=control_group, n_bootstrap=n_bootstrap, seed=1,
                               **kw).fit(panel)


@pytest.mark.filterwarnings("ignore::didmem.errors.SmallCohortWarning")
@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("n_units", [90, 20])
def test_every_blocks_root_squares_to_its_gram(weights, n_units):
    """Cholesky where the Gram matrix is definite, the eigendecomposition where a block has
    fewer units than features: ``R' R = G`` either way."""
    inf = _fit(weights=weights, n_units=n_units,
               control_group="not_yet_treated").inference.influence.by_moments
    roots, gram = inf.gaussian_roots(), inf.gram
    if n_units == 20:  # blocks of a few units: singular, by the eigendecomposition
        assert min(np.linalg.matrix_rank(g) for g in gram) < gram.shape[1] - 1
    for r, g in zip(roots, gram):
        np.testing.assert_allclose(r.T @ r, g, rtol=1e-9, atol=1e-9 * np.abs(g).max())


@pytest.mark.parametrize("control_group", ["never_treated", "not_yet_treated"])
def test_gaussian_draws_have_the_cells_covariance(control_group):
    """The draws' sample covariance is the analytic ``sum_i psi_ci psi_di`` within six Monte
    Carlo standard errors (of a Wishart entry: ``sqrt((S_aa S_bb + S_ab**2) / n)``)."""
    res = _fit(control_group=control_group)
    inf = res.inference.influence
    n_draws = 6000
    draws = inf.bootstrap(n_draws, "normal", np.random.default_rng(12)).cells
    live = np.flatnonzero(res.inference.cells.ref == 0)
    want = inf.covariance(live)
    got = draws[:, live].T @ draws[:, live] / n_draws
    d = np.diag(want)
    mc_se = np.sqrt((np.outer(d, d) + want**2) / n_draws)
    assert np.all(np.abs(got - want) <= 6 * mc_se + 1e-12)


def test_a_gaussian_balanced_fit_loads_no_numba():
    """The default fit of a balanced panel (Gaussian multipliers, small-sample correction,
    band), its table and aggregations: numba is neither imported nor a kernel loaded. (The
    summary's Wald pre-test takes the dense covariance kernel on a panel this small; at the
    paper's scale its structured form needs none, and ``didmem estimate`` loads no kernel.)"""
    code = textwrap.dedent("""
        import sys
        import didmem
        from didmem.datasets import simulate_panel
        df, _ = simulate_panel(n_cohorts=3, units_per_cohort=10, n_never_treated=15,
                               n_times=5, seed=2)
        panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
        res = didmem.DiDEstimator(n_bootstrap=200, seed=0).fit(panel)
        res.to_frame()
        for kind in ("simple", "dynamic", "group", "calendar"):
            res.aggregate(kind)
        assert res.inference.multiplier == "normal"
        loaded = sorted(m for m in sys.modules if m == "numba" or m.startswith("numba."))
        print("numba modules:", len(loaded))
        sys.exit(1 if loaded else 0)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
