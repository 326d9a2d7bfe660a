"""Panels of several training runs and the three estimands across them (issue 38).

The within-instance comparison is checked against a plain loop over (run, instance) pairs
written here with instance weights, whose derivative in an instance's weight is that
instance's influence function (the estimator is a ratio of instance sums); the pooled
profile against its formulas on constructed runs; each run's profile against
DiDEstimator on that run's panel.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem import EstimationError, PanelError, ParameterError
from didmem.inference.bands import simultaneous_band
from didmem.inference.runs.pooled import RunCells, pooled_band, pooled_cells
from didmem.inference.runs.within import WithinInfluence, within_cells


def _frame(n_runs=3, seed=0, **options):
    base = dict(n_cohorts=3, units_per_cohort=15, n_never_treated=20, n_times=5)
    return didmem.datasets.simulate_runs(n_runs=n_runs, seed=seed, **{**base, **options})


def _panel(frame, **options):
    return didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y",
                        run="run", **options)


@pytest.fixture(scope="module")
def fitted():
    frame, truth = _frame(path_sd=1.0, run_shift_sd=0.1)
    panel = _panel(frame)
    return panel, didmem.RunsEstimator(n_bootstrap=199, seed=3).fit(panel)


# ---------------------------------------------------------------------------- the panel
def test_panel_of_runs_holds_one_checked_panel_per_run():
    frame, _ = _frame()
    panel = _panel(frame)
    assert panel.n_runs == 3 and list(panel.runs) == [0, 1, 2]
    one = panel.run_panel(1)
    assert one.run_column is None and one.n_runs == 1
    rows = frame[frame["run"] == 1]
    alone = didmem.Panel(rows, unit="unit", time="time", cohort="cohort", outcome="y")
    np.testing.assert_array_equal(one.outcome_matrix(), alone.outcome_matrix())
    np.testing.assert_array_equal(one.cohorts, alone.cohorts)
    # the cohorts differ by run (each run's order), the instances and checkpoints do not
    assert not np.array_equal(panel.run_panel(0).cohorts, panel.run_panel(1).cohorts)
    back = _panel(panel.to_frame())
    np.testing.assert_array_equal(back.run_panel(2).outcome_matrix(),
                                  panel.run_panel(2).outcome_matrix())
    assert "3 runs" in repr(panel)


def test_single_run_panel_is_untouched():
    frame, _ = _frame()
    panel = didmem.Panel(frame[frame["run"] == 0], unit="unit", time="time", cohort="cohort",
                         outcome="y")
    assert panel.run_column is None and panel.n_runs == 1
    with pytest.raises(AttributeError):
        panel.no_such_attribute
    with pytest.raises(ParameterError, match="no run column"):
        panel.run_panel(0)


def test_run_missing_a_checkpoint_or_an_instance_is_an_error_naming_both():
    frame, _ = _frame()
    late = frame[~((frame["run"] == 2) & (frame["time"] == frame["time"].max()))]
    with pytest.raises(PanelError, match=r"Run 2 lacks 1 checkpoint\(s\) that run 0 has "
                                         r"\('time' = 4"):
        _panel(late)
    gone = frame[~((frame["run"] == 1) & (frame["unit"].isin([3, 7])))]
    with pytest.raises(PanelError, match=r"Run 1 lacks 2 instance\(s\) that run 0 has "
                                         r"\('unit' = 3, 7\)"):
        _panel(gone)
    extra = pd.concat([frame, frame[(frame["run"] == 2) & (frame["unit"] == 0)].assign(
        unit=999)])
    with pytest.raises(PanelError, match=r"Run 0 lacks 1 instance\(s\) that run 2 has "
                                         r"\('unit' = 999\)"):
        _panel(extra)


def test_panel_of_runs_refuses_bad_run_columns_and_single_run_views():
    frame, _ = _frame()
    with pytest.raises(PanelError, match="missing values"):
        _panel(frame.assign(run=frame["run"].where(frame.index != 5)))
    with pytest.raises(PanelError, match="also used for another role"):
        didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y",
                     run="unit")
    with pytest.raises(PanelError, match="run"):
        didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y",
                     run="seed")
    with pytest.raises(PanelError, match="needs unit="):
        didmem.Panel(frame, unit=None, time="time", cohort="cohort", outcome="y", run="run")
    duplicated = pd.concat([frame, frame[frame["run"] == 1].head(1)])
    with pytest.raises(PanelError, match=r"^Run 1 \(column 'run'\): "):
        _panel(duplicated)
    panel = _panel(frame)
    with pytest.raises(PanelError, match=r"Panel.cohorts: this panel holds 3 runs"):
        panel.cohorts
    with pytest.raises(PanelError, match="run_panel"):
        panel.outcome_matrix()
    with pytest.raises(PanelError, match="Panel.has_holes: this panel holds 3 runs"):
        panel.has_holes
    assert not hasattr(panel, "cohorts")  # also an AttributeError: hasattr reads it as absent
    import pickle

    again = pickle.loads(pickle.dumps(panel))
    np.testing.assert_array_equal(again.run_panel(0).cohorts, panel.run_panel(0).cohorts)
    with pytest.raises(ParameterError, match="DiDEstimator.fit got a panel of 3 runs"):
        didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    with pytest.raises(ParameterError, match="Unknown run 7"):
        panel.run_panel(7)


# ---------------------------------------------------------------------------- within
def _within_oracle(y, cohorts, times, g, t, b, weights, centre):
    """The within-instance estimate of one cell by a loop over pairs, with instance
    weights (the validation means weighted too)."""
    n_runs, n_units, _ = y.shape
    coh = np.where(np.isnan(cohorts), np.inf, cohorts)
    if centre:
        val = np.all(np.isinf(coh), axis=0)
        w = weights * val
        m = np.einsum("j,rjt->rt", w, y) / w.sum()
        y = y - m[:, None, :]
    thr = max(times[t], times[b])
    num = den = 0.0
    for i in range(n_units):
        for r in range(n_runs):
            if coh[r, i] != g:
                continue
            controls = [s for s in range(n_runs) if s != r and coh[s, i] > thr]
            if not controls:
                continue
            d = y[r, i, t] - y[r, i, b]
            c = np.mean([y[s, i, t] - y[s, i, b] for s in controls])
            num += weights[i] * (d - c)
            den += weights[i]
    return num / den if den else np.nan


@pytest.mark.parametrize("run_trends", ["never_treated", "none"])
def test_within_estimates_and_influence_match_a_loop_over_pairs(run_trends):
    rng = np.random.default_rng(5)
    n_runs, n_units, times = 3, 14, np.arange(5.0)
    cohorts = rng.choice([1.0, 2.0, 3.0, np.nan], size=(n_runs, n_units))
    cohorts[:, -4:] = np.nan  # validation instances: no run trains them
    y = rng.normal(size=(n_runs, n_units, times.size))
    cells = within_cells(y, np.where(np.isnan(cohorts), np.inf, cohorts), times,
                         run_trends=run_trends)
    centre = run_trends == "never_treated"
    ones = np.ones(n_units)
    eps = 1e-6
    checked = 0
    for j, (g, c, b) in enumerate(zip(cells.cohort, cells.time, cells.base_time)):
        t, bi = int(c), int(b)
        want = _within_oracle(y, cohorts, times, g, t, bi, ones, centre)
        if np.isnan(want):
            assert np.isnan(cells.estimate[j]) and cells.n_pairs[j] == 0
            continue
        np.testing.assert_allclose(cells.estimate[j], want, rtol=1e-10, atol=1e-12)
        for i in range(n_units):  # d tau / d w_i = psi_i (with the weights summing to n)
            w = ones.copy()
            w[i] += eps
            slope = (_within_oracle(y, cohorts, times, g, t, bi, w, centre) - want) / eps
            np.testing.assert_allclose(cells.psi[i, j], slope, rtol=1e-4, atol=1e-7)
        checked += 1
    assert checked >= 6
    assert np.allclose(cells.psi.sum(axis=0), 0.0, atol=1e-12)


def test_within_removes_a_run_shift_only_with_run_trends():
    frame, _ = _frame(n_runs=3, path_sd=0.5, run_shift_sd=0.0, seed=2)
    panel = _panel(frame)
    y = np.stack([panel.run_panel(r).outcome_matrix() for r in panel.runs])
    cohorts = np.stack([panel.run_panel(r).cohorts for r in panel.runs])
    shift = np.random.default_rng(0).normal(size=(3, 1, panel.n_times))
    plain = within_cells(y, cohorts, panel.times)
    shifted = within_cells(y + shift, cohorts, panel.times)
    np.testing.assert_allclose(shifted.estimate, plain.estimate, atol=1e-12)
    np.testing.assert_allclose(shifted.psi, plain.psi, atol=1e-12)
    raw = within_cells(y, cohorts, panel.times, run_trends="none")
    raw_shifted = within_cells(y + shift, cohorts, panel.times, run_trends="none")
    live = np.isfinite(raw.estimate) & (raw.n_pairs > 0)
    assert np.max(np.abs(raw_shifted.estimate - raw.estimate)[live]) > 0.05


def test_within_needs_validation_instances_for_run_trends():
    frame, _ = _frame(n_never_treated=0)
    panel = _panel(frame)
    with pytest.raises(EstimationError, match="run_trends='none'"):
        didmem.RunsEstimator(n_bootstrap=0, control_group="not_yet_treated").fit(panel)


# ---------------------------------------------------------------------------- pooled
def _run_cells(estimate, psi):
    c = estimate.size
    return RunCells(cohort=np.ones(c), time=np.arange(c, dtype=float) + 1,
                    base_time=np.zeros(c), estimate=estimate, psi=psi,
                    live=np.ones(c, dtype=bool))


def test_pooled_variance_is_spread_over_r_plus_shared_instance_part():
    rng = np.random.default_rng(1)
    n, c, r = 40, 3, 4
    common = rng.normal(size=(n, c)) * 0.05
    runs = [_run_cells(rng.normal(size=c), common + 0.02 * rng.normal(size=(n, c)))
            for _ in range(r)]
    pooled = pooled_cells(runs)
    est = np.stack([x.estimate for x in runs])
    np.testing.assert_allclose(pooled.estimate, est.mean(axis=0))
    spread = np.cov(est, rowvar=False)
    own = sum(a.psi.T @ a.psi for a in runs)
    cross = sum(a.psi.T @ b.psi for a in runs for b in runs if a is not b) / (r * (r - 1))
    psi_bar = sum(x.psi for x in runs) / r
    np.testing.assert_allclose(pooled.instance_covariance, psi_bar.T @ psi_bar, rtol=1e-10)
    # the shared part is the runs' cross-covariance, the run-specific part the rest of a
    # run's own instance variance; together they make up the instance part
    np.testing.assert_allclose(pooled.shared_covariance, cross, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(pooled.specific_covariance, own / r - cross, rtol=1e-10,
                               atol=1e-15)
    assert np.linalg.eigvalsh(pooled.specific_covariance).min() > -1e-15
    np.testing.assert_allclose(pooled.shared_covariance + pooled.specific_covariance / r,
                               pooled.instance_covariance, rtol=1e-10)
    np.testing.assert_allclose(pooled.spread, spread, rtol=1e-10)
    # the run estimates spread far more than their instance error: nothing is truncated, and
    # each cell's variance is the spread over R plus the instance part shared by the runs
    assert np.all(pooled.between_variance > 0)
    np.testing.assert_allclose(np.diag(pooled.covariance), np.diag(spread / r + cross),
                               rtol=1e-10)
    # the between-run part is independent across cells (its rank-(R-1) estimate is not used)
    off = ~np.eye(c, dtype=bool)
    np.testing.assert_allclose(pooled.covariance[off], pooled.instance_covariance[off])
    v, run_part = np.diag(pooled.covariance), np.diag(spread) / r
    np.testing.assert_allclose(pooled.df, (r - 1) * (v / run_part) ** 2)
    assert np.all(pooled.df >= r - 1)


def test_pooled_identical_runs_have_no_between_variance():
    rng = np.random.default_rng(2)
    psi = rng.normal(size=(30, 4)) * 0.1
    run = _run_cells(rng.normal(size=4), psi)
    pooled = pooled_cells([run, run, run])
    np.testing.assert_allclose(pooled.between_variance, 0.0, atol=1e-14)
    np.testing.assert_allclose(pooled.covariance, psi.T @ psi, rtol=1e-10)
    np.testing.assert_allclose(pooled.specific_covariance, 0.0, atol=1e-14)
    assert np.all(np.isinf(pooled.df) | (pooled.df >= 1e6))
    with pytest.raises(EstimationError, match="at least 2 runs"):
        pooled_cells([run])


def test_pooled_band_of_identical_runs_is_the_run_band():
    """R copies of one run: nothing varies between them, so the pooled band is that run's
    Gaussian band (the same standard errors; the critical value up to the draws' error,
    about 0.012 with 20000 draws each: 2.513-2.529 and 2.495-2.535 over four seeds)."""
    rng = np.random.default_rng(4)
    psi = rng.normal(size=(60, 5)) * 0.1 + rng.normal(size=(60, 1)) * 0.1
    run = _run_cells(rng.normal(size=5), psi)
    pooled = pooled_cells([run] * 4)
    options = dict(alpha=0.05, n_draws=20_000, simultaneous=True)
    band = pooled_band(pooled, rng=np.random.default_rng(5), **options)
    se = np.sqrt(np.einsum("ij,ij->j", psi, psi))
    draws = np.random.default_rng(6).normal(size=(20_000, 60)) @ psi  # the run's own band
    alone, _ = simultaneous_band(draws, se, 0.05, np.sqrt(60), at_least_normal=False)
    np.testing.assert_allclose(band.std_errors, se, rtol=1e-10)
    assert band.rule == "simultaneous"
    assert band.critical_value == pytest.approx(alone, abs=0.06)
    assert band.critical_value > 1.96 + 0.3  # a simultaneous value, not the pointwise one
    np.testing.assert_allclose(band.critical_values, band.critical_value)


def test_pooled_band_without_shared_instances_is_the_t_interval():
    """Runs on disjoint instances with a large spread: nothing shared, the run-specific part
    is all of the variance and it rests on R - 1 degrees of freedom, so each cell's pointwise
    value is Student's t_{R-1} quantile (3.182 for R = 4; the draws' error about 0.04); and
    without draws, the t quantile with Satterthwaite's df (here R - 1)."""
    rng = np.random.default_rng(7)
    r, n = 4, 20
    runs = []
    for k in range(r):
        psi = np.zeros((r * n, 2))
        psi[k * n:(k + 1) * n] = rng.normal(size=(n, 2)) * 1e-4
        runs.append(_run_cells(rng.normal(size=2) * 3.0, psi))
    pooled = pooled_cells(runs)
    np.testing.assert_allclose(pooled.shared_covariance, 0.0, atol=1e-15)
    band = pooled_band(pooled, alpha=0.05, n_draws=20_000, rng=np.random.default_rng(8),
                       simultaneous=False)
    assert band.rule == "pointwise"
    np.testing.assert_allclose(band.critical_values, 3.182, atol=0.15)
    analytic = pooled_band(pooled, alpha=0.05, n_draws=0, rng=None, simultaneous=True)
    np.testing.assert_allclose(analytic.critical_values, 3.182, atol=0.01)


def test_pooled_variance_and_band_in_a_small_gaussian_monte_carlo():
    """300 draws of R = 4 runs on the same 50 instances: tau_r = b_r + mean_i (x_i + e_ri),
    with x_i shared by the runs (variance 1), e_ri each run's own (variance 1) and run
    effects b_r (variance 0.02), so Var(tau_bar) = 1/n + 1/(nR) + 0.02/R = 0.03. The
    untruncated variance ``S / R + C`` is unbiased for it (mean within 4 Monte Carlo standard
    errors), the reported one (floored at the run-specific instance part) is not below it,
    and the pooled pointwise 95% interval covers 0 in 0.90-0.99 of the draws (its Monte
    Carlo error is 0.013)."""
    rng = np.random.default_rng(11)
    r, n, sb2, reps = 4, 50, 0.02, 300
    truth = 1 / n + 1 / (n * r) + sb2 / r
    unbiased, reported, covered = [], [], []
    for _ in range(reps):
        x = rng.normal(size=n)
        runs = []
        for _ in range(r):
            y = x + rng.normal(size=n)
            runs.append(_run_cells(np.array([rng.normal() * np.sqrt(sb2) + y.mean()]),
                                   ((y - y.mean()) / n)[:, None]))
        pooled = pooled_cells(runs)
        unbiased.append(pooled.spread[0, 0] / r + pooled.shared_covariance[0, 0])
        reported.append(pooled.covariance[0, 0])
        band = pooled_band(pooled, alpha=0.05, n_draws=199, rng=rng, simultaneous=False)
        covered.append(abs(pooled.estimate[0]) <= band.critical_values[0] * band.std_errors[0])
    unbiased, reported = np.array(unbiased), np.array(reported)
    assert abs(unbiased.mean() - truth) < 4 * unbiased.std() / np.sqrt(reps)
    assert np.all(reported >= unbiased - 1e-15)
    assert 0.90 <= np.mean(covered) <= 0.99


# ---------------------------------------------------------------------------- within: the shared inference
def _within_of(fitted_panel, **options):
    panel = fitted_panel
    y = np.stack([panel.run_panel(r).outcome_matrix() for r in panel.runs])
    cohorts = np.stack([panel.run_panel(r).cohorts for r in panel.runs])
    return within_cells(y, cohorts, panel.times, **options)


def test_within_influence_is_a_cell_influence_with_two_welch_groups(fitted):
    """The within-instance cells as a route of the shared inference: variances
    ``sum_i psi_i**2``, Welch's correction with the paired instances and the validation
    instances as its two groups, and the bootstrap draws ``U psi``."""
    from didmem.inference.cell_inference import CellInference, InferenceSettings
    from didmem.inference.influence import CellInfluence
    from didmem.inference.small_sample import block_welch

    panel, _ = fitted
    within = _within_of(panel)
    influence = WithinInfluence.build(within, panel.times)
    assert isinstance(influence, CellInfluence)
    psi = within.psi
    np.testing.assert_allclose(influence.variance(), (psi ** 2).sum(axis=0), rtol=1e-12)
    val = within.validation
    cohorts = np.stack([panel.run_panel(r).cohorts for r in panel.runs])
    never = np.isinf(cohorts) | (cohorts > panel.times[-1])
    np.testing.assert_array_equal(val, np.all(never, axis=0))
    assert 2 <= val.sum() < val.size
    parts, counts = influence.welch_groups()
    np.testing.assert_allclose(parts[1], (psi[val] ** 2).sum(axis=0), rtol=1e-12, atol=1e-18)
    np.testing.assert_array_equal(counts[0], within.n_instances)
    settings = InferenceSettings(n_draws=50, multiplier="normal", seed=4, alpha=0.05,
                                 cband=None, small_sample=True, owner="test")
    inference = CellInference.draw(influence, settings)
    want, df = block_welch(parts, counts)
    live = np.isfinite(inference.variance)
    np.testing.assert_allclose(inference.correction.variance[live], want[live], rtol=1e-12)
    # one paired group only: df n - 1 and the factor n / (n - 1), as a single sample's
    none = _within_of(panel, run_trends="none")
    alone = CellInference.draw(WithinInfluence.build(none, panel.times), settings)
    ok = np.isfinite(alone.variance) & (none.n_instances > 1)
    np.testing.assert_allclose(alone.correction.df[ok], none.n_instances[ok] - 1, rtol=1e-12)
    n = none.n_instances[ok]
    np.testing.assert_allclose(alone.correction.factor[ok], n / (n - 1), rtol=1e-12)
    # the draws are U psi with the fit's Gaussian multipliers
    weights = np.random.default_rng(4).normal(size=(50, psi.shape[0]))
    np.testing.assert_allclose(inference.bootstrap.cells, weights @ psi, rtol=1e-10,
                               atol=1e-14)


def test_within_profile_band_and_pretest_come_from_the_shared_inference(fitted):
    """The fitted within-instance profile: Welch standard errors, each cell's t quantile at the
    sup-t value's pointwise level (its df from the two groups), and R did's Wald pre-test of
    the pre-treatment cells, ``tau' (psi' psi)^-1 tau`` with as many df as cells."""
    from scipy.special import chdtrc

    from didmem.inference.small_sample import block_welch

    panel, res = fitted
    within = _within_of(panel)
    frame = res.within.to_frame()
    np.testing.assert_allclose(frame["estimate"], within.estimate, rtol=1e-12)
    var, df = block_welch(*WithinInfluence.build(within, panel.times).welch_groups())
    live = np.isfinite(frame["std_error"].to_numpy())
    np.testing.assert_allclose(frame["std_error"][live], np.sqrt(var[live]), rtol=1e-10)
    assert res.within.band == "simultaneous"
    half = ((frame["ci_upper"] - frame["ci_lower"]) / (2 * frame["std_error"]))[live]
    assert np.all(half > 1.96) and np.all(half <= res.within.critical_value + 1e-12)
    # the cells with fewer degrees of freedom get the larger t quantiles
    order = np.argsort(df[live])
    assert np.all(np.diff(half.to_numpy()[order]) <= 1e-9)
    pre = ((within.time < within.cohort) & ~within.reference & (within.n_pairs > 0)
           & live)
    est = within.estimate[pre]
    cov = within.psi[:, pre].T @ within.psi[:, pre]
    stat = float(est @ np.linalg.solve(cov, est))
    got = res.within.pretest
    assert got[1] == pre.sum() and got[0] == pytest.approx(stat, rel=1e-8)
    assert got[2] == pytest.approx(chdtrc(pre.sum(), stat), rel=1e-8)


# ---------------------------------------------------------------------------- the fit
def test_each_run_is_the_did_of_its_panel(fitted):
    panel, res = fitted
    for run in panel.runs:
        alone = didmem.DiDEstimator(n_bootstrap=0).fit(panel.run_panel(run))
        np.testing.assert_allclose(res.per_run[run].estimates, alone.estimates, rtol=1e-12)
    frame = res.to_frame()
    assert set(frame["estimand"]) == {"run", "pooled", "within_instance"}
    assert frame.loc[frame["estimand"] != "run", "run"].isna().all()
    assert set(frame.loc[frame["estimand"] == "run", "run"]) == {"0", "1", "2"}
    pooled = res.pooled.to_frame()
    runs = np.stack([res.per_run[r].to_frame().set_index(["cohort", "time"]).loc[
        list(zip(pooled["cohort"], pooled["time"])), "estimate"].to_numpy() for r in res.runs])
    np.testing.assert_allclose(pooled["estimate"], runs.mean(axis=0), rtol=1e-12)
    assert np.all(pooled["std_error"] >= pooled["instance_se"] - 1e-12)


def test_pooled_profile_of_copies_of_one_run_is_that_run():
    """Three copies of one run: the pooled estimates and standard errors (Welch-corrected,
    as the run's own) are the run's, with no between-run variance, and the band is a
    simultaneous one; the within-instance comparison has no variance, and says so."""
    frame, _ = _frame()
    one = frame[frame["run"] == 0]
    copies = pd.concat([one.assign(run=k) for k in range(3)], ignore_index=True)
    # the within-instance comparison of identical copies is exactly 0 with no variance:
    # the shared band says so (on every draw: the influence functions are exactly 0)
    with pytest.warns(didmem.InferenceWarning, match="non-degenerate bootstrap"):
        res = didmem.RunsEstimator(n_bootstrap=2000, seed=1).fit(_panel(copies))
    assert res.within.to_frame()["std_error"].isna().all()
    alone = didmem.DiDEstimator(n_bootstrap=0).fit(
        didmem.Panel(one, unit="unit", time="time", cohort="cohort", outcome="y"))
    pooled = res.pooled.to_frame()
    run = alone.to_frame().set_index(["cohort", "time"]).loc[
        list(zip(pooled["cohort"], pooled["time"]))]
    np.testing.assert_allclose(pooled["estimate"], run["estimate"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(pooled["std_error"], run["std_error"], rtol=1e-8)
    assert np.all(pooled["std_error"] > 1e-6)
    np.testing.assert_allclose(pooled["between_sd"], 0.0, atol=1e-7)
    assert res.pooled.band == "simultaneous"
    assert 2.3 < res.pooled.critical_value < 4.0


def test_fit_refuses_single_runs_clusters_and_holes():
    frame, _ = _frame()
    single = didmem.Panel(frame[frame["run"] == 0], unit="unit", time="time",
                          cohort="cohort", outcome="y")
    with pytest.raises(ParameterError, match="needs a panel of several runs"):
        didmem.RunsEstimator().fit(single)
    one = _panel(frame[frame["run"] == 0])
    with pytest.raises(ParameterError, match="at least 2 runs"):
        didmem.RunsEstimator().fit(one)
    clustered = _panel(frame.assign(c=frame["unit"] % 4), cluster="c")
    with pytest.raises(ParameterError, match="clusters by instance"):
        didmem.RunsEstimator().fit(clustered)
    holes = _panel(frame.drop(index=[3]), balance="keep")
    with pytest.raises(ParameterError, match="every run observed at every checkpoint"):
        didmem.RunsEstimator().fit(holes)


def test_lower_is_better_flips_every_estimand():
    frame, _ = _frame(seed=4)
    up = didmem.RunsEstimator(n_bootstrap=0).fit(_panel(frame)).to_frame()
    down = didmem.RunsEstimator(n_bootstrap=0, lower_is_better=True).fit(
        _panel(frame.assign(y=-frame["y"]))).to_frame()
    np.testing.assert_allclose(up["estimate"], down["estimate"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(up["std_error"], down["std_error"], rtol=1e-10)


def test_summary_states_the_spread_and_the_within_pretest(fitted):
    _, res = fitted
    text = res.summary()
    assert "Memorisation varies between runs with a standard deviation" in text \
        or "does not measurably depend on the run" in text
    assert "pre-test (Wald" in text and "Within-instance" in text
    # issue 50: what the within-instance band covers is stated (these runs' pairs)
    assert "averaged over these runs' (run, instance) pairs" in text
    assert "not the mean over a population of runs" in text
    spread = res.between_runs()
    assert spread["n_cells"] > 0 and 0 <= spread["run_share"] <= 1


# ---------------------------------------------------------------------------- saved = fitted
# a run's aggregation may fall back to pointwise intervals (its sup-t value below the normal
# one, as R did): that run's own warning, which saving it alone gives too
@pytest.mark.filterwarnings("ignore::didmem.InferenceWarning")
def test_saved_runs_result_reads_as_the_fitted_one(fitted, tmp_path):
    _, res = fitted
    path = res.save(tmp_path / "runs.parquet")
    back = didmem.load_result(path)
    assert isinstance(back, didmem.RunsResult)
    pd.testing.assert_frame_equal(back.to_frame(), res.to_frame())
    assert back.summary() == res.summary()
    for run in res.runs:
        assert back.per_run[run].summary() == res.per_run[run].summary()
        pd.testing.assert_frame_equal(back.per_run[run].to_frame(),
                                      res.per_run[run].to_frame())
        assert back.per_run[run].aggregate("instantaneous").to_frame().equals(
            res.per_run[run].aggregate("instantaneous").to_frame())
    assert back.within.pretest == pytest.approx(res.within.pretest, nan_ok=True)
    again = didmem.load_result(back.save(tmp_path / "again.parquet"))
    pd.testing.assert_frame_equal(again.to_frame(), res.to_frame())


def test_report_and_plots_of_a_runs_result(fitted):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    _, res = fitted
    page = didmem.report.render_report({"seeds": res}, figures=["profile"])
    assert "seeds: 3 runs compared" in page and "seeds: run 2" in page
    assert res.spread_words().split(" (")[0].replace("'", "&#x27;") in page
    assert "averaged over these runs&#x27; (run, instance) pairs" in page
    ax = res.plot()
    assert len(ax.get_legend().get_texts()) == 3
    assert res.pooled.plot().images
    with pytest.raises(ParameterError, match="no aggregations"):
        res.pooled.aggregate("instantaneous")


# ---------------------------------------------------------------------------- Monte Carlo
@pytest.mark.slow
def test_bands_cover_across_runs_in_a_small_monte_carlo():
    """60 replications of benchmarks/runs_montecarlo.py's ``few_runs`` DGP (the 200-rep
    figures, seeds 80000-80199: pooled 0.955, within-instance 0.975): the pooled band over every
    cell, and the within-instance band over its pre-treatment cells (truth 0 in every pair),
    cover in at least 85% of them (a guard against a broken band, not the calibration, whose MC
    error here is 0.03; the script has the full check)."""
    pooled_ok, within_ok = [], []
    for seed in range(60):
        frame, truth = didmem.datasets.simulate_runs(
            n_runs=3, n_cohorts=4, units_per_cohort=40, n_never_treated=80, n_times=6,
            unit_sd=1.0, path_sd=0.5, noise_sd=0.3, effect_sd=0.2, run_effect_sd=0.3,
            run_shift_sd=0.05, seed=30_000 + seed)
        res = didmem.RunsEstimator(n_bootstrap=299, seed=seed).fit(_panel(frame))
        target = res.pooled.to_frame().merge(
            truth[truth["run"] == 0][["cohort", "time", "tau_mean"]], on=["cohort", "time"],
            how="left")
        tau = target["tau_mean"].fillna(0.0)
        pooled_ok.append(bool(((target["ci_lower"] <= tau) & (tau <= target["ci_upper"])).all()))
        within = res.within.to_frame()
        pre = within[(within["time"] < within["cohort"]) & np.isfinite(within["std_error"])]
        within_ok.append(bool(((pre["ci_lower"] <= 0) & (0 <= pre["ci_upper"])).all()))
    assert np.mean(pooled_ok) >= 0.85
    assert np.mean(within_ok) >= 0.85  # pre-treatment cells: the truth is 0 in every pair


# ---------------------------------------------------------------------------- issue 50 item 3
def test_combination_never_has_more_variance_than_either_estimate():
    """The inverse-variance combination of two estimates linear in the same instances: its
    variance is ``(Va Vb - C^2) / (Va + Vb - 2C)``, the least over every weight, and never
    above the smaller of the two (here over random influence functions of every correlation,
    including estimates more variable than either's own, and a missing within estimate)."""
    from didmem.inference.runs.combined import combine_cells

    rng = np.random.default_rng(3)
    n, c = 30, 200
    base = rng.normal(size=(n, c))
    mix = rng.uniform(-1, 1, size=c)
    pa = base * rng.uniform(0.1, 2, size=c)
    pb = (mix * base + np.sqrt(1 - mix ** 2) * rng.normal(size=(n, c))) * rng.uniform(0.1, 2,
                                                                                     size=c)
    a, b = rng.normal(size=c), rng.normal(size=c)
    b[0] = np.nan
    both = combine_cells(a, pa, b, pb)
    va, vb, cov = (pa * pa).sum(0), (pb * pb).sum(0), (pa * pb).sum(0)
    var = both.std_error ** 2
    assert np.all(var[1:] <= np.minimum(va, vb)[1:] * (1 + 1e-12))
    np.testing.assert_allclose(var[1:], ((va * vb - cov ** 2) / (va + vb - 2 * cov))[1:],
                               rtol=1e-10)
    # the weight minimises the variance: any other weight gives more
    for w in (-0.5, 0.0, 0.3, 1.0, 1.5):
        other = (1 - w) ** 2 * va + w ** 2 * vb + 2 * w * (1 - w) * cov
        assert np.all(var[1:] <= other[1:] * (1 + 1e-12))
    # the combined estimate's influence is the weighted one, whose cross-product is var
    psi = (1 - both.weight) * pa + both.weight * pb
    np.testing.assert_allclose((psi * psi).sum(0)[1:], var[1:], rtol=1e-10)
    assert both.estimate[0] == a[0] and var[0] == pytest.approx(va[0])
    # identical estimators: the combination is either
    same = combine_cells(a, pa, a, pa)
    np.testing.assert_allclose(same.estimate, a)
    np.testing.assert_allclose(same.std_error ** 2, va, rtol=1e-12)


def test_fitted_combination_is_no_wider_than_the_pooled_fixed_run_or_within(fitted):
    _, res = fitted
    within = res.within.to_frame().merge(res.pooled.to_frame()[["cohort", "time", "instance_se",
                                                                "estimate"]],
                                         on=["cohort", "time"], suffixes=("", "_pooled"))
    ok = np.isfinite(within["std_error"]) & np.isfinite(within["combined_std_error"])
    assert ok.sum() >= 5
    rows = within[ok]
    assert np.all(rows["combined_std_error"] <= rows["instance_se"] * (1 + 1e-9))
    # against the uncorrected-variance within SE up to its Welch factor (at most n / (n - 1))
    assert np.all(rows["combined_std_error"] <= rows["std_error"] * (1 + 1e-9))
    w = rows["combined_weight"]
    np.testing.assert_allclose(rows["combined_estimate"],
                               (1 - w) * rows["estimate_pooled"] + w * rows["estimate"],
                               rtol=1e-10, atol=1e-12)


def test_between_plug_ins_of_the_pooled_band():
    from didmem.inference.runs.pooled import between_plug_in

    rng = np.random.default_rng(9)
    n, c, r = 40, 6, 3
    runs = [_run_cells(rng.normal(size=c) * 0.5, rng.normal(size=(n, c)) * 0.05)
            for _ in range(r)]
    pooled = pooled_cells(runs)
    s, d = np.diag(pooled.spread), np.diag(pooled.specific_covariance)
    from scipy.stats import chi2

    k = (r - 1) / chi2.ppf(0.5, r - 1)
    np.testing.assert_allclose(between_plug_in(pooled), np.maximum(k * s - d, 0), rtol=1e-12)
    ratio = between_plug_in(pooled, "ratio")
    np.testing.assert_allclose(ratio / d, max(0.0, np.mean(s / d) - 1), rtol=1e-10)
    shrunk = between_plug_in(pooled, "shrunk")
    assert np.all(shrunk >= 0)
    # shrunk toward the mean: its spread over cells is at most that of S - V_d
    assert np.std(shrunk) <= np.std(s - d) + 1e-15
    with pytest.raises(EstimationError, match="Unknown between-run plug-in"):
        between_plug_in(pooled, "nope")


def test_within_aggregations_are_the_shared_ones_with_fixed_cohort_weights(fitted, tmp_path):
    """The within-instance comparison aggregates as a fit does: ``simple`` is the mean of its
    post-treatment cells weighted by their cohorts' (run, instance) pairs, with the variance
    of the combined influence ``sum_i (psi_i w)^2`` times Welch's ``n / (n - 1)`` (one group of
    instances) and no estimated-weights term (the cohorts are the runs' data orders)."""
    panel, res = fitted
    within = _within_of(panel)
    keep = within.estimable
    live = within.subset(keep)
    cohorts = np.stack([panel.run_panel(r).cohorts for r in panel.runs])
    pairs = {g: (cohorts == g).sum() for g in np.unique(live.cohort)}
    post = (live.time >= live.cohort) & ~live.reference
    w = np.where(post, [pairs[g] for g in live.cohort], 0.0)
    w = w / w.sum()
    simple = res.within.aggregate("simple")
    assert simple.overall.estimate == pytest.approx(w @ live.estimate, rel=1e-10)
    n = live.psi.shape[0]
    var = np.sum((live.psi @ w) ** 2) * n / (n - 1)
    assert simple.overall.std_error == pytest.approx(np.sqrt(var), rel=1e-8)
    inst = res.within.aggregate("instantaneous")
    frame = res.within.to_frame()
    first = frame[frame["time"] == frame["cohort"]].set_index("cohort")["estimate"]
    np.testing.assert_allclose(inst.estimates, first.loc[inst.keys].to_numpy(), rtol=1e-12)
    dynamic = res.within.aggregate("dynamic")
    assert np.all(np.isfinite(dynamic.std_errors[dynamic.keys >= 0]))
    import pickle

    again = pickle.loads(pickle.dumps(res))  # results cross processes (the lab's workers)
    assert again.within.aggregate("simple").overall.estimate == simple.overall.estimate
    back = didmem.load_result(res.save(tmp_path / "runs.parquet"))
    with pytest.raises(ParameterError, match="read back from a file"):
        back.within.aggregate("simple")
