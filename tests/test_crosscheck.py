"""Cross-checks of didmem against the Python ports of R ``did``: ``csdid`` and ``diff-diff``.

These tests run only where the ``bench`` extra is installed (``pip install -e ".[bench]"``);
without ``csdid`` or ``diff-diff`` each test skips with the reason. They compare, on a small
simulated staggered panel without covariates and with a varying base period, the group-time
ATT(g,t) for every cohort and period (pre-periods included) and their *analytic* standard errors
(``n_bootstrap=0``), for both control groups.

What is comparable, and why
---------------------------
Point estimates: without covariates every R-faithful estimator reduces ATT(g,t) to a
difference of mean changes, ``mean(Y_t - Y_b | G=g) - mean(Y_t - Y_b | C)``, with ``b = t-1``
for pre-periods and ``b = g-1`` afterwards (varying base) and ``C`` the never-treated units, or
those plus the units of other cohorts ``g' > max(t, b)`` (not yet treated). csdid, diff-diff
and didmem must agree to rounding.

Analytic standard errors: all three use R ``did``'s convention, checked by reading their
sources (csdid 0.4.3 ``att_gt.py``; diff-diff 3.13.0 ``staggered.py``) and by the
``test_references_agree`` test below:

- R ``did`` / csdid: ``se = sqrt(mean(IF**2)) / sqrt(n) = sqrt(sum(IF**2)) / n`` with the
  per-unit influence function ``IF`` scaled to the whole sample of ``n`` units;
- diff-diff: ``se = sqrt(sum(phi**2))`` with ``phi = (dY - mean) / n_g`` scaled within the
  treated and control groups.

Both equal ``sqrt(s2_g / n_g + s2_C / n_C)`` with population (``ddof=0``) variances of the
outcome change, so they are the same number; no ``n / (n - 1)`` correction appears in any of
them. Bootstrap standard errors and sup-t critical values are random and depend on each
package's generator, so they are not compared here (the benchmark records them side by side).

Aggregations (``simple``, ``group``, ``dynamic``, ``calendar``) and the Wald pre-test are
compared with csdid alone: csdid 0.4.3 reproduces R ``did`` 2.5.0's ``aggte`` (with the
estimated-weights correction of the influence function) and ``att_gt``'s pre-test ``W`` on
``mpdta`` to rounding (checked against ``tests/data/reference`` while writing these tests),
whereas diff-diff names and scopes its aggregations differently. csdid rounds the pre-test
p-value to 5 places, as R does, so the p-value is compared to 1e-5.

diff-diff's simultaneous band covers event-study aggregates only, never ATT(g,t) cells, so it
has nothing to compare with didmem's cell band.

Universal base period and anticipation are compared with csdid only. Both packages agree on
them where both estimate a cell, but under anticipation ``a`` csdid follows R and drops the
cohorts treated by the first period plus ``a`` (with a warning), whereas diff-diff keeps them and
reports their cells as NaN.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem

pytestmark = pytest.mark.reference

CONTROL_GROUPS = ("never_treated", "not_yet_treated")
# Cohort -> number of units. Unequal sizes, a cohort treated in the last period and a cohort
# with a single pre-period, so that the not-yet-treated control sets change from cell to cell.
COHORT_SIZES = {2: 23, 3: 31, 5: 40, 6: 17, 8: 26}
N_NEVER = 45
N_PERIODS = 8
ATOL = 1e-9
RTOL = 1e-6
# didmem's aggregation name -> the column of its key in ``aggregate(...).to_frame()``.
AGGREGATIONS = {"simple": None, "group": "cohort", "dynamic": "event_time", "calendar": "time"}


def simulate_small_panel(seed: int = 7) -> pd.DataFrame:
    """A small balanced staggered panel with heterogeneous, dynamic effects.

    Parameters
    ----------
    seed : int
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    pandas.DataFrame
        Columns ``unit``, ``time`` (``1..N_PERIODS``), ``cohort`` (``0`` for never-treated
        units, as R codes them) and ``y``; one row per (unit, time).
    """
    rng = np.random.default_rng(seed)
    cohort = np.concatenate(
        [np.full(size, g) for g, size in COHORT_SIZES.items()] + [np.zeros(N_NEVER, int)]
    )
    n = cohort.size
    times = np.arange(1, N_PERIODS + 1)
    # Noise whose scale differs by cohort, so that the control-group variance matters.
    scale = 0.5 + 0.1 * (cohort % 4)
    y = (
        rng.normal(size=n)[:, None]
        + 0.3 * times[None, :]
        + rng.normal(size=(n, N_PERIODS)) * scale[:, None]
    )
    e = times[None, :] - cohort[:, None]
    treated = (cohort[:, None] > 0) & (e >= 0)
    y = y + np.where(treated, 1.0 + 0.2 * cohort[:, None] - 0.15 * e, 0.0)
    return pd.DataFrame(
        {
            "unit": np.repeat(np.arange(101, 101 + n), N_PERIODS),
            "time": np.tile(times, n),
            "cohort": np.repeat(cohort, N_PERIODS),
            "y": y.ravel(),
        }
    )


@pytest.fixture(scope="module")
def panel_frame() -> pd.DataFrame:
    return simulate_small_panel()


def _table(cohort, time, estimate, std_error) -> pd.DataFrame:
    """One row per (cohort, time), sorted, with float keys."""
    out = pd.DataFrame(
        {
            "cohort": np.asarray(cohort, dtype=float),
            "time": np.asarray(time, dtype=float),
            "estimate": np.asarray(estimate, dtype=float),
            "std_error": np.asarray(std_error, dtype=float),
        }
    )
    return out.sort_values(["cohort", "time"], ignore_index=True)


def _csdid_fit(df: pd.DataFrame, control_group: str, base_period: str = "varying",
               anticipation: int = 0):
    """csdid's fitted ``ATTgt`` with analytic inference (``bstrap=False``)."""
    att_gt = pytest.importorskip("csdid.att_gt", reason="csdid is not installed")
    cg = {"never_treated": "nevertreated", "not_yet_treated": "notyettreated"}[control_group]
    return att_gt.ATTgt(
        yname="y", tname="time", idname="unit", gname="cohort", data=df, control_group=cg,
        anticipation=anticipation,
    ).fit(est_method="dr", base_period=base_period, bstrap=False)


def _didmem_result(df: pd.DataFrame, control_group: str, base_period: str = "varying",
                   anticipation: int = 0):
    """didmem's analytic result; never-treated units passed as ``inf``."""
    frame = df.assign(cohort=df["cohort"].where(df["cohort"] > 0, np.inf))
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")
    return didmem.DiDEstimator(
        small_sample=False,
        control_group=control_group, base_period=base_period, anticipation=anticipation,
        n_bootstrap=0, seed=0,
    ).fit(panel)


def fit_didmem(df: pd.DataFrame, control_group: str) -> pd.DataFrame:
    """didmem's analytic ATT(g,t) table; never-treated units passed as ``inf``."""
    t = _didmem_result(df, control_group).to_frame()
    return _table(t["cohort"], t["time"], t["estimate"], t["std_error"])


def fit_csdid(df: pd.DataFrame, control_group: str) -> pd.DataFrame:
    """csdid's analytic ATT(g,t) table (R ``did``'s ``att_gt`` with ``bstrap=FALSE``)."""
    r = _csdid_fit(df, control_group).results
    return _table(r["group"], r["year"], r["att"], r["se"])


def fit_diff_diff(df: pd.DataFrame, control_group: str) -> pd.DataFrame:
    """diff-diff's analytic ATT(g,t) table (``CallawaySantAnna`` with ``n_bootstrap=0``)."""
    dd = pytest.importorskip("diff_diff", reason="diff-diff is not installed")
    res = dd.CallawaySantAnna(
        control_group=control_group,
        base_period="varying",
        estimation_method="dr",
        n_bootstrap=0,
    ).fit(df, outcome="y", unit="unit", time="time", first_treat="cohort")
    gte = res.group_time_effects
    keys = sorted(gte)
    return _table(
        [k[0] for k in keys],
        [k[1] for k in keys],
        [gte[k]["effect"] for k in keys],
        [gte[k]["se"] for k in keys],
    )


def assert_tables_match(ours: pd.DataFrame, theirs: pd.DataFrame, who: str) -> None:
    """Same cells, and the same estimates and standard errors to RTOL/ATOL."""
    pd.testing.assert_frame_equal(
        ours[["cohort", "time"]], theirs[["cohort", "time"]], obj=f"cells vs {who}"
    )
    np.testing.assert_allclose(
        ours["estimate"], theirs["estimate"], rtol=RTOL, atol=ATOL,
        err_msg=f"ATT(g,t) differs from {who}",
    )
    np.testing.assert_allclose(
        ours["std_error"], theirs["std_error"], rtol=RTOL, atol=ATOL,
        err_msg=f"analytic standard errors differ from {who}",
    )


def test_small_panel_shape(panel_frame):
    n_units = sum(COHORT_SIZES.values()) + N_NEVER
    assert len(panel_frame) == n_units * N_PERIODS
    assert not panel_frame.duplicated(["unit", "time"]).any()


@pytest.mark.parametrize("control_group", CONTROL_GROUPS)
def test_references_agree(panel_frame, control_group):
    """csdid and diff-diff agree with each other, so either can serve as the oracle."""
    assert_tables_match(
        fit_csdid(panel_frame, control_group),
        fit_diff_diff(panel_frame, control_group),
        "diff-diff (as csdid)",
    )


@pytest.mark.parametrize("control_group", CONTROL_GROUPS)
def test_matches_csdid(panel_frame, control_group):
    """ATT(g,t) and analytic SEs equal csdid's, pre-periods included."""
    theirs = fit_csdid(panel_frame, control_group)
    ours = fit_didmem(panel_frame, control_group)
    # Varying base: every cohort has a cell for each period but the first.
    assert len(ours) == len(COHORT_SIZES) * (N_PERIODS - 1)
    assert_tables_match(ours, theirs, "csdid")


@pytest.mark.parametrize("control_group", CONTROL_GROUPS)
def test_matches_diff_diff(panel_frame, control_group):
    """ATT(g,t) and analytic SEs equal diff-diff's, pre-periods included."""
    theirs = fit_diff_diff(panel_frame, control_group)
    ours = fit_didmem(panel_frame, control_group)
    assert_tables_match(ours, theirs, "diff-diff")


@pytest.mark.parametrize("kind", list(AGGREGATIONS))
@pytest.mark.parametrize("control_group", CONTROL_GROUPS)
def test_aggregations_match_csdid(panel_frame, control_group, kind, capsys):
    """Each aggregation's estimates and analytic SEs, and its overall value, equal csdid's."""
    fit = _csdid_fit(panel_frame, control_group)
    fit.aggte(typec=kind, bstrap=False)  # prints a summary table, captured by capsys
    theirs = fit.atte
    agg = _didmem_result(panel_frame, control_group).aggregate(kind)
    np.testing.assert_allclose(
        [agg.overall.estimate, agg.overall.std_error],
        [theirs["overall_att"], theirs["overall_se"]],
        rtol=RTOL, atol=ATOL, err_msg=f"overall {kind} aggregate differs from csdid",
    )
    key = AGGREGATIONS[kind]
    if key is None:
        return
    ours = agg.to_frame().sort_values(key, ignore_index=True)
    np.testing.assert_array_equal(ours[key].to_numpy(float), np.asarray(theirs["egt"], float))
    np.testing.assert_allclose(
        ours["estimate"], np.asarray(theirs["att_egt"], float), rtol=RTOL, atol=ATOL,
        err_msg=f"{kind} aggregate estimates differ from csdid",
    )
    np.testing.assert_allclose(
        ours["std_error"], np.asarray(theirs["se_egt"], float).ravel(), rtol=RTOL, atol=ATOL,
        err_msg=f"{kind} aggregate standard errors differ from csdid",
    )


@pytest.mark.parametrize("control_group", CONTROL_GROUPS)
def test_pretest_matches_csdid(panel_frame, control_group):
    """The Wald pre-test of parallel trends equals csdid's (R's ``W`` and ``Wpval``)."""
    fit = _csdid_fit(panel_frame, control_group)
    res = _didmem_result(panel_frame, control_group)
    # Varying base: pre-period cells t < g for t >= 2.
    n_pre = sum(g - 2 for g in COHORT_SIZES if g > 2)
    assert res.pretest.df == n_pre
    np.testing.assert_allclose(res.pretest.statistic, fit.MP["W"], rtol=RTOL)
    assert abs(res.pretest.pvalue - fit.MP["Wpval"]) <= 1e-5 + 1e-12


@pytest.mark.filterwarnings("ignore:Dropped .* units that were already treated:UserWarning")
@pytest.mark.parametrize(
    ("base_period", "anticipation"), [("universal", 0), ("varying", 1), ("universal", 1)]
)
@pytest.mark.parametrize("control_group", CONTROL_GROUPS)
def test_r_conventions_match_csdid(panel_frame, control_group, base_period, anticipation):
    """Universal base and anticipation follow R as csdid does.

    R's conventions, which csdid 0.4.3 reproduces: the universal-base reference cell is
    reported with estimate 0 and SE NaN; under anticipation ``a`` the cohort treated in the
    second period (2 <= first period + a) is dropped with a warning, and the remaining cells
    use the last period before ``g - a`` as their base. diff-diff differs on the second point:
    it keeps that cohort and reports its cells as NaN, so it is not compared here.
    """
    fit = _csdid_fit(panel_frame, control_group, base_period, anticipation)
    r = fit.results
    theirs = _table(r["group"], r["year"], r["att"], r["se"])
    if anticipation:
        with pytest.warns(didmem.DidmemWarning):
            res = _didmem_result(panel_frame, control_group, base_period, anticipation)
    else:
        res = _didmem_result(panel_frame, control_group, base_period, anticipation)
    t = res.to_frame()
    ours = _table(t["cohort"], t["time"], t["estimate"], t["std_error"])
    assert_tables_match(ours, theirs, "csdid")
    if base_period == "universal":
        ref = ours["std_error"].isna()
        assert ref.sum() == ours["cohort"].nunique()
        np.testing.assert_array_equal(ours.loc[ref, "estimate"], 0.0)
