"""MembershipInferenceEstimator and its AUC with DeLong's variance.

The AUC and the variance are checked against values written by tools didmem does not use
(scikit-learn's roc_auc_score, the ``confidenceinterval`` package's DeLong variance; see
tests/data/reference/make_membership_auc_reference.py for the command), against Hanley &
McNeil's (1982) published example, and by a Monte Carlo of the interval's coverage on two
data-generating processes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem import (DifferenceEstimator, EstimationError, MembershipInferenceEstimator, Panel,
                    ParameterError)
from didmem.estimators._auc import auc_interval, delong_auc, delong_df, newcombe_variance

REFERENCE = json.loads((Path(__file__).parent / "data" / "reference"
                        / "membership_auc_delong.json").read_text())


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=lambda c: c["name"])
def test_auc_and_delong_variance_match_reference_packages(case):
    auc, var = delong_auc(case["positives"], case["negatives"])
    assert auc == pytest.approx(case["auc_sklearn"], rel=1e-12, abs=1e-14)
    # the package keeps midranks and placement values in float32 (its delong.py), so it
    # agrees to float32's precision only
    assert auc == pytest.approx(case["auc_delong_package"], rel=1e-6)
    assert var == pytest.approx(case["variance_delong_package"], rel=1e-5)


def test_hanley_mcneil_published_area():
    """Hanley & McNeil (1982), Table I: ratings 1-5 of 58 normal and 51 abnormal images;
    they report an area of 0.893 (and a standard error of 0.032 by their approximation,
    which DeLong's estimate is close to but need not equal)."""
    abnormal = np.repeat([1, 2, 3, 4, 5], [3, 2, 2, 11, 33])
    normal = np.repeat([1, 2, 3, 4, 5], [33, 6, 6, 11, 2])
    auc, var = delong_auc(abnormal, normal)
    assert round(auc, 3) == 0.893
    assert abs(np.sqrt(var) - 0.032) < 0.003


def test_auc_swaps_and_edges():
    rng = np.random.default_rng(3)
    x, y = rng.normal(1, 1, 30), rng.normal(0, 1, 20)
    a, v = delong_auc(x, y)
    b, w = delong_auc(y, x)
    assert a + b == pytest.approx(1.0, abs=1e-14) and v == pytest.approx(w, rel=1e-12)
    assert delong_auc([1.0, 2.0], [0.0, -1.0])[0] == 1.0
    assert delong_auc([1.0], [0.0, 2.0]) == (0.5, pytest.approx(np.nan, nan_ok=True))
    assert np.isnan(delong_auc([], [1.0])[0])


@pytest.mark.parametrize("dgp", ["normal", "exponential_ties"])
def test_delong_interval_coverage_monte_carlo(dgp):
    """400 replications per DGP: the 95% interval's coverage within 3 Monte Carlo standard
    errors (about 0.033) of 0.95. The true AUC: normal N(0.8, 1) vs N(0, 1) is
    Phi(0.8 / sqrt 2); rounded exponentials by a 200,000-draw Monte Carlo of P(X > Y) +
    P(X = Y) / 2 (MC error about 0.001)."""
    from scipy.stats import norm

    rng = np.random.default_rng(11)
    if dgp == "normal":
        def draw(n, m):
            return rng.normal(0.8, 1, n), rng.normal(0, 1, m)
        truth = norm.cdf(0.8 / np.sqrt(2))
    else:
        def draw(n, m):
            return np.round(rng.exponential(1.6, n)), np.round(rng.exponential(1.0, m))
        big_x, big_y = draw(200_000, 200_000)
        truth = np.mean(big_x > big_y) + 0.5 * np.mean(big_x == big_y)
    reps, covered = 400, 0
    for _ in range(reps):
        auc, var = delong_auc(*draw(60, 80))
        covered += abs(auc - truth) <= 1.959964 * np.sqrt(var)
    mc_se = np.sqrt(0.95 * 0.05 / reps)
    assert abs(covered / reps - 0.95) < 3 * mc_se


def _newcombe_roots(auc, m, n, z):
    """The interval's ends by hand: the real roots in [0, 1] of Newcombe's (2006) quartic,
    (auc - t)^2 m n (2 - t)(1 + t) = z^2 t (1 - t) [(2 - t)(1 + t) + N (1 - t)(1 + t)
    + N t (2 - t)] with N = (m + n) / 2 - 1, expanded with numpy's polynomial algebra (an
    independent path from the interval's root search)."""
    P = np.polynomial.Polynomial
    t = P([0.0, 1.0])
    size = (m + n) / 2 - 1
    left = (auc - t) ** 2 * m * n * (2 - t) * (1 + t)
    right = z ** 2 * t * (1 - t) * ((2 - t) * (1 + t) + size * (1 - t) * (1 + t)
                                    + size * t * (2 - t))
    roots = (left - right).roots()
    real = np.sort(roots[np.abs(roots.imag) < 1e-9].real)
    return real[(real >= -1e-12) & (real <= 1 + 1e-12)]


@pytest.mark.parametrize("auc, m, n", [(0.8, 10, 30), (0.97, 25, 25), (0.5, 12, 7),
                                       (1.0, 10, 30), (0.0, 30, 100)])
def test_auc_interval_is_newcombes_score_interval_by_hand(auc, m, n):
    z = 1.959963984540054
    lower, upper = auc_interval(auc, m, n, z)
    roots = _newcombe_roots(auc, m, n, z)
    # the quartic also has roots at 0 and 1 (where V is 0; double at an AUC of 0 or 1)
    inner = roots[(roots > 1e-6) & (roots < 1 - 1e-6)]
    want_lower = 0.0 if auc == 0 else inner[inner < auc].max()
    want_upper = 1.0 if auc == 1 else inner[inner > auc].min()
    assert lower == pytest.approx(want_lower, abs=1e-9)
    assert upper == pytest.approx(want_upper, abs=1e-9)
    # the ends are where the variance at the end puts them
    for end in (lower, upper):
        if 0 < end < 1:
            assert (auc - end) ** 2 == pytest.approx(
                z ** 2 * newcombe_variance(end, m, n), rel=1e-8)


def test_auc_interval_properties():
    z = 1.959963984540054
    rng = np.random.default_rng(5)
    x, y = rng.normal(1.5, 1, 10), rng.normal(0, 1, 30)
    auc, var = delong_auc(x, y)
    base = auc_interval(auc, 10, 30, z, variance=var)
    # a monotone transform of the scores changes neither the AUC nor the interval
    auc2, var2 = delong_auc(np.exp(3 * x) - 7, np.exp(3 * y) - 7)
    assert auc_interval(auc2, 10, 30, z, variance=var2) == pytest.approx(base, abs=1e-12)
    # inside (0, 1) strictly, around the estimate; symmetric in the two samples
    assert 0 < base[0] < auc < base[1] < 1
    flipped = auc_interval(1 - auc, 10, 30, z, variance=var)
    assert flipped == pytest.approx((1 - base[1], 1 - base[0]), abs=1e-9)
    # at an AUC of 1 (DeLong's variance 0) neither empty nor of zero width
    lower, upper = auc_interval(1.0, 10, 30, z, variance=0.0)
    assert upper == 1.0 and 0.5 < lower < 0.95
    # DeLong's variance only ever widens it
    wide = auc_interval(auc, 10, 30, z, variance=4 * newcombe_variance(auc, 10, 30))
    assert wide[0] < base[0] and wide[1] > base[1]
    assert wide == pytest.approx(auc_interval(auc, 10, 30, 2 * z), abs=1e-9)
    # with its degrees of freedom, DeLong's variance counts at the t quantile: (t/z)^2 more
    from scipy.stats import t as student_t

    df = delong_df(x, y)
    assert 9 <= df <= 38
    scale = (student_t.ppf(0.975, df) / z) ** 2
    assert auc_interval(auc, 10, 30, z, variance=4 * newcombe_variance(auc, 10, 30), df=df) \
        == pytest.approx(auc_interval(auc, 10, 30, z * np.sqrt(4 * scale)), abs=1e-9)
    # Welch-Satterthwaite by hand from the placement values' two variances
    m, n = 10, 30
    v10 = np.array([np.mean((xi > y) + 0.5 * (xi == y)) for xi in x])
    v01 = np.array([np.mean((x > yj) + 0.5 * (x == yj)) for yj in y])
    a, b = v10.var(ddof=1) / m, v01.var(ddof=1) / n
    assert a + b == pytest.approx(var, rel=1e-12)
    assert df == pytest.approx((a + b) ** 2 / (a ** 2 / (m - 1) + b ** 2 / (n - 1)), rel=1e-12)
    assert np.isnan(auc_interval(float("nan"), 10, 30, z)).all()


def test_membership_interval_covers_with_few_instances_and_auc_near_one():
    """400 replications of 10 members N(d, 1) against 30 non-members N(0, 1) at a true AUC
    of 0.97 (d = sqrt 2 Phi^-1(0.97)): DeLong's Wald interval covered 0.81 here (issue
    50); the score interval's coverage is at least 0.93 (2 Monte Carlo standard errors,
    0.022, below its measured 0.983; benchmarks/auc_coverage.py has the full grid)."""
    from scipy.stats import norm

    z = 1.959963984540054
    d = np.sqrt(2) * norm.ppf(0.97)
    rng = np.random.default_rng(50)
    reps, covered, wald = 400, 0, 0
    for _ in range(reps):
        x, y = rng.normal(d, 1, 10), rng.normal(0, 1, 30)
        auc, var = delong_auc(x, y)
        lower, upper = auc_interval(auc, 10, 30, z, variance=var, df=delong_df(x, y))
        covered += lower <= 0.97 <= upper
        wald += abs(auc - 0.97) <= z * np.sqrt(var)
    assert covered / reps >= 0.93
    assert wald / reps < 0.88  # the old interval under-covers on these draws


def _panel(shift: float = 0.0, effect: float = 1.0, seed: int = 0) -> Panel:
    """Cohorts 2 and 3 (20 units each) and 40 validation units over times 1-4; the score of
    a trained unit rises by ``effect`` from its cohort on; validation units score ``shift``
    lower at every time (a distribution shift)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(80):
        cohort = 2.0 if i < 20 else 3.0 if i < 40 else np.nan
        level = rng.normal() - (shift if np.isnan(cohort) else 0.0)
        for t in (1, 2, 3, 4):
            y = level + 0.3 * t + rng.normal(0, 0.3) + (effect if t >= cohort else 0.0)
            rows.append((i, t, cohort, y, -y))
    df = pd.DataFrame(rows, columns=["unit", "time", "cohort", "score", "loss"])
    return Panel(df, unit="unit", time="time", cohort="cohort", outcome=["score", "loss"])


def test_auc_per_checkpoint_uses_the_trained_members():
    panel = _panel()
    y = panel.outcome_matrix("score")
    cohorts = panel.cohorts
    result = MembershipInferenceEstimator(score="score").fit(panel)
    auc = result.extra["auc"].set_index("time")
    assert np.isnan(auc.loc[1.0, "auc"]) and auc.loc[1.0, "n_members"] == 0
    for j, c in enumerate(panel.times):
        members = y[cohorts <= c, j]
        if members.size:
            want, var = delong_auc(members, y[np.isinf(cohorts), j])
            assert auc.loc[c, "auc"] == pytest.approx(want, rel=1e-12)
            assert auc.loc[c, "std_error"] == pytest.approx(np.sqrt(var), rel=1e-12)
            assert auc.loc[c, "n_members"] == members.size
    every = MembershipInferenceEstimator(score="score", members="all").fit(panel).extra["auc"]
    assert (every["n_members"] == 40).all()
    cell = result.extra["cell_auc"].set_index(["cohort", "time"])
    want, _ = delong_auc(y[cohorts == 3.0, 3], y[np.isinf(cohorts), 3])
    assert cell.loc[(3.0, 4.0), "auc"] == pytest.approx(want, rel=1e-12)
    lo, hi = auc["ci_lower"].dropna(), auc["ci_upper"].dropna()
    assert ((lo >= 0) & (hi <= 1) & (lo <= auc["auc"].dropna())).all()
    for c in panel.times[1:]:
        row = auc.loc[c]
        members = y[cohorts <= c, list(panel.times).index(c)]
        outside = y[np.isinf(cohorts), list(panel.times).index(c)]
        want = auc_interval(row["auc"], int(row["n_members"]), int(row["n_nonmembers"]),
                            1.959963984540054, variance=row["std_error"] ** 2,
                            df=delong_df(members, outside))
        assert (row["ci_lower"], row["ci_upper"]) == pytest.approx(want, rel=1e-9)


def test_profile_equals_the_difference_estimator_and_orientation_flips():
    panel = _panel(shift=0.5)
    mia = MembershipInferenceEstimator(score="score").fit(panel).to_frame()
    diff = DifferenceEstimator(outcome="score", n_bootstrap=0).fit(panel).to_frame()
    merged = mia.merge(diff, on=["cohort", "time"], suffixes=("", "_diff"))
    assert len(merged) == len(mia) == 8
    np.testing.assert_allclose(merged["estimate"], merged["estimate_diff"], rtol=1e-10,
                               atol=1e-12)
    # Welch: both means' sampling variances
    y, cohorts = panel.outcome_matrix("score"), panel.cohorts
    mine, other = y[cohorts == 2.0, 2], y[np.isinf(cohorts), 2]
    row = mia[(mia["cohort"] == 2.0) & (mia["time"] == 3.0)].iloc[0]
    assert row["std_error"] == pytest.approx(
        np.sqrt(mine.var(ddof=1) / 20 + other.var(ddof=1) / 40), rel=1e-12)
    # a loss (lower = member) negated gives the same AUCs and profile as the score
    loss = MembershipInferenceEstimator(score="loss", lower_is_better=True).fit(panel)
    np.testing.assert_allclose(loss.to_frame()["estimate"], mia["estimate"], rtol=1e-12)
    raw = MembershipInferenceEstimator(score="loss").fit(panel).extra["auc"]["auc"].dropna()
    np.testing.assert_allclose(raw, 1 - loss.extra["auc"]["auc"].dropna(), rtol=1e-12)


def test_shift_raises_auc_before_any_training():
    """The positive control in miniature: validation drawn lower (by one sd of the levels)
    makes trained and not-yet-trained instances alike look like members, with no effect at
    all (expected AUC Phi(1 / sqrt(2 * 1.09)) = 0.75 with the noise; the same draws without
    the shift give a lower AUC at every time, since only the non-members move down)."""
    plain = MembershipInferenceEstimator(score="score", members="all")
    no_shift = plain.fit(_panel(shift=0.0, effect=0.0, seed=4)).extra["auc"]
    shifted = plain.fit(_panel(shift=1.0, effect=0.0, seed=4)).extra["auc"]
    assert (shifted["auc"] > no_shift["auc"]).all()
    assert (shifted["ci_lower"] > 0.55).all()


def test_compare_sets_it_beside_the_others_against_a_truth():
    panel = _panel()
    truth = pd.DataFrame({"cohort": [2.0, 2.0, 2.0, 3.0, 3.0], "time": [2.0, 3.0, 4.0, 3.0, 4.0],
                          "tau": 1.0})
    table = didmem.compare({
        "mia": MembershipInferenceEstimator(score="score").fit(panel),
        "did": didmem.DiDEstimator(outcome="score", n_bootstrap=0).fit(panel),
    }, truth=truth)
    assert list(table["estimator"]) == ["mia", "did"] and (table["n_cells"] == 5).all()
    assert abs(table.set_index("estimator").loc["did", "bias"]) < 0.3


def test_bad_input_gets_clear_errors():
    panel = _panel()
    with pytest.raises(ParameterError, match="'members' parameter of "
                                             "MembershipInferenceEstimator must be one of"):
        MembershipInferenceEstimator(score="score", members="final").fit(panel)
    with pytest.raises(ParameterError, match="outcome"):
        MembershipInferenceEstimator().fit(panel)  # two outcomes: name one
    df = pd.DataFrame({"unit": [1, 1, 2, 2], "time": [1, 2] * 2, "cohort": [2, 2, None, None],
                       "s": [0.0, np.inf, 1.0, 2.0]})
    with pytest.raises(didmem.PanelError, match=r"'s' has 1 NaN or infinite"):  # min-k%++ inf
        Panel(df, unit="unit", time="time", cohort="cohort", outcome="s")
    only = pd.DataFrame({"unit": [1, 1], "time": [1, 2], "cohort": [2, 2], "s": [0.0, 1.0]})
    with pytest.raises(EstimationError, match="non-members"):
        MembershipInferenceEstimator().fit(Panel(only, unit="unit", time="time",
                                                 cohort="cohort", outcome="s"))
