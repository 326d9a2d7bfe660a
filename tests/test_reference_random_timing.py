"""Agreement with R ``staggered`` 1.2.3 (Roth & Sant'Anna's efficient estimator), at 1e-8.

Reference values: ``tests/data/reference/make_r_staggered_reference.R`` (run from the
repository root; ``README_random_timing.md`` there records R, the package, its source commit
and the command). Panels: staggered's own example data (``pj_officer_level_balanced``, all
7,785 officers x 72 months, outcome ``complaints``) and two simulated panels (never-treated
units; and no never-treated units with a cohort treated in the first period and one after
the last). Methods: ``staggered`` (plug-in efficient beta), ``staggered`` with beta = 0,
``staggered_cs`` (beta = 1, not-yet-treated controls) and ``staggered_sa`` (beta = 1, the
last cohort as control); estimands simple, cohort, calendar and eventstudy (with the full
event-study covariance), and single (g, t) cells through custom ``A_theta_list``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from didmem.inference.random_timing import weights
from didmem.inference.random_timing.design import (
    TimingDesign,
    cell_estimates,
    event_study_vcv,
    linear_estimates,
)
from didmem.inference.random_timing.fisher import fisher_test

from .conftest import reference_file

pytestmark = pytest.mark.reference

RTOL, ATOL = 1e-8, 1e-13
BETA = {"staggered": None, "staggered_beta0": 0.0, "staggered_cs": 1.0, "staggered_sa": 1.0}
BUILDERS = {"simple": weights.simple_weights, "cohort": weights.cohort_weights,
            "calendar": weights.calendar_weights}


def _paths(panel: str):
    """(times, cohorts, units x times outcomes) of a reference panel."""
    if panel == "pj":
        wide = pd.read_csv(reference_file("rt_pj_wide.csv.gz"))
        y = wide[[f"y.{t}" for t in range(1, 73)]].to_numpy(dtype=float)
        return np.arange(1.0, 73.0), wide["g"].to_numpy(dtype=float), y
    long = pd.read_csv(reference_file(f"rt_{panel}.csv"))
    wide = long.pivot(index="i", columns="t", values="y")
    cohorts = long.groupby("i")["g"].first().loc[wide.index].to_numpy(dtype=float)
    return wide.columns.to_numpy(dtype=float), cohorts, wide.to_numpy()


_DESIGNS: dict = {}


def _design(panel: str, drop_always_treated: bool) -> TimingDesign:
    key = (panel, drop_always_treated)
    if key not in _DESIGNS:
        times, cohorts, y = _paths(panel)
        if drop_always_treated:  # staggered_cs / staggered_sa drop units with g <= min(t)
            keep = cohorts > times[0]
            cohorts, y = cohorts[keep], y[keep]
        _DESIGNS[key] = TimingDesign.from_paths(times, cohorts, y)
    return _DESIGNS[key]


def _references():
    frame = pd.read_csv(reference_file("rt_estimates.csv"))
    return [(p, m, e) for (p, m, e), _ in frame.groupby(["panel", "method", "estimand"],
                                                          sort=False)]


@pytest.mark.parametrize("panel,method,estimand", _references())
def test_estimands_match_r_staggered(panel, method, estimand):
    ref = pd.read_csv(reference_file("rt_estimates.csv"))
    ref = ref[(ref.panel == panel) & (ref.method == method) & (ref.estimand == estimand)]
    design = _design(panel, method in ("staggered_cs", "staggered_sa"))
    last = method == "staggered_sa"
    if estimand == "eventstudy":
        stack = [weights.event_time_weights(design.codes, design.count, design.n_times,
                                            int(e), last) for e in ref.event_time]
        assert all(s is not None for s in stack)
        a_theta = np.stack([s[0] for s in stack])
        a_0 = np.stack([s[1] for s in stack])
    else:
        a_theta, a_0 = BUILDERS[estimand](design.codes, design.count, design.n_times, last)
    got = linear_estimates(design, a_theta, a_0, BETA[method])
    for column, value in (("estimate", got.estimate), ("se", got.std_error),
                          ("se_neyman", got.std_error_neyman)):
        np.testing.assert_allclose(value, ref[column].to_numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=f"{panel} {method} {estimand} {column}")


@pytest.mark.parametrize("panel,method", [
    (p, m) for (p, m), _ in pd.read_csv(reference_file("rt_es_vcv.csv")).groupby(
        ["panel", "method"], sort=False)])
def test_event_study_covariance_matches_r(panel, method):
    ref = pd.read_csv(reference_file("rt_es_vcv.csv"))
    ref = ref[(ref.panel == panel) & (ref.method == method)]
    events = np.unique(ref.event_time_a)
    design = _design(panel, method in ("staggered_cs", "staggered_sa"))
    stack = [weights.event_time_weights(design.codes, design.count, design.n_times, int(e),
                                        method == "staggered_sa") for e in events]
    vcv, vcv_neyman = event_study_vcv(design, np.stack([s[0] for s in stack]),
                                      np.stack([s[1] for s in stack]), BETA[method])
    k = events.size
    want = ref.sort_values(["event_time_b", "event_time_a"])
    np.testing.assert_allclose(vcv, want.vcv.to_numpy().reshape(k, k).T, rtol=RTOL,
                               atol=1e-15)
    np.testing.assert_allclose(vcv_neyman, want.vcv_neyman.to_numpy().reshape(k, k).T,
                               rtol=RTOL, atol=1e-15)


@pytest.mark.parametrize("panel", ["sim1", "sim2"])
@pytest.mark.parametrize("beta", ["efficient", "0", "1"])
def test_cells_match_r(panel, beta):
    ref = pd.read_csv(reference_file("rt_cells.csv"), dtype={"beta": str})
    ref = ref[(ref.panel == panel) & (ref.beta == beta)]
    design = _design(panel, False)
    got = cell_estimates(design, None if beta == "efficient" else float(beta))
    g = design.cohorts[got.cohort_index]
    t = design.times[got.time_index]
    mine = pd.DataFrame({"g": g, "t": t, "estimate": got.estimate, "se": got.std_error,
                         "se_neyman": got.std_error_neyman})
    merged = ref.merge(mine, on=["g", "t"], how="outer", suffixes=("_r", ""),
                       indicator=True)
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"]
    assert len(merged) == len(ref) > 10
    for column in ("estimate", "se", "se_neyman"):
        np.testing.assert_allclose(merged[column], merged[f"{column}_r"], rtol=RTOL,
                                   atol=ATOL, err_msg=f"{panel} beta={beta} {column}")


def _fisher_rows():
    frame = pd.read_csv(reference_file("rt_fisher.csv"))
    return [tuple(r) for r in frame[["panel", "method", "estimand"]].drop_duplicates()
            .itertuples(index=False)]


@pytest.mark.parametrize("panel,method,estimand", _fisher_rows())
def test_fisher_pvalues_equal_r_on_r_permutations(panel, method, estimand):
    """With R's own permutations (set.seed(s); sample(N), s = 1..500, exported by the script),
    R's two Fisher p-values (studentised by se and by se_neyman) are reproduced exactly."""
    ref = pd.read_csv(reference_file("rt_fisher.csv"))
    ref = ref[(ref.panel == panel) & (ref.method == method) & (ref.estimand == estimand)]
    perms = pd.read_csv(reference_file("rt_fisher_perms.csv"))
    perms = perms[perms.panel == panel].sort_values("seed")
    assert len(perms) == ref.num_fisher_permutations.iloc[0]
    order = np.stack([np.asarray(p.split(), dtype=np.int64) - 1 for p in perms.perm])
    times, cohorts, y = _paths(panel)
    if method == "staggered_cs":
        assert np.all(cohorts > times[0])  # nothing for staggered_cs to drop here
    beta = BETA[method]
    events = ref.event_time.to_numpy()

    def statistic(design):
        if estimand == "eventstudy":
            stack = [weights.event_time_weights(design.codes, design.count, design.n_times,
                                                int(e), False) for e in events]
            a_theta = np.stack([s[0] for s in stack])
            a_0 = np.stack([s[1] for s in stack])
        else:
            a_theta, a_0 = BUILDERS[estimand](design.codes, design.count, design.n_times,
                                              False)
        got = linear_estimates(design, a_theta, a_0, beta)
        with np.errstate(divide="ignore", invalid="ignore"):  # R divides by 0 too
            return np.r_[got.estimate / got.std_error, got.estimate / got.std_error_neyman]

    # staggered permutes its data in place, so from the second event time of a vector on
    # its permutations start from the labels that the previous event time's last
    # permutation left (the same law; replicated here to match draw for draw)
    k = len(ref)
    observed = fisher_test(times, cohorts, y, statistic, permutations=order[:0]).observed
    p_se, p_neyman = [], []
    labels = cohorts.copy()
    for j in range(k):
        test = fisher_test(times, labels, y, statistic, permutations=order)
        beyond = test.permuted > observed
        p_se.append(beyond[:, j].mean())
        p_neyman.append(beyond[:, k + j].mean())
        labels = labels[order[-1]]
    np.testing.assert_allclose(p_se, ref.fisher_pval.to_numpy(), atol=1e-12)
    np.testing.assert_allclose(p_neyman, ref.fisher_pval_se_neyman.to_numpy(), atol=1e-12)


@pytest.mark.parametrize("panel", ["sim1", "sim2"])
@pytest.mark.parametrize("last_treated", [False, True])
def test_balance_test_matches_r_balance_checks(panel, last_treated):
    from didmem.inference.random_timing.balance import balance_test

    ref = pd.read_csv(reference_file("rt_balance.csv"))
    ref = ref[(ref.panel == panel) & (ref.last_treated == last_treated)]
    got = balance_test(_design(panel, False), event_times=(0, 1, 2),
                       last_treated=last_treated)
    assert [f"all_{r}" for r in got.rows] == list(ref.estimand)
    for mine, theirs in ((got.x_hat, "Xhat"), (got.std_error, "se_Xhat"), (got.t, "t_test"),
                         (got.pvalue, "pvalue_t")):
        np.testing.assert_allclose(mine, ref[theirs].to_numpy(), rtol=RTOL, atol=ATOL)
    assert got.wald == pytest.approx(ref.Wald_test_Xhat.iloc[0], rel=RTOL)
    assert got.pvalue_wald == pytest.approx(ref.pvalue_Wald.iloc[0], rel=RTOL)
