"""Covariates: DRDID's panel estimators per cell and the generic inference route.

Cross-checks against ``csdid`` 0.4.3 (whose covariate estimators are tested against R
``did``) were produced live, e.g. for never-treated controls and ``dr``::

    ATTgt(yname="lemp", tname="year", idname="countyreal", gname="first.treat", data=mpdta,
          control_group="nevertreated", xformla="lemp~lpop").fit(est_method="dr", bstrap=False)

(R ``did`` 2.5 gives ATT(2004, 2004) = -0.0145, SE 0.0221 for that call.)
"""

import re

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.errors import EstimationError, OverlapWarning, PanelError
from didmem.inference.drdid import panel as drdid
from didmem.inference.influence import StoredInfluence as CellInfluence

METHODS = ("reg", "ipw", "dr")
CONTROLS = {"never_treated": "nevertreated", "not_yet_treated": "notyettreated"}


# ------------------------------------------------------------------ csdid cross-check
@pytest.fixture(scope="module")
def mpdta_lpop(mpdta):
    return didmem.Panel(mpdta, unit="countyreal", time="year", cohort="first.treat",
                        outcome="lemp", never_treated=0, covariates=["lpop"])


@pytest.mark.reference
@pytest.mark.parametrize("control_group", sorted(CONTROLS))
@pytest.mark.parametrize("est_method", METHODS)
def test_matches_csdid_on_mpdta(mpdta, mpdta_lpop, est_method, control_group):
    att_gt = pytest.importorskip("csdid.att_gt", reason="csdid (test extra) not installed")
    ref = att_gt.ATTgt(yname="lemp", tname="year", idname="countyreal", gname="first.treat",
                       data=mpdta, control_group=CONTROLS[control_group],
                       xformla="lemp~lpop").fit(est_method=est_method, bstrap=False)
    res = didmem.DiDEstimator(small_sample=False,
                              est_method=est_method, control_group=control_group,
                              n_bootstrap=0).fit(mpdta_lpop)
    frame = res.to_frame()
    np.testing.assert_allclose(frame["cohort"], ref.results["group"])
    np.testing.assert_allclose(frame["time"], ref.results["year"])
    np.testing.assert_allclose(frame["estimate"], ref.results["att"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(frame["std_error"], ref.results["se"], rtol=0, atol=1e-6)
    assert res.pretest.statistic == pytest.approx(ref.MP["W"], rel=1e-6)
    for kind in ("simple", "group", "dynamic", "calendar"):
        mine = res.aggregate(kind)
        theirs = ref.aggte(typec=kind, bstrap=False).atte
        assert mine.overall.estimate == pytest.approx(theirs["overall_att"], abs=1e-6)
        assert mine.overall.std_error == pytest.approx(theirs["overall_se"], abs=1e-6)
        if kind != "simple":
            np.testing.assert_allclose(mine.std_errors, theirs["se_egt"], atol=1e-6)


@pytest.mark.reference
@pytest.mark.parametrize("base_period", ["varying", "universal"])
@pytest.mark.parametrize("control_group", sorted(CONTROLS))
@pytest.mark.parametrize("est_method", METHODS)
def test_time_varying_covariate_matches_csdid(mpdta, est_method, control_group, base_period):
    """A covariate that changes every year: R (and csdid) take it at the earlier of each
    cell's two periods; so does didmem."""
    att_gt = pytest.importorskip("csdid.att_gt", reason="csdid (test extra) not installed")
    df = mpdta.copy()
    df["lpop_tv"] = df["lpop"] + 0.3 * np.random.default_rng(3).normal(size=len(df))
    ref = att_gt.ATTgt(yname="lemp", tname="year", idname="countyreal", gname="first.treat",
                       data=df, control_group=CONTROLS[control_group],
                       xformla="lemp~lpop_tv").fit(est_method=est_method, bstrap=False,
                                                   base_period=base_period)
    panel = didmem.Panel(df, unit="countyreal", time="year", cohort="first.treat",
                         outcome="lemp", never_treated=0, covariates=["lpop_tv"])
    res = didmem.DiDEstimator(small_sample=False,
                              est_method=est_method, control_group=control_group,
                              base_period=base_period, n_bootstrap=0).fit(panel)
    frame = res.to_frame()
    np.testing.assert_allclose(frame["estimate"], ref.results["att"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(frame["std_error"], np.asarray(ref.results["se"], dtype=float),
                               rtol=0, atol=1e-6)


def test_time_invariant_covariate_versions_agree(mpdta):
    """mpdta's lpop is time-invariant; a time-varying copy that equals it at every base
    period gives the same fit, and one that differs only after the last base period too."""
    df = mpdta.copy()
    df["lpop2"] = df["lpop"] + np.where(df["year"] == 2007, 5.0, 0.0)  # 2007 is never a base
    kw = dict(unit="countyreal", time="year", cohort="first.treat", outcome="lemp",
              never_treated=0)
    a = didmem.DiDEstimator(small_sample=False,
                            n_bootstrap=0).fit(didmem.Panel(df, covariates=["lpop"], **kw))
    b = didmem.DiDEstimator(small_sample=False,
                            n_bootstrap=0).fit(didmem.Panel(df, covariates=["lpop2"], **kw))
    np.testing.assert_allclose(a.estimates, b.estimates, atol=1e-12)


def test_base_period_covariates_are_used(mpdta):
    """A covariate that changes at a base period changes that period's cells only."""
    df = mpdta.copy()
    rng = np.random.default_rng(0)
    shock = dict(zip(df["countyreal"].unique(), rng.normal(size=500)))
    df["lpop2"] = df["lpop"] + np.where(df["year"] == 2003, df["countyreal"].map(shock), 0.0)
    kw = dict(unit="countyreal", time="year", cohort="first.treat", outcome="lemp",
              never_treated=0)
    a = didmem.DiDEstimator(small_sample=False, n_bootstrap=0, est_method="reg").fit(
        didmem.Panel(df, covariates=["lpop"], **kw)).to_frame()
    b = didmem.DiDEstimator(small_sample=False, n_bootstrap=0, est_method="reg").fit(
        didmem.Panel(df, covariates=["lpop2"], **kw)).to_frame()
    base_2003 = (a["base_time"] == 2003).to_numpy()
    assert np.all(np.abs(a["estimate"] - b["estimate"])[base_2003] > 1e-8)
    np.testing.assert_allclose(a["estimate"][~base_2003], b["estimate"][~base_2003], atol=1e-12)


# ------------------------------------------------------------- the influence functions
def _two_period(seed=0, n=300):
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.uniform(size=n)
    d = (rng.random(n) < 1 / (1 + np.exp(-(0.4 * x1 - 0.5 + x2)))).astype(float)
    dy = 0.5 * x1 + x2 + d * (1 + 0.3 * x1) + rng.normal(size=n)
    return dy, d, np.column_stack([np.ones(n), x1, x2])


@pytest.mark.parametrize("name", ["reg_did_panel", "std_ipw_did_panel", "drdid_panel"])
def test_influence_function_is_the_derivative_in_each_units_weight(name):
    """Raising unit i's weight by eps moves the ATT by eps IF_i / n (Gateaux derivative)."""
    fn = getattr(drdid, name)
    dy, d, x = _two_period()
    n = dy.size
    w = np.ones(n)
    inf = fn(dy, d, x, w)[1]
    eps = 1e-6
    for i in (0, 7, 41, 150, 299):
        up, down = w.copy(), w.copy()
        up[i] += eps
        down[i] -= eps
        deriv = (fn(dy, d, x, up)[0] - fn(dy, d, x, down)[0]) / (2 * eps)
        assert deriv == pytest.approx(inf[i] / n, rel=1e-5, abs=1e-9)
    assert abs(inf.mean()) < 1e-10


@pytest.mark.parametrize("name", ["reg_did_panel", "std_ipw_did_panel", "drdid_panel"])
def test_matches_python_drdid(name):
    ref = pytest.importorskip("drdid._estimators", reason="drdid (installed with csdid) absent")
    dy, d, x = _two_period(seed=2)
    w = np.random.default_rng(1).uniform(0.5, 2.0, dy.size)
    mine = getattr(drdid, name)(dy, d, x, w)
    theirs = getattr(ref, name)(dy, np.zeros_like(dy), d, x, w)
    assert mine[0] == pytest.approx(theirs[0], abs=1e-10)
    np.testing.assert_allclose(mine[1], np.ravel(theirs[1]), atol=1e-9)


def test_cell_influence_operations_match_dense_numpy():
    rng = np.random.default_rng(0)
    starts = np.array([0, 3, 7, 12])
    cols = (np.array([0, 2]), np.array([1, 2, 3]), np.array([0, 1, 2, 3]))
    values = tuple(rng.normal(size=(c.size, starts[j + 1] - starts[j])) for j, c in enumerate(cols))
    inf = CellInfluence(starts, cols, values, 4)
    psi = inf.dense()
    assert psi.shape == (12, 4) and psi[:3, 1].tolist() == [0.0] * 3
    np.testing.assert_allclose(inf.variance(), (psi ** 2).sum(0))
    clusters = rng.integers(0, 5, 12)
    sums = np.zeros((5, 4))
    np.add.at(sums, clusters, psi)
    np.testing.assert_allclose(inf.variance(clusters, 5), (sums ** 2).sum(0))
    u = rng.normal(size=(6, 12))
    np.testing.assert_allclose(inf.draws(u), u @ psi)
    L = rng.normal(size=(2, 4))
    np.testing.assert_allclose(inf.combine(L), psi @ L.T)
    which = np.array([3, 1])
    np.testing.assert_allclose(inf.covariance(which), psi[:, which].T @ psi[:, which])


def test_bootstrap_on_the_generic_route(mpdta_lpop):
    res = didmem.DiDEstimator(small_sample=False, n_bootstrap=4000, seed=1).fit(mpdta_lpop)
    ratio = np.asarray(res.std_errors) / np.asarray(res.analytic_std_errors)
    assert np.all(np.abs(ratio - 1) < 0.12)
    assert res.band == "simultaneous" and res.critical_value > 1.96
    agg = res.aggregate("dynamic")
    assert agg.band == "simultaneous"
    assert agg.overall.std_error == pytest.approx(
        res.aggregate("dynamic").overall.std_error)  # same draws, same answer


# ---------------------------------------------------------------- identification
def _conditional_trends_panel(seed=0, n_per=150, n_never=600, n_t=6, effect=1.0):
    """Parallel trends hold only given x: the untreated trend is x per period, and later
    (treated) cohorts have larger x than the never-treated units."""
    rng = np.random.default_rng(seed)
    cohorts = np.concatenate([np.repeat([3.0, 4.0, 5.0], n_per), np.full(n_never, np.inf)])
    n = cohorts.size
    x = rng.normal(size=n) + np.where(np.isfinite(cohorts), 1.0, 0.0)
    times = np.arange(1.0, n_t + 1)
    y = (rng.normal(size=(n, 1)) + x[:, None] * times[None, :]
         + effect * (times[None, :] >= cohorts[:, None]) + 0.5 * rng.normal(size=(n, n_t)))
    return pd.DataFrame({
        "unit": np.repeat(np.arange(n), n_t), "time": np.tile(times, n),
        "cohort": np.repeat(cohorts, n_t), "y": y.ravel(), "x": np.repeat(x, n_t),
    })


def test_conditional_parallel_trends_recovered():
    df = _conditional_trends_panel()
    kw = dict(unit="unit", time="time", cohort="cohort", outcome="y")
    plain = didmem.DiDEstimator(small_sample=False,
                                n_bootstrap=0).fit(didmem.Panel(df, **kw)).to_frame()
    cond = didmem.DiDEstimator(small_sample=False, n_bootstrap=0, est_method="dr").fit(
        didmem.Panel(df, covariates=["x"], **kw)).to_frame()
    post = (plain["time"] >= plain["cohort"]).to_numpy()
    bias_plain = np.abs(plain["estimate"][post] - 1.0).mean()
    bias_dr = np.abs(cond["estimate"][post] - 1.0).mean()
    assert bias_plain > 0.3
    assert bias_dr * 5 <= bias_plain


def test_est_method_irrelevant_without_covariates(small_panel):
    ests = [didmem.DiDEstimator(small_sample=False,
                                est_method=m, n_bootstrap=0).fit(small_panel) for m in METHODS]
    for r in ests[1:]:
        assert np.array_equal(r.estimates, ests[0].estimates)
        assert np.array_equal(r.analytic_std_errors, ests[0].analytic_std_errors)
        assert r.influence is None


# ----------------------------------------------------------------------------- checks
def _frame_with(x_values, seed=0):
    df = _conditional_trends_panel(seed=seed, n_per=20, n_never=40, n_t=5)
    df["x2"] = x_values(df)
    return df


def test_missing_covariate_values_name_column_and_units():
    df = _frame_with(lambda f: f["x"])
    df.loc[[6, 7, 16], "x2"] = np.nan
    with pytest.raises(PanelError, match=r"'x2' has 3 missing or infinite values in 2 units"):
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                     covariates=["x", "x2"])


@pytest.mark.parametrize("est_method", METHODS)
def test_rank_deficient_covariates(est_method):
    df = _frame_with(lambda f: 2 * f["x"] + 1)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         covariates=["x", "x2"])
    with pytest.raises(EstimationError, match=r"rank-deficient"):
        didmem.DiDEstimator(small_sample=False, est_method=est_method, n_bootstrap=0).fit(panel)


def test_too_few_controls_for_the_regression():
    df = _conditional_trends_panel(n_per=10, n_never=5, n_t=5)
    rng = np.random.default_rng(0)
    for j in range(5):
        df[f"z{j}"] = np.repeat(rng.normal(size=df["unit"].nunique()), 5)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         covariates=["x"] + [f"z{j}" for j in range(5)])
    with pytest.raises(EstimationError, match=r"too few for a regression on 7 terms"):
        didmem.DiDEstimator(small_sample=False, est_method="reg", n_bootstrap=0).fit(panel)


def test_weak_overlap_trims_controls_and_warns():
    df = _conditional_trends_panel(n_per=40, n_never=200, n_t=5)
    # controls with very large x look treated: propensity scores near 1
    never = ~np.isfinite(df["cohort"])
    units = df.loc[never, "unit"].unique()[:2]
    df.loc[df["unit"].isin(units), "x"] = 7.0
    df.loc[~never, "x"] += 3.0
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         covariates=["x"])
    with pytest.warns(OverlapWarning) as record:
        res = didmem.DiDEstimator(small_sample=False, est_method="ipw", n_bootstrap=0).fit(panel)
    messages = [str(r.message) for r in record]
    assert any(re.search(r"trimmed \d+ control units .* in \d+ of 12 cells", m) for m in messages)
    assert np.all(np.isfinite(res.estimates))


def test_separated_cells_warn_with_counts():
    df = _conditional_trends_panel(n_per=40, n_never=200, n_t=5)
    treated = np.isfinite(df["cohort"])
    df.loc[treated, "x"] = df.loc[treated, "x"].abs() + 20.0  # the covariate separates
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         covariates=["x"])
    with pytest.warns(OverlapWarning, match=r"reaches 0.999 in 12 of 12 cells, e.g. \(cohort 3"):
        didmem.DiDEstimator(small_sample=False, est_method="dr", n_bootstrap=0).fit(panel)


@pytest.mark.parametrize("not_yet", [False, True])
@pytest.mark.parametrize("est_method", METHODS)
def test_compiled_kernel_matches_numpy_oracle(est_method, not_yet):
    """Weighted, irregular panel with a time-varying covariate: the compiled per-cell kernel
    equals :mod:`didmem.estimators.drdid` applied cell by cell."""
    from didmem.inference.covariates.cells import covariate_cells
    from didmem.inference.prepared import did_cells, prepare_panel

    from .conftest import staggered_frame

    df = staggered_frame(seed=4, n_units=160, n_times=6, weights=True)
    rng = np.random.default_rng(5)
    df["z"] = rng.normal(size=len(df)) + 0.2 * df["time"]
    df["u"] = np.repeat(rng.uniform(size=160), 6)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         weights="w", covariates=["z", "u"])
    prepared = prepare_panel(panel, None, need_never_treated=not not_yet, anticipation=0,
                            lower_is_better=False, owner="test", use_covariates=True)
    cells = did_cells(prepared, base_period="varying", not_yet=not_yet, anticipation=0)
    a1, i1 = covariate_cells(prepared, cells, est_method, ["z", "u"], "test", engine="numba")
    a2, i2 = covariate_cells(prepared, cells, est_method, ["z", "u"], "test", engine="numpy")
    np.testing.assert_allclose(a1, a2, rtol=0, atol=1e-10)
    np.testing.assert_allclose(i1.dense(), i2.dense(), rtol=0, atol=1e-10)


def test_invariances_on_the_covariate_path(mpdta):
    """Shifting the outcome, rescaling and shifting the covariate, and permuting the rows
    change neither estimates nor standard errors."""
    kw = dict(unit="countyreal", time="year", cohort="first.treat", never_treated=0)
    df = mpdta.copy()
    df["y2"] = df["lemp"] + 3.0
    df["lpop2"] = 10.0 * df["lpop"] - 4.0
    base = didmem.DiDEstimator(small_sample=False, n_bootstrap=0).fit(
        didmem.Panel(df, outcome="lemp", covariates=["lpop"], **kw))
    other = didmem.DiDEstimator(small_sample=False, n_bootstrap=0).fit(
        didmem.Panel(df.sample(frac=1.0, random_state=0), outcome="y2", covariates=["lpop2"],
                     **kw))
    np.testing.assert_allclose(other.estimates, base.estimates, atol=1e-10)
    np.testing.assert_allclose(other.analytic_std_errors, base.analytic_std_errors, atol=1e-10)
    assert other.pretest.statistic == pytest.approx(base.pretest.statistic, rel=1e-8)


def test_clustered_standard_errors_match_csdid(mpdta):
    att_gt = pytest.importorskip("csdid.att_gt", reason="csdid (test extra) not installed")
    df = mpdta.copy()
    df["state"] = df["countyreal"] // 1000
    ref = att_gt.ATTgt(yname="lemp", tname="year", idname="countyreal", gname="first.treat",
                       data=df, control_group="nevertreated", xformla="lemp~lpop",
                       clustervar="state").fit(est_method="dr", bstrap=False)
    panel = didmem.Panel(df, unit="countyreal", time="year", cohort="first.treat",
                         outcome="lemp", never_treated=0, covariates=["lpop"], cluster="state")
    res = didmem.DiDEstimator(small_sample=False, n_bootstrap=0).fit(panel)
    np.testing.assert_allclose(res.to_frame()["std_error"], ref.results["se"], atol=1e-6)
    for kind in ("simple", "dynamic", "group"):
        theirs = ref.aggte(typec=kind, bstrap=False).atte
        assert res.aggregate(kind).overall.std_error == pytest.approx(theirs["overall_se"],
                                                                      abs=1e-6)


def test_panel_carries_covariates(mpdta_lpop, mpdta):
    assert mpdta_lpop.covariates == ("lpop",)
    arr = mpdta_lpop.covariate_array()
    assert arr.shape == (500, 5, 1)
    assert "covariates=['lpop']" in repr(mpdta_lpop)
    assert "lpop" in mpdta_lpop.to_frame().columns
    df = mpdta.copy()
    df["name"] = "x"
    kw = dict(unit="countyreal", time="year", cohort="first.treat", outcome="lemp",
              never_treated=0)
    with pytest.raises(PanelError, match=r"'name' \(covariate\) must be numeric"):
        didmem.Panel(df, covariates=["name"], **kw)
    with pytest.raises(PanelError, match=r"Covariate columns must be distinct"):
        didmem.Panel(df, covariates=["lpop", "lpop"], **kw)
    with pytest.raises(PanelError, match=r"covariate #1"):
        didmem.Panel(df, covariates=["nope"], **kw)


@pytest.mark.reference
@pytest.mark.parametrize("est_method", METHODS)
def test_sampling_weights_match_csdid(mpdta, est_method):
    att_gt = pytest.importorskip("csdid.att_gt", reason="csdid (test extra) not installed")
    df = mpdta.copy()
    rng = np.random.default_rng(0)
    df["w"] = df["countyreal"].map(dict(zip(df["countyreal"].unique(),
                                            rng.uniform(0.5, 2.0, 500))))
    ref = att_gt.ATTgt(yname="lemp", tname="year", idname="countyreal", gname="first.treat",
                       data=df, control_group="notyettreated", xformla="lemp~lpop",
                       weights_name="w").fit(est_method=est_method, bstrap=False)
    panel = didmem.Panel(df, unit="countyreal", time="year", cohort="first.treat",
                         outcome="lemp", never_treated=0, covariates=["lpop"], weights="w")
    res = didmem.DiDEstimator(small_sample=False,
                              est_method=est_method, control_group="not_yet_treated",
                              n_bootstrap=0).fit(panel)
    frame = res.to_frame()
    np.testing.assert_allclose(frame["estimate"], ref.results["att"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(frame["std_error"], ref.results["se"], rtol=0, atol=1e-6)
