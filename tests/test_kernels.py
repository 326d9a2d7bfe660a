"""Every numba kernel against its plain-numpy twin (didmem.inference.reference) at 1e-12."""

import warnings

import numpy as np
import pytest

import didmem
from didmem.results.aggregations import build_aggregation
from didmem.inference.prepared import did_cells, level_cells, prepare_panel
from didmem.inference import kernels, reference
from didmem.inference.bands import sup_t_statistics, type1_quantile, type1_quantiles
from didmem.inference.bootstrap import draw_multipliers
from didmem.inference.grouped import bootstrap_cells
from didmem.inference.combination_sums import aggregate_coefficients, combine_draws
from didmem.inference.linear import cell_covariance, combination_draws, combination_variance
from didmem.inference.moments.cells import CellDrawMap

from .conftest import staggered_frame

DESIGNS = [
    # (base_period or "levels", control group, anticipation, weights, clusters)
    ("varying", "never_treated", 0, False, None),
    ("varying", "not_yet_treated", 0, True, None),
    ("universal", "not_yet_treated", 1, False, 7),
    ("universal", "never_treated", 0, True, 5),
    ("levels", "never_treated", 0, False, None),
    ("levels", "not_yet_treated", 0, True, 6),
]


def build(base, control, anticipation, weights, clusters, seed=0):
    frame = staggered_frame(seed=seed, n_units=70, n_times=6, weights=weights, clusters=clusters)
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y",
                         weights="w" if weights else None, cluster="cl" if clusters else None)
    not_yet = control == "not_yet_treated"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", didmem.DataDroppedWarning)  # anticipation drops a cohort
        prepared = prepare_panel(panel, None, need_never_treated=not not_yet,
                                anticipation=anticipation, lower_is_better=False, owner="test")
    if base == "levels":
        cells = level_cells(prepared, not_yet=not_yet, anticipation=anticipation)
    else:
        cells = did_cells(prepared, base_period=base, not_yet=not_yet, anticipation=anticipation)
    return prepared, cells


def statistics(prepared, cells):
    cl = prepared.clusters if prepared.clusters is not None else np.zeros(1, dtype=np.int64)
    att, var, mu1, mu0, w1, w0 = kernels.cell_statistics(
        prepared.y, prepared.w, prepared.starts, *cells.kernel_args(), cl, prepared.n_clusters)
    return att, var, {"mu1": mu1, "mu0": mu0, "w1": w1, "w0": w0}


def dense_psi(prepared, cells):
    return reference.influence_matrix(prepared.y, prepared.w, prepared.starts, *cells.kernel_args())


@pytest.fixture(params=DESIGNS, ids=["-".join(map(str, d)) for d in DESIGNS])
def case(request):
    prepared, cells = build(*request.param)
    att, var, stats = statistics(prepared, cells)
    psi, ref_att = dense_psi(prepared, cells)
    return prepared, cells, att, var, stats, psi, ref_att


def test_rademacher_bits_match_numpy():
    raw = np.random.default_rng(1).bit_generator.random_raw(3 * 3)
    raw = np.asarray(raw, dtype=np.uint64)
    fast = kernels.rademacher_from_raw(raw, 3, 150)
    np.testing.assert_array_equal(fast, reference.rademacher_from_raw(raw, 3, 150))
    assert set(np.unique(fast)) == {-1.0, 1.0}


def test_multiplier_moments():
    rng = np.random.default_rng(2)
    for kind, third in [("rademacher", 0.0), ("mammen", 1.0)]:
        v = draw_multipliers(rng, 400, 1000, kind)
        assert abs(v.mean()) < 0.01 and abs(v.var() - 1) < 0.01
        assert abs((v**3).mean() - third) < 0.03
    u = np.random.default_rng(3).random((4, 9))
    np.testing.assert_array_equal(kernels.mammen_from_uniform(u), reference.mammen_from_uniform(u))


def test_cell_statistics_match_dense_influence(case):
    prepared, cells, att, var, stats, psi, ref_att = case
    np.testing.assert_allclose(att, ref_att, rtol=1e-12, atol=1e-13)
    _, ref_var = reference.cell_statistics(prepared.y, prepared.w, prepared.starts, *cells.kernel_args(),
                                           clusters=prepared.clusters)
    np.testing.assert_allclose(var, ref_var, rtol=1e-12, atol=1e-15)


def test_cell_draws_are_multipliers_times_influence(case):
    prepared, cells, att, var, stats, psi, _ = case
    n_draws = 50
    boot = bootstrap_cells(prepared, cells, stats, n_draws=n_draws, multiplier="mammen",
                           rng=np.random.default_rng(11))
    n_w = prepared.n_clusters or prepared.n_units
    u = draw_multipliers(np.random.default_rng(11), n_draws, n_w, "mammen")
    if prepared.clusters is not None:
        u = u[:, prepared.clusters]
    np.testing.assert_allclose(boot.cells, u @ psi, rtol=1e-11, atol=1e-13)
    blocks = prepared.block_of_rows()
    np.testing.assert_allclose(boot.block_weights,
                               np.stack([(u * prepared.w)[:, blocks == k].sum(1)
                                         for k in range(prepared.starts.size - 1)], 1), rtol=1e-12)
    np.testing.assert_allclose(boot.total, u.sum(1), rtol=1e-12, atol=1e-12)


def test_bootstrap_chunking_does_not_change_draws(monkeypatch):
    prepared, cells = build("varying", "not_yet_treated", 0, True, None)
    _, _, stats = statistics(prepared, cells)
    whole = bootstrap_cells(prepared, cells, stats, n_draws=37, multiplier="rademacher",
                            rng=np.random.default_rng(5))
    monkeypatch.setattr("didmem.inference.bootstrap._CHUNK_ELEMENTS", prepared.n_units * 4)
    chunked = bootstrap_cells(prepared, cells, stats, n_draws=37, multiplier="rademacher",
                              rng=np.random.default_rng(5))
    np.testing.assert_allclose(chunked.cells, whole.cells, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 40, 100, 1000, 1001])
def test_type1_quantiles_match_numpy_inverted_cdf(n):
    x = np.random.default_rng(n).normal(size=(n, 5))
    x[:, 4] = np.round(x[:, 4])  # ties
    probs = np.array([0.0, 0.25, 0.5, 0.75, 0.95, 1.0])
    np.testing.assert_array_equal(kernels.type1_quantiles(x, probs),
                                  reference.type1_quantiles(x, probs))


@pytest.mark.parametrize("n_draws", [1, 127, 128, 129, 300])
def test_sup_t_statistics_match_numpy(n_draws):
    """The blocked numpy maximum (bands.sup_t_statistics) equals its plain twin exactly."""
    rng = np.random.default_rng(4)
    d = rng.normal(size=(n_draws, 9))
    sigma = rng.uniform(0.5, 2, 9)
    for keep in (rng.random(9) < 0.7, np.ones(9, dtype=bool)):
        keep[0] = True
        np.testing.assert_array_equal(sup_t_statistics(d, sigma, keep),
                                      reference.sup_t_statistics(d, sigma, keep))
    assert np.all(sup_t_statistics(d, sigma, np.zeros(9, dtype=bool)) == -np.inf)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 40, 100, 1000, 1001])
def test_type1_quantile_of_a_vector_matches_the_kernel_and_numpy(n):
    x = np.random.default_rng(n).normal(size=n)
    for values in (x, np.round(x)):  # and ties
        for p in (0.0, 0.05, 0.25, 0.5, 0.95, 0.999, 1.0):
            q = type1_quantile(values, p)
            assert q == kernels.type1_quantiles(values[:, None], np.array([p]))[0, 0]
            assert q == reference.type1_quantiles(values[:, None], np.array([p]))[0, 0]


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1001])
def test_numpy_type1_quantiles_equal_the_kernel(n):
    x = np.random.default_rng(n).normal(size=(n, 6))
    x[:, 5] = np.round(x[:, 5])  # ties
    probs = np.array([0.0, 0.25, 0.5, 0.75, 0.95, 1.0])
    np.testing.assert_array_equal(type1_quantiles(x, probs), kernels.type1_quantiles(x, probs))


@pytest.mark.parametrize("design", DESIGNS, ids=["-".join(map(str, d)) for d in DESIGNS])
def test_numpy_aggregation_kernels_equal_the_numba_ones(design):
    """combination_sums.aggregate_coefficients makes the numba kernel's additions in its order (bit for
    bit); combination_sums.combine_draws sums each key's entries in their order (to rounding)."""
    from scipy import sparse

    prepared, cells = build(*design)
    _, _, stats = statistics(prepared, cells)
    rng = np.random.default_rng(6)
    n_keys = 7
    dense = rng.normal(size=(n_keys, cells.size)) * (rng.random((n_keys, cells.size)) < 0.4)
    csc = sparse.csc_matrix(dense)
    args = (*cells.kernel_args(), stats["mu1"], stats["mu0"], stats["w1"], stats["w0"],
            csc.indptr.astype(np.int64), csc.indices.astype(np.int64), csc.data, n_keys,
            prepared.starts.size - 1, prepared.times.size)
    for fast, slow in zip(aggregate_coefficients(*args), kernels.aggregate_coefficients(*args)):
        np.testing.assert_array_equal(fast, slow)
    draws = rng.normal(size=(300, cells.size))
    csr = csc.tocsr()
    want = np.empty((300, n_keys))
    kernels.combine_draws(draws, csr.indptr.astype(np.int64), csr.indices.astype(np.int64),
                          csr.data, want)
    np.testing.assert_allclose(combine_draws(draws, csc), want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("control_group", ["never_treated", "not_yet_treated"])
@pytest.mark.parametrize("base", ["varying", "universal", "levels"])
def test_cell_draw_map_equals_the_cell_draws_kernel_and_the_dense_influence(base, control_group):
    """The BLAS form of the cells' draws (moment_cells.CellDrawMap) equals the numba kernel
    and, with per-unit multipliers, ``U @ psi`` of the dense influence functions (the oracle);
    the products sum in another order: equal to rounding (1e-12), not bitwise."""
    prepared, cells = build(base, control_group, 0, base != "levels", None)
    _, _, stats = statistics(prepared, cells)
    psi, _ = dense_psi(prepared, cells)
    n, n_t = prepared.y.shape
    n_blocks = prepared.starts.size - 1
    features = np.column_stack([prepared.y * prepared.w[:, None], prepared.w, np.ones(n)])
    u = np.random.default_rng(9).normal(size=(23, n))
    sums = np.stack([u[:, lo:hi] @ features[lo:hi] for lo, hi in
                     zip(prepared.starts[:-1], prepared.starts[1:])], axis=1)
    suffix = np.ascontiguousarray(np.cumsum(sums[:, ::-1], axis=1)[:, ::-1])
    kernel = np.full((23, cells.size), np.nan)
    kernels.cell_draws(sums, suffix, *cells.kernel_args(), stats["mu1"], stats["mu0"],
                       stats["w1"], stats["w0"], kernel, 0)
    out = np.full((23, cells.size), np.nan)
    CellDrawMap.build(cells, stats, n_blocks, n_t + 2).apply(sums, out)
    scale = np.abs(kernel).max()
    np.testing.assert_allclose(out, kernel, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(out, u @ psi, rtol=1e-11, atol=1e-12 * scale)


def r_wif(prepared, cells, keepers, att):
    """R's ``wif`` times ``att`` (compute.aggte.R), written literally, on the psi scale."""
    n = prepared.n_units
    blocks = prepared.block_of_rows()
    g_cell = cells.k[keepers]
    pg_all = prepared.block_weights[: prepared.n_cohorts] / n
    pg = pg_all[g_cell]
    indicator = np.stack([prepared.w * (blocks == g) for g in g_cell], axis=1)
    if1 = (indicator - pg) / pg.sum()
    if2 = (indicator - pg).sum(axis=1, keepdims=True) * (pg / pg.sum() ** 2)[None, :]
    return (if1 - if2) @ att[keepers] / n


@pytest.mark.parametrize("kind", ["simple", "dynamic", "calendar", "group", "residual"])
def test_aggregate_influence_matches_r_formula(case, kind):
    prepared, cells, att, var, stats, psi, _ = case
    spec = build_aggregation(prepared, cells, att, kind)
    variance = combination_variance(prepared, cells, stats, spec.weights, spec.omega)
    # dense reference: cells' psi times the weights, plus R's wif for keys that estimate weights
    dense = psi @ spec.weights.T.toarray()
    frame_cells = np.arange(cells.size)
    cohort = prepared.cohorts[cells.k]
    time = prepared.times[cells.t]
    post = cohort <= time
    if kind == "simple":
        dense[:, -1] += r_wif(prepared, cells, frame_cells[post], att)
    elif kind in ("dynamic", "calendar"):
        label = time - cohort if kind == "dynamic" else time
        mask = np.ones(cells.size, bool) if kind == "dynamic" else post
        for j, key in enumerate(spec.keys):
            at_key = mask & (label == key)
            # didmem leaves a reference cell out of an event time with real cells (R averages
            # its zero in; docs/estimands.rst, irregular grids): R's formula on the same cells
            real = at_key & (cells.ref == 0)
            at_key = real if kind == "dynamic" and real.any() else at_key
            dense[:, j] += r_wif(prepared, cells, frame_cells[at_key], att)
        overall = spec.keys >= 0 if kind == "dynamic" else np.ones(spec.keys.size, bool)
        dense[:, -1] = dense[:, :-1][:, overall].mean(axis=1)
    else:  # one value per cohort, overall weighted by cohort share with estimated weights
        key_att = spec.weights[:-1] @ att
        blocks = prepared.block_of_rows()
        pg = prepared.block_weights[: prepared.n_cohorts] / prepared.n_units
        kb = np.searchsorted(prepared.cohorts, spec.keys)
        ind = np.stack([prepared.w * (blocks == g) for g in kb], axis=1)
        if1 = (ind - pg[kb]) / pg[kb].sum()
        if2 = (ind - pg[kb]).sum(1, keepdims=True) * (pg[kb] / pg[kb].sum() ** 2)[None, :]
        dense[:, -1] = dense[:, :-1] @ (pg[kb] / pg[kb].sum()) + (if1 - if2) @ key_att / prepared.n_units
    if prepared.clusters is None:
        expected = (dense**2).sum(axis=0)
    else:
        sums = np.zeros((prepared.n_clusters, dense.shape[1]))
        np.add.at(sums, prepared.clusters, dense)
        expected = (sums**2).sum(axis=0)
    np.testing.assert_allclose(variance, expected, rtol=1e-10, atol=1e-16)


def test_aggregate_draws_match_dense(case):
    prepared, cells, att, var, stats, psi, _ = case
    boot = bootstrap_cells(prepared, cells, stats, n_draws=30, multiplier="rademacher",
                           rng=np.random.default_rng(8))
    n_w = prepared.n_clusters or prepared.n_units
    u = draw_multipliers(np.random.default_rng(8), 30, n_w, "rademacher")
    if prepared.clusters is not None:
        u = u[:, prepared.clusters]
    spec = build_aggregation(prepared, cells, att, "simple")
    draws = combination_draws(prepared, boot, spec.weights, spec.omega)
    post = np.flatnonzero(prepared.cohorts[cells.k] <= prepared.times[cells.t])
    dense = psi @ spec.weights.T.toarray()
    dense[:, -1] += r_wif(prepared, cells, post, att)
    np.testing.assert_allclose(draws, u @ dense, rtol=1e-10, atol=1e-13)


def test_pretest_covariance_matches_dense(case):
    prepared, cells, att, var, stats, psi, _ = case
    which = np.flatnonzero((cells.ref == 0) & (np.arange(cells.size) % 2 == 0))
    cov = cell_covariance(prepared, cells, stats, which)
    expected = psi[:, which].T @ psi[:, which]
    np.testing.assert_allclose(cov, expected, rtol=1e-9, atol=1e-14)
