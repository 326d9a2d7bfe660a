"""One bootstrap loop: the moments' Gaussian draws run through ``multiplier_bootstrap`` as a
chunk source and give the draws of the former loop of their own, number for number; the
balanced route holds the moments route instead of inheriting it; one Welch function, one
chunk constant."""

import ast
from pathlib import Path

import numpy as np
import pytest

import didmem
from didmem.inference import influence as influence_module
from didmem.inference import kernels
from didmem.inference.grouped import GroupedInfluence
from didmem.inference.influence import CellInfluence
from didmem.inference.moments.cells import MomentsInfluence

PACKAGE = Path(didmem.__file__).parent


def _fit(n_bootstrap=300, **kw):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=12, n_never_treated=25,
                                           n_times=5, seed=8)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    return panel, didmem.DiDEstimator(n_bootstrap=n_bootstrap, seed=5, **kw).fit(panel)


def _own_loop(inf: MomentsInfluence, n_draws: int, rng, chunk: int) -> np.ndarray:
    """The former chunk loop of ``MomentsInfluence.bootstrap`` (the oracle)."""
    c, s = inf.cells, inf.stats
    roots = inf.gaussian_roots()
    out = np.empty((n_draws, c.size))
    for row0 in range(0, n_draws, chunk):
        m = min(chunk, n_draws - row0)
        sums = inf.gaussian_sums(m, rng, roots)
        suffix = np.ascontiguousarray(np.cumsum(sums[:, ::-1], axis=1)[:, ::-1])
        kernels.cell_draws(sums, suffix, *c.kernel_args(), s["mu1"], s["mu0"], s["w1"],
                           s["w0"], out, row0)
    return out


@pytest.mark.parametrize("control_group", ["never_treated", "not_yet_treated"])
def test_moments_draws_through_the_one_loop_equal_the_former_loop(monkeypatch, control_group):
    panel, res = _fit(n_bootstrap=0, control_group=control_group)
    grouped = res.inference.influence
    assert isinstance(grouped, GroupedInfluence)
    inf = grouped.by_moments
    calls = []
    real = influence_module.multiplier_bootstrap
    monkeypatch.setattr(influence_module, "multiplier_bootstrap",
                        lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    draws = inf.bootstrap(400, "normal", np.random.default_rng(3))
    assert len(calls) == 1 and calls[0].n_draws == 400  # the one loop ran the draws
    ref = _own_loop(inf, 400, np.random.default_rng(3), chunk=400)
    np.testing.assert_allclose(draws.cells, ref, rtol=1e-12, atol=1e-14)
    # the balanced route's Gaussian draws are the moments' own
    again = grouped.bootstrap(400, "normal", np.random.default_rng(3))
    np.testing.assert_allclose(again.cells, draws.cells, rtol=1e-12, atol=1e-14)


def test_the_moments_source_draws_in_chunks(monkeypatch):
    import didmem.inference.bootstrap as bootstrap

    _, res = _fit(n_bootstrap=0)
    inf = res.inference.influence.by_moments
    n_blocks, p, _ = inf.gram.shape
    monkeypatch.setattr(bootstrap, "_CHUNK_ELEMENTS", 3 * n_blocks * p + 1)
    with inf.multiplier_chunks(10, "normal", np.random.default_rng(0)) as chunks:
        assert chunks.chunk == 3 and len(chunks._sizes) == 4
    draws = inf.bootstrap(10, "normal", np.random.default_rng(0))
    ref = _own_loop(inf, 10, np.random.default_rng(0), chunk=3)
    np.testing.assert_allclose(draws.cells, ref, rtol=1e-12, atol=1e-14)


def test_moments_refuse_per_unit_multipliers_and_clusters():
    _, res = _fit(n_bootstrap=0)
    inf = res.inference.influence.by_moments
    with pytest.raises(didmem.errors.EstimationError, match="Gaussian"):
        inf.bootstrap(10, "rademacher", np.random.default_rng(0))
    with pytest.raises(didmem.errors.EstimationError, match="with clusters"):
        inf.bootstrap(10, "normal", np.random.default_rng(0), n_clusters=3)


def test_the_routes_hold_rather_than_inherit_and_skip():
    assert not issubclass(GroupedInfluence, MomentsInfluence)
    assert "bootstrap" not in vars(MomentsInfluence)  # the protocol's, through the one loop
    assert MomentsInfluence.bootstrap is CellInfluence.bootstrap


def _assigned(name: str) -> list[str]:
    out = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in node.targets):
                out.append(str(path.relative_to(PACKAGE)))
    return out


def test_one_chunk_constant_and_one_welch_function():
    assert _assigned("_CHUNK_ELEMENTS") == ["inference/bootstrap.py"]
    from didmem.inference import small_sample

    assert not hasattr(small_sample, "group_welch")
    parts = np.array([[2 / 3, 1.0], [0.8, 0.5]])
    same = small_sample.block_welch(parts, np.array([3, 5]))
    per_row = small_sample.block_welch(parts, np.array([[3, 3], [5, 5]]))
    np.testing.assert_array_equal(same[0], per_row[0])
    np.testing.assert_array_equal(same[1], per_row[1])
