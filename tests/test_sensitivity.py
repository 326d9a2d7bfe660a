"""didmem.sensitivity (Rambachan & Roth 2023, smoothness FLCI) and AggregateResult.vcov()."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.honest._flci import flci
from didmem.inference.linear import combination_covariance, combination_variance

from .conftest import staggered_frame


def _fit(panel, **kw):
    # R's inference (R honest_did's references; vcov's diagonal is R's analytic variance)
    return didmem.DiDEstimator(base_period="universal", n_bootstrap=0, small_sample=False,
                               **kw).fit(panel)


@pytest.fixture(scope="module")
def mpdta_event_study(mpdta_panel):
    return _fit(mpdta_panel).aggregate("dynamic")


@pytest.fixture(scope="module")
def simulated_event_study():
    """A panel whose untreated paths of the treated cohorts bend away (a known violation)."""
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=60, n_never_treated=120,
                                           n_times=8, seed=11)
    cohort = df["cohort"].to_numpy(float)
    treated = np.isfinite(cohort) & (cohort > 0)
    df = df.assign(y=df["y"] + np.where(treated, 0.02 * df["time"] ** 2, 0.0))
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    return _fit(panel).aggregate("dynamic")


@pytest.mark.parametrize("clusters", [None, 6])
def test_vcov_diagonal_is_the_variance(clusters):
    df = staggered_frame(seed=4, n_units=90, clusters=clusters)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         cluster="cl" if clusters else None)
    res = _fit(panel)
    from didmem.results.aggregations import build_aggregation

    spec = build_aggregation(res.prepared, res.cells, np.asarray(res.estimates), "dynamic")
    args = (res.prepared, res.cells, res.stats, spec.weights, spec.omega, res.influence)
    cov = combination_covariance(*args)
    np.testing.assert_allclose(np.diag(cov), combination_variance(*args), rtol=1e-10, atol=1e-16)
    assert np.allclose(cov, cov.T)
    assert np.linalg.eigvalsh(cov).min() > -1e-12
    ev = res.aggregate("dynamic")
    v = ev.vcov()
    assert v.index.name == v.columns.name == "event_time"
    assert list(v.index) == list(ev.keys) == list(v.columns)
    ok = np.isfinite(ev.std_errors)
    np.testing.assert_allclose(np.sqrt(np.diag(v))[ok], ev.std_errors[ok], rtol=1e-10)


def test_vcov_refuses_simple(mpdta_panel):
    with pytest.raises(ValueError, match="no keys"):
        _fit(mpdta_panel).aggregate("simple").vcov()


def _beta_sigma(ev):
    keep = ev.keys != -1
    return np.asarray(ev.estimates)[keep], ev.vcov().to_numpy()[np.ix_(keep, keep)], \
        int((ev.keys < -1).sum())


def _lab_event_study():
    """The lab's event study (tests/data/make_lab_event_study.py): 7 pre, 7 post periods."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).resolve().parent / "data" / "lab_event_study.json")
                      .read_text())
    return np.array(data["beta"]), np.array(data["sigma"]), data["n_pre"]


@pytest.mark.reference
@pytest.mark.parametrize("which", ["mpdta_event_study", "simulated_event_study", "lab"])
@pytest.mark.parametrize("target", ["first", "average"])
def test_flci_matches_diff_diff(which, target, request):
    honest = pytest.importorskip("diff_diff.honest_did")
    if which == "lab":
        beta, sigma, n_pre = _lab_event_study()
    else:
        beta, sigma, n_pre = _beta_sigma(request.getfixturevalue(which))
    n_post = beta.size - n_pre
    l_post = np.eye(n_post)[0] if target == "first" else np.full(n_post, 1 / n_post)
    scale = float(np.sqrt(l_post @ sigma[n_pre:, n_pre:] @ l_post))
    for m in [0.0, 0.25 * scale, scale, 4 * scale]:
        ours = flci(beta, sigma, n_pre, l_post, m, 0.05)
        theirs = honest._compute_optimal_flci(beta[:n_pre], beta[n_pre:], sigma, l_post, n_pre,
                                              n_post, m, 0.05)
        # both optimise numerically (SLSQP here, their own solver there): the end points agree
        # to 1e-3 of the original interval's half-width, the lengths to 1e-4 of it
        np.testing.assert_allclose(ours, theirs, atol=1e-3 * 1.96 * scale)
        assert ours[1] - ours[0] <= theirs[1] - theirs[0] + 1e-4 * 1.96 * scale


def test_m0_is_linear_extrapolation(simulated_event_study):
    """Under Delta^SD(0) the violation is a linear trend: the FLCI is GLS extrapolation."""
    beta, sigma, n_pre = _beta_sigma(simulated_event_study)
    n = beta.size
    t = np.concatenate([np.arange(-n_pre - 1, -1), np.arange(0, n - n_pre)]) + 1.0
    x = np.zeros((n, 1 + n - n_pre))  # slope + one effect per post period
    x[:, 0] = t
    x[n_pre:, 1:] = np.eye(n - n_pre)
    w = np.linalg.inv(sigma)
    cov = np.linalg.inv(x.T @ w @ x)
    est = cov @ x.T @ w @ beta
    half = 1.959963984540054 * np.sqrt(cov[1, 1])
    lo, hi = flci(beta, sigma, n_pre, np.eye(n - n_pre)[0], 0.0, 0.05)
    np.testing.assert_allclose([lo, hi], [est[1] - half, est[1] + half], rtol=1e-8)


def test_intervals_widen_and_breakdown(mpdta_event_study):
    ms = [0.0, 0.005, 0.01, 0.02, 0.04, 0.08]
    s = didmem.sensitivity(mpdta_event_study, restriction="smoothness", m=ms,
                           event_time={0: 0.5, 1: 0.5})
    frame = s.to_frame()
    assert list(frame.columns) == ["m", "lower", "upper", "method"]
    assert frame["method"].iloc[0] == "original" and (frame["method"].iloc[1:] == "FLCI").all()
    width = (frame["upper"] - frame["lower"]).iloc[1:].to_numpy()
    assert np.all(np.diff(width) >= -1e-9)
    b = s.breakdown
    assert 0 < b < np.inf
    beta, sigma, n_pre = _beta_sigma(mpdta_event_study)
    l_post = np.zeros(beta.size - n_pre)
    l_post[:2] = 0.5
    below = flci(beta, sigma, n_pre, l_post, b * (1 - 1e-3), 0.05)
    above = flci(beta, sigma, n_pre, l_post, b * (1 + 1e-3), 0.05)
    assert not below[0] <= 0 <= below[1]
    assert above[0] <= 0 <= above[1]


def test_tuple_input_matches_result(mpdta_event_study):
    ev = mpdta_event_study
    keep = ev.keys != -1
    beta = pd.Series(np.asarray(ev.estimates)[keep], index=ev.keys[keep])
    vcov = ev.vcov().loc[keep, keep]
    a = didmem.sensitivity((beta, vcov), restriction="smoothness", m=[0, 0.01], event_time=0)
    b = didmem.sensitivity(ev, restriction="smoothness", m=[0, 0.01], event_time=0)
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
    assert a.breakdown == pytest.approx(b.breakdown)


def test_clear_errors(mpdta_panel, mpdta_event_study):
    varying = didmem.DiDEstimator(n_bootstrap=0).fit(mpdta_panel).aggregate("dynamic")
    with pytest.raises(ValueError, match="universal base period"):
        didmem.sensitivity(varying, m=[0])
    ev = mpdta_event_study
    keep = (ev.keys != -1) & (ev.keys != -3)
    beta = pd.Series(np.asarray(ev.estimates)[keep], index=ev.keys[keep])
    with pytest.raises(ValueError, match="consecutive"):
        didmem.sensitivity((beta, ev.vcov().loc[keep, keep]), m=[0])
    with pytest.raises(ValueError, match="'restriction' parameter"):
        didmem.sensitivity(ev, restriction="smooth")
    with pytest.raises(ValueError, match="not among the post-treatment"):
        didmem.sensitivity(ev, event_time=7)
    with pytest.raises(ValueError, match="non-negative"):
        didmem.sensitivity(ev, m=[-1])


def test_plot_sensitivity(mpdta_event_study):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from didmem.results.plotting import plot_sensitivity

    s = didmem.sensitivity(mpdta_event_study, restriction="smoothness", m=[0, 0.01, 0.02])
    ax = plot_sensitivity(s)
    lines = ax.get_lines()
    # two artists per interval (bar and caps) plus the zero line
    assert len(lines) == 2 * 4 + 1
    np.testing.assert_allclose(lines[0].get_ydata(), s.original)
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "original"
    assert "breakdown" in ax.get_title()
    import matplotlib.pyplot as plt

    plt.close(ax.figure)


def test_event_times_in_training_steps_are_read_in_periods():
    """Checkpoints every 1,000 steps give event times ..., -1000, 0, 1000: the same intervals
    as event times in periods, with the target named in steps."""
    import didmem

    out = {}
    for step in (1, 1000):
        df, _ = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=60,
                                               n_never_treated=200, time_step=step, seed=3)
        panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
        ev = didmem.DiDEstimator(base_period="universal", n_bootstrap=0).fit(panel)
        ev = ev.aggregate("dynamic")
        out[step] = didmem.sensitivity(ev, restriction="smoothness", m=[0.0, 0.05],
                                       event_time=step).to_frame()
    pd.testing.assert_frame_equal(out[1], out[1000], rtol=1e-9)
    with pytest.raises(didmem.errors.ParameterError, match="not among the post-treatment"):
        didmem.sensitivity(ev, restriction="smoothness", m=[0.0], event_time=1)
