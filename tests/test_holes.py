"""Panels with holes (balance="keep") and repeated cross-sections (unit=None)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import didmem
from didmem.errors import EstimationError, PanelError
from didmem.inference.prepared import did_cells
from didmem.inference.prepared import prepare_panel
from didmem.inference.holes.influence import HolesInfluence, hole_cells


def _frame(seed=0, n_times=6):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20,
                                           n_never_treated=30, n_times=n_times, seed=seed)
    rng = np.random.default_rng(seed)
    units = df["unit"].unique()
    df["w"] = df["unit"].map(dict(zip(units, rng.uniform(0.5, 2.0, units.size))))
    df["cl"] = df["unit"] % 7
    return df


def _forced_holes(panel):
    """The same balanced panel read through the route of panels with holes."""
    out = copy.copy(panel)
    out.layout = "unbalanced"
    return out


def _holed(df, frac=0.1, seed=1):
    rng = np.random.default_rng(seed)
    return df[rng.random(len(df)) >= frac]


def _max_diff(a, b):
    return float(np.nanmax(np.abs(np.asarray(a) - np.asarray(b))))


SETTINGS = [(cg, bp) for cg in ("never_treated", "not_yet_treated")
            for bp in ("varying", "universal")]


@pytest.mark.filterwarnings("ignore::didmem.errors.InferenceWarning")  # 7 clusters: R's fallback
@pytest.mark.parametrize("control_group,base_period", SETTINGS)
@pytest.mark.parametrize("extra", [{}, {"weights": "w"}, {"cluster": "cl"}])
def test_holes_route_on_a_balanced_panel_equals_the_balanced_route(control_group, base_period,
                                                                    extra):
    df = _frame()
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y", **extra)
    est = didmem.DiDEstimator(n_bootstrap=199, small_sample=False, seed=5,
                              control_group=control_group, base_period=base_period)
    ref, got = est.fit(panel), est.fit(_forced_holes(panel))
    assert _max_diff(ref.estimates, got.estimates) < 1e-12
    assert _max_diff(ref.analytic_std_errors, got.analytic_std_errors) < 1e-12
    assert _max_diff(ref.std_errors, got.std_errors) < 1e-12
    assert abs(ref.critical_value - got.critical_value) < 1e-9
    for kind in ("simple", "group", "dynamic", "calendar"):
        a, b = ref.aggregate(kind).to_frame(), got.aggregate(kind).to_frame()
        assert _max_diff(a["estimate"], b["estimate"]) < 1e-12
        assert _max_diff(a["std_error"], b["std_error"]) < 1e-12
    if "cluster" not in extra:
        assert abs(ref.pretest.statistic - got.pretest.statistic) < 1e-9


def test_small_sample_default_agrees_on_a_balanced_panel():
    panel = didmem.Panel(_frame(), unit="unit", time="time", cohort="cohort", outcome="y")
    est = didmem.DiDEstimator(n_bootstrap=199, seed=2)
    ref, got = est.fit(panel), est.fit(_forced_holes(panel))
    # Welch standard errors are analytic: equal; the band's Gaussian draws come from the
    # blocks' Gram roots instead of one weight per unit (the same distribution)
    assert _max_diff(ref.std_errors, got.std_errors) < 1e-12
    assert abs(ref.critical_value - got.critical_value) < 0.15
    a, b = ref.aggregate("dynamic").to_frame(), got.aggregate("dynamic").to_frame()
    assert _max_diff(a["std_error"], b["std_error"]) < 1e-12


def _four_means(df, g, t, b, controls):
    """ATT(g, t) with base b from the four weighted means of observed rows (the oracle)."""
    def mean(rows):
        return np.average(rows["y"], weights=rows["w"])
    treated = df[df["cohort"] == g]
    control = df[controls(df)]
    return ((mean(treated[treated.time == t]) - mean(treated[treated.time == b]))
            - (mean(control[control.time == t]) - mean(control[control.time == b])))


@pytest.mark.parametrize("kind", ["unbalanced", "cross_sections"])
def test_estimates_are_differences_of_four_means_of_observed_rows(kind):
    df = _holed(_frame(), 0.2)
    unit = "unit" if kind == "unbalanced" else None
    panel = didmem.Panel(df, unit=unit, time="time", cohort="cohort", outcome="y",
                         weights="w", balance="keep")
    assert panel.layout == kind
    res = didmem.DiDEstimator(n_bootstrap=0, small_sample=False).fit(panel)
    frame = res.to_frame()
    never = df["cohort"].isna() | np.isinf(df["cohort"])
    for _, row in frame.iterrows():
        g, t = row["cohort"], row["time"]
        b = g - 1 if t >= g else t - 1
        want = _four_means(df, g, t, b, lambda d: d["cohort"].isna() | np.isinf(d["cohort"]))
        assert abs(row["estimate"] - want) < 1e-12
    assert never.any()


@pytest.mark.parametrize("kind", ["unbalanced", "cross_sections"])
@pytest.mark.parametrize("control_group,base_period", SETTINGS)
def test_moment_route_equals_dense_influence_functions(kind, control_group, base_period):
    df = _holed(_frame(), 0.15)
    unit = "unit" if kind == "unbalanced" else None
    panel = didmem.Panel(df, unit=unit, time="time", cohort="cohort", outcome="y",
                         weights="w", cluster="cl", balance="keep")
    prepared = prepare_panel(panel, None, need_never_treated=control_group ==
                                  "never_treated", anticipation=0, lower_is_better=False,
                                  owner="test")
    cells = did_cells(prepared, base_period=base_period,
                      not_yet=control_group == "not_yet_treated", anticipation=0)
    _, coefficients, _ = hole_cells(prepared.holes, prepared.w, prepared.starts, cells,
                                    prepared.times.size)
    inf = HolesInfluence.build(prepared.holes, prepared.w, prepared.starts, cells,
                               prepared.times.size, coefficients)
    psi = inf.dense()
    assert np.allclose(inf.variance(), (psi**2).sum(axis=0), rtol=1e-10, atol=1e-16)
    sums = np.zeros((prepared.n_clusters, psi.shape[1]))
    np.add.at(sums, prepared.clusters, psi)
    assert np.allclose(inf.variance(prepared.clusters, prepared.n_clusters),
                       (sums**2).sum(axis=0), rtol=1e-10, atol=1e-16)
    which = np.flatnonzero(cells.ref == 0)[::2]
    assert np.allclose(inf.covariance(which), psi[:, which].T @ psi[:, which], rtol=1e-9,
                       atol=1e-15)
    u = np.random.default_rng(0).standard_normal((7, prepared.n_units))
    assert np.allclose(inf.draws(u), u @ psi, rtol=1e-9, atol=1e-14)
    # the fused Rademacher kernel reads the very weights draw_multipliers would give
    from didmem.inference.bootstrap import draw_multipliers

    boot = inf.bootstrap(5, "rademacher", np.random.default_rng(3))
    u = draw_multipliers(np.random.default_rng(3), 5, prepared.n_units, "rademacher")
    assert np.allclose(boot.cells, u @ psi, rtol=1e-9, atol=1e-14)
    assert np.allclose(boot.total, u.sum(axis=1))
    # Gaussian draws from the Gram roots have the influence functions' covariance
    boot = inf.bootstrap(4000, "normal", np.random.default_rng(4))
    live = np.flatnonzero(cells.ref == 0)[:3]
    emp = np.cov(boot.cells[:, live].T, bias=True)
    assert np.allclose(emp, psi[:, live].T @ psi[:, live], rtol=0.15,
                       atol=0.15 * np.abs(psi[:, live].T @ psi[:, live]).max())
    rng = np.random.default_rng(1)
    weights = rng.random((4, cells.size)) * (rng.random((4, cells.size)) < 0.3)
    omega = rng.standard_normal((4, prepared.n_cohorts))
    pg = prepared.block_weights[: prepared.n_cohorts] / prepared.n_units
    coef = inf.combination_coefficients(weights, omega, prepared.n_units, pg)
    comb = psi @ weights.T
    block = np.repeat(np.arange(prepared.starts.size - 1), np.diff(prepared.starts))
    for j in range(prepared.n_cohorts):
        comb[block == j] += prepared.w[block == j, None] * omega[:, j] / prepared.n_units
    comb -= (omega @ pg) / prepared.n_units
    assert np.allclose(inf.combination_covariance(coef), comb.T @ comb, rtol=1e-9, atol=1e-15)
    assert np.allclose(inf.combination_block_variances(coef),
                       np.add.reduceat(comb**2, prepared.starts[:-1], axis=0), rtol=1e-9,
                       atol=1e-15)
    treated = np.array([(psi[block == cells.k[c], c] ** 2).sum() for c in range(cells.size)])
    assert np.allclose(inf.treated_variance(), treated, rtol=1e-9, atol=1e-16)


@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("rows_per_unit", [1, 3])
def test_fused_rademacher_sums_equal_the_dense_multipliers(rows_per_unit, weighted):
    """64 draws per pass over the rows give each draw's sums exactly (draws not a multiple
    of 64, blocks starting inside a random word, units with several rows)."""
    from didmem.inference.holes.kernels import _rademacher_sums
    from didmem.inference.kernels import rademacher_from_raw

    rng = np.random.default_rng(5)
    n_units, n_t, n_draws = 301, 5, 70
    starts = np.array([0, 37, 130, 131, 301], dtype=np.int64)
    unit_start = np.arange(n_units + 1, dtype=np.int64) * rows_per_unit
    time = rng.integers(0, n_t, n_units * rows_per_unit).astype(np.int64)
    wy = rng.standard_normal(time.size)
    w = rng.uniform(0.5, 2.0, n_units) if weighted else np.ones(n_units)
    raw = np.asarray(rng.bit_generator.random_raw(n_draws * ((n_units + 63) // 64)),
                     dtype=np.uint64)
    sums = _rademacher_sums(raw, n_draws, unit_start, time, wy, w, weighted, starts, n_t,
                            np.empty((n_draws + 3, starts.size - 1, 2 * n_t + 2)))
    u = rademacher_from_raw(raw, n_draws, n_units)
    unit = np.repeat(np.arange(n_units), rows_per_unit)
    z = np.zeros((n_units, 2 * n_t + 2))
    np.add.at(z, (unit, time), wy)
    np.add.at(z, (unit, n_t + time), w[unit])
    z[:, 2 * n_t] = w
    z[:, 2 * n_t + 1] = 1.0
    for j in range(starts.size - 1):
        lo, hi = starts[j], starts[j + 1]
        assert np.allclose(sums[:, j], u[:, lo:hi] @ z[lo:hi], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("est_method", ["reg", "dr", "ipw"])
@pytest.mark.parametrize("kind", ["unbalanced", "cross_sections"])
def test_cross_section_estimators_without_covariates_are_the_four_means(kind, est_method):
    """With the intercept alone, R's cross-section estimators (the covariate route, cell by
    cell) give the four means' ATT and the moment route's influence functions."""
    import dataclasses

    from didmem.inference.covariates.holes import covariate_hole_cells

    df = _holed(_frame(), 0.15)
    unit = "unit" if kind == "unbalanced" else None
    panel = didmem.Panel(df, unit=unit, time="time", cohort="cohort", outcome="y",
                         weights="w", balance="keep")
    prepared = prepare_panel(panel, None, need_never_treated=False, anticipation=0,
                                  lower_is_better=False, owner="test")
    prepared = dataclasses.replace(prepared, holes=dataclasses.replace(
        prepared.holes, x=np.zeros((prepared.holes.size, 0))))
    cells = did_cells(prepared, base_period="varying", not_yet=True, anticipation=0)
    att, coefficients, _ = hole_cells(prepared.holes, prepared.w, prepared.starts, cells,
                                      prepared.times.size)
    psi = HolesInfluence.build(prepared.holes, prepared.w, prepared.starts, cells,
                               prepared.times.size, coefficients).dense()
    got_att, influence = covariate_hole_cells(prepared, cells, est_method, [], "test")
    assert np.allclose(got_att, att, rtol=1e-10, atol=1e-12)
    assert np.allclose(influence.dense(), psi, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("unit", ["unit", None])
def test_covariates_on_holes_serve_the_default_inference(unit):
    """Covariates with holes or cross-sections: the default fit (small-sample correction,
    bootstrap band, clusters), aggregations and both pre-tests run and agree with the
    analytic standard errors."""
    df = _holed(_frame(), 0.1)
    df["x"] = np.random.default_rng(3).normal(size=len(df))
    panel = didmem.Panel(df, unit=unit, time="time", cohort="cohort", outcome="y",
                         covariates=["x"], cluster="cl", balance="keep")
    res = didmem.DiDEstimator(n_bootstrap=2000, seed=0).fit(panel)
    frame = res.to_frame()
    live = frame["std_error"].notna()
    assert live.sum() > 10 and np.all(np.isfinite(frame.loc[live, "estimate"]))
    ratio = frame.loc[live, "std_error"] / res.analytic_std_errors[live.to_numpy()]
    assert 0.7 < np.median(ratio) < 1.3
    assert np.isfinite(res.aggregate("dynamic").overall.std_error)
    assert np.isfinite(res.pretest.statistic)
    assert np.isfinite(res.pretrend_test().pvalue)


def test_keep_on_a_balanced_table_is_the_balanced_panel():
    df = _frame()
    keep = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                        balance="keep")
    plain = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    assert keep.layout == "balanced" and not keep.has_holes
    np.testing.assert_array_equal(keep.outcome_matrix(), plain.outcome_matrix())


def test_describe_holes_counts_missing_cells_where_they_are():
    df = _frame()
    dropped = df.iloc[[0, 1, 7]]
    panel = didmem.Panel(df.drop(dropped.index), unit="unit", time="time", cohort="cohort",
                         outcome="y", balance="keep")
    holes = panel.describe_holes()
    assert holes.attrs["n_missing"] == 3
    assert holes.attrs["n_incomplete_units"] == dropped["unit"].nunique()
    missing = holes[holes["n_missing"] > 0]
    got = sorted(zip(missing["cohort"], missing["time"], missing["n_missing"]))
    want = dropped.assign(cohort=dropped["cohort"].fillna(np.inf)).groupby(
        ["cohort", "time"]).size()
    assert got == sorted((g, t, n) for (g, t), n in want.items())
    assert "3 missing cells" in repr(panel)


def test_cross_sections_describe_rows_per_cell():
    df = _frame()
    panel = didmem.Panel(df, unit=None, time="time", cohort="cohort", outcome="y")
    holes = panel.describe_holes()
    assert panel.layout == "cross_sections" and panel.n_units == len(df)
    assert holes["n_observed"].sum() == len(df)
    assert holes["n_missing"].isna().all()
    assert len(panel.to_frame()) == len(df)


def test_refusals_name_what_is_wrong():
    df = _frame()
    holed = df.iloc[1:]
    with pytest.raises(PanelError, match="balance='keep'"):
        didmem.Panel(holed, unit="unit", time="time", cohort="cohort", outcome="y")
    with pytest.raises(PanelError, match="cross-sections"):
        didmem.Panel(df, unit=None, time="time", cohort="cohort", outcome="y",
                     balance="drop_incomplete_units")
    panel = didmem.Panel(holed, unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    with pytest.raises(PanelError, match="1 missing"):
        panel.outcome_matrix()
    with pytest.raises(PanelError, match="balanced panel"):
        didmem.TWFEEstimator().fit(panel)  # it reads the dense views
    cov = didmem.Panel(holed.assign(one=1.0), unit="unit", time="time", cohort="cohort",
                       outcome="y", covariates=["one"], balance="keep")
    with pytest.raises(EstimationError, match=r"\['one'\] are rank-deficient.*of cell \("):
        didmem.DiDEstimator(n_bootstrap=0).fit(cov)
    g = df.loc[np.isfinite(df["cohort"].fillna(np.inf)), "cohort"].min()
    empty = df[~((df["cohort"] == g) & (df["time"] == g - 1))]
    panel = didmem.Panel(empty, unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    with pytest.raises(EstimationError, match=r"no observed rows.*the cohort at time"):
        didmem.DiDEstimator(n_bootstrap=0).fit(panel)


def test_nan_outcome_is_an_error_not_a_hole():
    df = _frame()
    df.loc[df.index[3], "y"] = np.nan
    with pytest.raises(PanelError, match="NaN"):
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                     balance="keep")


@pytest.mark.filterwarnings("ignore:The simultaneous critical value is below")
@pytest.mark.parametrize("unit", ["unit", None])
def test_results_of_holes_serve_views_plots_and_sensitivity(unit):
    df = _holed(_frame(n_times=8), 0.1)
    panel = didmem.Panel(df, unit=unit, time="time", cohort="cohort", outcome="y",
                         balance="keep")
    res = didmem.DiDEstimator(n_bootstrap=99, seed=0,
                              base_period="universal").fit(panel)
    for view in ("instantaneous", "persistent", "residual"):
        frame = res.aggregate(view).to_frame()
        assert np.isfinite(frame["std_error"]).all()
    assert np.isfinite(res.pretrend_test().statistic)
    assert np.isfinite(res.pretest.statistic)
    sens = didmem.sensitivity(res.aggregate("dynamic"), "smoothness", m=(0.0, 0.05),
                              grid_points=50)
    assert len(sens.to_frame()) >= 2
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from didmem import plotting

    for plot in (plotting.plot_profile, plotting.plot_instantaneous, plotting.plot_persistent):
        ax = plot(res)
        assert ax.has_data()
        matplotlib.pyplot.close("all")


def test_small_sample_parts_of_cross_sections_are_the_four_means():
    df = _frame()
    panel = didmem.Panel(df, unit=None, time="time", cohort="cohort", outcome="y")
    prepared = prepare_panel(panel, None, need_never_treated=True, anticipation=0,
                                  lower_is_better=False, owner="test")
    cells = did_cells(prepared, base_period="varying", not_yet=False, anticipation=0)
    _, coefficients, _ = hole_cells(prepared.holes, prepared.w, prepared.starts, cells,
                                    prepared.times.size)
    inf = HolesInfluence.build(prepared.holes, prepared.w, prepared.starts, cells,
                               prepared.times.size, coefficients)
    parts, n = inf.welch_parts()
    assert np.allclose(parts.sum(axis=0), inf.variance(), rtol=1e-10)
    cohort = df["cohort"].fillna(np.inf).to_numpy()
    time = df["time"].to_numpy()
    for c in range(cells.size):
        g = prepared.cohorts[cells.k[c]]
        t, b = prepared.times[cells.t[c]], prepared.times[cells.b[c]]
        want = [(cohort == g) & (time == t), (cohort == g) & (time == b),
                np.isinf(cohort) & (time == t), np.isinf(cohort) & (time == b)]
        assert list(n[:, c]) == [w.sum() for w in want]
    holed = didmem.Panel(_holed(df), unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    prepared = prepare_panel(holed, None, need_never_treated=True, anticipation=0,
                                  lower_is_better=False, owner="test")
    cells = did_cells(prepared, base_period="varying", not_yet=False, anticipation=0)
    _, coefficients, _ = hole_cells(prepared.holes, prepared.w, prepared.starts, cells,
                                    prepared.times.size)
    assert HolesInfluence.build(prepared.holes, prepared.w, prepared.starts, cells,
                                prepared.times.size, coefficients).welch_parts() is None


def test_studies_keep_their_scores_and_say_which_are_missing():
    from didmem.study.estimate import EstimateSettings
    from didmem.study.pipeline import _holes_line

    assert EstimateSettings().balance == "keep"
    df = _frame()
    first = df["time"].min()
    gone = df[df["time"] == first].index[:2].union(df[df["time"] == first + 3].index[:1])
    line = _holes_line(df.drop(gone), "y")
    n = df["unit"].nunique() * df["time"].nunique()
    assert line.startswith(f"y: 3 of {n} (instance, checkpoint) scores are missing")
    assert f"checkpoint {first:g}: 2" in line and f"checkpoint {first + 3:g}: 1" in line
    assert _holes_line(df, "y") == ""


def test_cli_estimate_balance_keep(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    from didmem.cli import main

    path = tmp_path / "panel.csv"
    _frame().iloc[3:].to_csv(path, index=False)
    out = tmp_path / "r.parquet"
    assert main(["estimate", str(path), "--outcome", "y", "--out", str(out), "--draws", "0",
                 "--balance", "keep"]) == 0
    assert "3 of 540 (unit, time) rows missing" in capsys.readouterr().out
