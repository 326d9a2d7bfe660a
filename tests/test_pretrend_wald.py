"""R did's Wald pre-test in structured form (didmem.inference.pretrend.wald) against the
dense covariance it replaces, and the cases it leaves to the dense route."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.inference.pretrend import wald as pretrend_wald


def _panel(n_cohorts=30, units=40, never=120, seed=0, weights=False):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=n_cohorts, units_per_cohort=units,
                                           n_never_treated=never, seed=seed)
    if weights:
        rng = np.random.default_rng(seed)
        w = pd.Series(rng.uniform(0.5, 2.0, df["unit"].nunique()), index=df["unit"].unique())
        df["w"] = df["unit"].map(w)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                        weights="w" if weights else None)


def _dense_and_structured(panel, monkeypatch, **options):
    fit = didmem.DiDEstimator(n_bootstrap=0, **options).fit(panel)
    pre = (fit.cohorts > fit.times) & np.isfinite(fit.analytic_std_errors)
    which = np.flatnonzero(pre)
    with monkeypatch.context() as m:
        m.setattr(pretrend_wald, "STRUCTURED_MIN_CELLS", 10**9)
        dense = fit.inference.pretest(np.asarray(fit.estimates), which)
    m_cells = which.size
    structured = fit.inference.pretest(np.asarray(fit.estimates), which)
    return fit, which, dense, structured, m_cells


@pytest.mark.parametrize("weights", [False, True])
def test_structured_statistic_equals_the_dense_one(monkeypatch, weights):
    panel = _panel(weights=weights)
    fit, which, dense, structured, p = _dense_and_structured(panel, monkeypatch)
    assert p >= pretrend_wald.STRUCTURED_MIN_CELLS  # the structured route ran
    assert pretrend_wald.applies(fit.prepared, fit.cells, which, fit.inference.influence)
    assert structured[1] == dense[1] == p
    np.testing.assert_allclose(structured[0], dense[0], rtol=1e-9)
    np.testing.assert_allclose(structured[2], dense[2], rtol=1e-6, atol=1e-300)
    assert structured[3] == dense[3] == ""


@pytest.mark.parametrize("weights", [False, True])
def test_a_fit_from_moments_takes_the_structured_route(monkeypatch, weights):
    """A fit from moments alone (a parquet folder, Ray) has no paths: the blocks' Gram
    matrices come from the moments, and the statistic equals its dense LU (1e-9) and the
    in-memory fit's."""
    from didmem.estimators._moments_route import fit_moments, panel_moments

    panel = _panel(weights=weights, seed=2)
    est = didmem.DiDEstimator(n_bootstrap=0)
    fit = fit_moments(est, panel_moments(panel), outcome="y")
    influence = fit.inference.influence
    assert influence.prepared.y is None  # no unit's path
    which = np.flatnonzero((fit.cohorts > fit.times) & np.isfinite(fit.analytic_std_errors))
    assert pretrend_wald.applies(fit.prepared, fit.cells, which, influence)
    structured = fit.inference.pretest(np.asarray(fit.estimates), which)
    with monkeypatch.context() as m:
        m.setattr(pretrend_wald, "STRUCTURED_MIN_CELLS", 10**9)
        dense = fit.inference.pretest(np.asarray(fit.estimates), which)
    np.testing.assert_allclose(structured[0], dense[0], rtol=1e-9)
    np.testing.assert_allclose(structured[0], est.fit(panel).pretest.statistic, rtol=1e-9)


def test_statistic_by_hand_from_the_dense_covariance():
    panel = _panel(seed=4)
    fit = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    which = np.flatnonzero((fit.cohorts > fit.times) & np.isfinite(fit.analytic_std_errors))
    est = np.asarray(fit.estimates)[which]
    by_hand = est @ np.linalg.solve(fit.inference.covariance(which), est)
    stat = pretrend_wald.structured_wald(fit.prepared, fit.cells, fit.stats, which, est,
                                         fit.inference.influence.z_gram)
    np.testing.assert_allclose(stat, by_hand, rtol=1e-9)


def test_not_yet_treated_controls_take_the_dense_route():
    panel = _panel()
    fit = didmem.DiDEstimator(n_bootstrap=0, control_group="not_yet_treated").fit(panel)
    which = np.flatnonzero((fit.cohorts > fit.times) & np.isfinite(fit.analytic_std_errors))
    assert which.size >= pretrend_wald.STRUCTURED_MIN_CELLS
    assert not pretrend_wald.applies(fit.prepared, fit.cells, which, fit.inference.influence)


def test_a_few_cells_take_the_dense_route():
    fit = didmem.DiDEstimator(n_bootstrap=0).fit(_panel(n_cohorts=4))
    which = np.flatnonzero(fit.cohorts > fit.times)
    assert not pretrend_wald.applies(fit.prepared, fit.cells, which, fit.inference.influence)


def test_a_singular_cohort_block_is_left_to_the_dense_check(monkeypatch):
    # eight units per cohort for up to 29 pre-treatment cells: most cohort blocks are singular
    panel = _panel(units=8)
    fit = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    which = np.flatnonzero((fit.cohorts > fit.times) & np.isfinite(fit.analytic_std_errors))
    est = np.asarray(fit.estimates)[which]
    assert pretrend_wald.structured_wald(fit.prepared, fit.cells, fit.stats, which, est,
                                         fit.inference.influence.z_gram) is None


def test_a_block_whose_cholesky_fails_is_left_to_the_dense_check(monkeypatch):
    """Five units per cohort (a singular block): in a fresh clone at load 10 the smallest
    eigenvalue came out a hair above zero and ``cho_factor`` raised a LinAlgError out of
    ``render_report`` (issue 50). Whatever rounding the machine's LAPACK gives, a block that
    is singular to working precision, or that Cholesky refuses, goes to the dense route."""
    from scipy import linalg

    panel = _panel(n_cohorts=40, units=5, never=40)
    fit = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    which = np.flatnonzero((fit.cohorts > fit.times) & np.isfinite(fit.analytic_std_errors))
    est = np.asarray(fit.estimates)[which]
    gram = fit.inference.influence.z_gram
    # the rounding of that machine, forced: every eigenvalue positive, Cholesky refusing
    monkeypatch.setattr(pretrend_wald.linalg, "eigvalsh", lambda a: np.full(len(a), 1.0))

    def refuse(*args, **kwargs):
        raise linalg.LinAlgError("5-th leading minor of the array is not positive definite")

    monkeypatch.setattr(pretrend_wald.linalg, "cho_factor", refuse)
    assert pretrend_wald.structured_wald(fit.prepared, fit.cells, fit.stats, which, est,
                                         gram) is None


def test_a_nearly_singular_block_is_left_to_the_dense_check():
    """The eigenvalue check is relative to the block's scale: a smallest eigenvalue at
    rounding level (1e-17 of the largest) is no evidence that the block is positive definite."""
    panel = _panel(n_cohorts=40, units=5, never=40)
    fit = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    which = np.flatnonzero((fit.cohorts > fit.times) & np.isfinite(fit.analytic_std_errors))
    est = np.asarray(fit.estimates)[which]
    assert pretrend_wald.structured_wald(fit.prepared, fit.cells, fit.stats, which, est,
                                         fit.inference.influence.z_gram) is None
    with pytest.warns(didmem.InferenceWarning, match="covariance is singular"):
        pretest = fit.pretest  # the dense route's check, as R's: no statistic, a reason
    assert not np.isfinite(pretest.statistic) and "singular" in pretest.note


def _clustered(cluster_of_unit, n_cohorts=30):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=n_cohorts, units_per_cohort=40,
                                           n_never_treated=120, seed=0)
    df["cl"] = cluster_of_unit(df["unit"].astype("category").cat.codes)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         cluster="cl")
    fit = didmem.DiDEstimator(n_bootstrap=0, small_sample=False).fit(panel)
    which = np.flatnonzero((fit.cohorts > fit.times) & np.isfinite(fit.analytic_std_errors))
    return fit, which


def test_one_unit_per_cluster_gives_the_unclustered_statistic():
    # clusters of one unit: the cluster sums are the units' psi, so V (and W) are unchanged;
    # the clustered fit takes the dense route of cluster sums, the other the structured one
    fit, which = _clustered(lambda codes: codes)
    assert which.size >= pretrend_wald.STRUCTURED_MIN_CELLS
    assert not pretrend_wald.applies(fit.prepared, fit.cells, which, fit.inference.influence)
    plain = didmem.DiDEstimator(n_bootstrap=0, small_sample=False).fit(_panel())
    np.testing.assert_allclose(fit.pretest.statistic, plain.pretest.statistic, rtol=1e-9)
    assert fit.pretest.df == plain.pretest.df == which.size


def test_more_cells_than_clusters_is_no_statistic_with_the_reason():
    # 1,320 units in 100 clusters, 435 pre-treatment cells: V has rank at most 99
    fit, which = _clustered(lambda codes: codes % 100)
    with pytest.warns(didmem.InferenceWarning, match="435 pre-treatment cells but 100 clusters"):
        stat, df, pvalue, note = fit.inference.pretest(np.asarray(fit.estimates), which)
    assert np.isnan(stat) and np.isnan(pvalue) and df == which.size == 435
    assert "rank at most 99" in note
