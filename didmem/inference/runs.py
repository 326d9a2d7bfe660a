"""Inference across training runs: the pooled profile and the within-instance comparison.

Two estimands of a panel of several runs (``Panel(..., run=...)``) beside each run's own
difference in differences (see the docs' *Estimands* and *Several runs* pages):

* :func:`pooled_cells`: the mean over runs of each run's tau_r(g, c), with runs a random
  factor. Its variance has a part that every run shares (their instance sampling error on
  the same instances, from the runs' influence functions across runs) and a run-specific
  part (run effects plus each run's own instance error), which the runs' spread estimates
  on ``R - 1`` degrees of freedom; :func:`pooled_band` simulates the studentised
  deviations from these components for the band's critical value.
* :func:`within_cells`: each instance compared with itself across runs: in run ``r`` the
  instances first trained at ``g``, against the same instances in the runs that have not
  trained them by ``c``, each differenced against its own base-period score. Influence
  functions per instance (the instances are the clusters).

Both bands come from Gaussian multiplier draws, through the one bootstrap loop
(:func:`~didmem.inference.bootstrap.multiplier_bootstrap`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import chdtrc, chdtri

from ..errors import EstimationError
from .bands import analytic_se, normal_quantile, simultaneous_band
from .bootstrap import _CHUNK_ELEMENTS, MultiplierChunks, multiplier_bootstrap
from .small_sample import normal_level, t_critical_values

__all__ = ["RunCells", "CellBand", "PooledCells", "WithinCells", "pooled_cells",
           "pooled_band", "within_cells", "gaussian_band", "RUN_TRENDS"]

from ._choices import RUN_TRENDS  # noqa: E402  (declared where the estimator reads it cheaply)

_DF_CAP = 1e6  # degrees of freedom beyond which a t quantile is the normal one


def _chi2_median(df: float) -> float:
    """The median of the chi-square distribution with ``df`` degrees of freedom."""
    return float(chdtri(df, 0.5))


@dataclass(frozen=True)
class RunCells:
    """One run's cells, their influence functions on the panel's shared instances.

    ``psi`` is instances x cells (zero rows for instances the run's fit left out);
    ``live`` marks the cells with a variance (not a reference cell fixed at 0).
    """

    cohort: np.ndarray
    time: np.ndarray
    base_time: np.ndarray
    estimate: np.ndarray
    psi: np.ndarray
    live: np.ndarray


@dataclass(frozen=True)
class CellBand:
    """Standard errors and the band of a set of cells.

    ``critical_values`` are per cell (t quantiles with ``df`` at the band's pointwise
    level); ``critical_value`` is the band's value on the normal scale (the sup-t value of
    the draws, or the normal quantile for pointwise intervals).
    """

    std_errors: np.ndarray
    critical_values: np.ndarray
    critical_value: float
    rule: str


def gaussian_band(rows: np.ndarray, df: np.ndarray, *, alpha: float, n_draws: int, rng,
                  simultaneous: bool) -> CellBand:
    """The band of cells whose estimates deviate as ``sum_k U_k rows[k]``, U standard normal.

    ``rows`` (k x cells) are the influence rows (their cross-product is the covariance);
    with ``n_draws > 0`` and ``simultaneous`` the sup-t value of Gaussian multiplier draws
    (the one bootstrap loop, :func:`~didmem.inference.bootstrap.multiplier_bootstrap`), else
    the pointwise normal quantile; each cell then gets the t quantile with its ``df`` at
    that value's pointwise level (the normal one where ``df`` is infinite).
    """
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    se = analytic_se(np.einsum("ij,ij->j", rows, rows))
    crit, rule = normal_quantile(1 - alpha / 2), "pointwise"
    if n_draws > 0 and simultaneous and np.isfinite(se).sum() > 1:
        chunks = MultiplierChunks(rng, n_draws, rows.shape[0], "normal",
                                  chunk=max(1, _CHUNK_ELEMENTS // max(rows.shape[0], 1)))

        def drawer():
            def draw(row0, weights, out):
                m = weights.shape[0]
                out.cells[row0:row0 + m] = weights @ rows
                out.total[row0:row0 + m] = weights.sum(axis=1)
            return draw

        draws = multiplier_bootstrap(drawer, chunks, rows.shape[1], 0)
        crit, rule = simultaneous_band(draws.cells, se, alpha, np.sqrt(rows.shape[0]),
                                       at_least_normal=False)
    per_cell = t_critical_values(normal_level(crit), np.where(df >= _DF_CAP, np.inf, df))
    return CellBand(se, per_cell, float(crit), rule)


# ------------------------------------------------------------------------------ pooled
@dataclass(frozen=True)
class PooledCells:
    """The pooled profile's cells (those that every run has) and their variance components.

    Attributes
    ----------
    cohort, time, base_time, estimate : ndarray
        The cells and the mean over runs of the runs' estimates.
    run_estimates : ndarray (runs x cells)
    covariance : ndarray
        The pooled estimates' covariance: the instance part plus the between-run variances
        / R on the diagonal (its diagonal is the squared standard errors).
    instance_covariance : ndarray
        The instance part alone, ``psi_bar' psi_bar`` with ``psi_bar`` the runs' influence
        functions averaged per instance: the variance with the runs held fixed.
    shared_covariance : ndarray
        ``C``: the part of the instance error that every run shares (the same instances),
        ``mean_{r != s} psi_r' psi_s``; the spread of the runs cannot show it.
    specific_covariance : ndarray
        ``V_d``: each run's own part of its instance error,
        ``sum_r (psi_r - psi_bar)' (psi_r - psi_bar) / (R - 1)`` (positive semi-definite);
        the runs' spread is at least this in expectation.
    spread : ndarray
        ``S``: the sample covariance of the run estimates (``R - 1`` degrees of freedom).
    between_variance : ndarray
        Per cell, the between-run variance of tau_r(g, c): ``max(0, S_cc - V_d,cc)``.
    df : ndarray
        Satterthwaite's effective degrees of freedom of each cell's variance (descriptive:
        the band's critical value is simulated, :func:`pooled_band`).
    n_runs : int
    n_dropped : int
        Cells some run lacks (left out of the pooled profile).
    """

    cohort: np.ndarray
    time: np.ndarray
    base_time: np.ndarray
    estimate: np.ndarray
    run_estimates: np.ndarray
    covariance: np.ndarray
    instance_covariance: np.ndarray
    shared_covariance: np.ndarray
    specific_covariance: np.ndarray
    spread: np.ndarray
    between_variance: np.ndarray
    df: np.ndarray
    n_runs: int
    n_dropped: int


def _common_cells(runs: list[RunCells]):
    """Each run's columns of the cells that every run has with a variance, and how many
    cells some run lacks."""
    keys = [set(zip(r.cohort[r.live].tolist(), r.time[r.live].tolist())) for r in runs]
    every = set.intersection(*keys)
    union = set.union(*keys)
    first = runs[0]
    order = [j for j in np.flatnonzero(first.live)
             if (first.cohort[j], first.time[j]) in every]
    wanted = [(first.cohort[j], first.time[j]) for j in order]
    columns = []
    for r in runs:
        where = {(c, t): j for j, (c, t) in enumerate(zip(r.cohort.tolist(), r.time.tolist()))}
        columns.append(np.array([where[k] for k in wanted], dtype=np.int64))
    return columns, len(union) - len(every)


def pooled_cells(runs: list[RunCells]) -> PooledCells:
    r"""The mean profile over runs, with runs a random factor, and its variance components.

    Each run's estimate is ``tau_r = mu + z + w_r``: ``mu`` the mean over the populations of
    runs and instances (the estimand), ``z`` the part of the instance sampling error that
    every run shares (the same instances enter every run), and ``w_r = b_r + e_r`` the
    run's own part, its run effect ``b_r`` (variance ``Sigma_b``) plus the part of its
    instance error that is its own (its data order, its noise; variance ``V_d``), about
    independent across runs. With ``V_rs = psi_r' psi_s`` (instances aligned),

    .. math::

        \operatorname{Var}(\bar\tau) = C + (\Sigma_b + V_d) / R,\quad
        C = \frac{1}{R(R-1)}\sum_{r \ne s} V_{rs},\quad
        V_d = \frac{1}{R}\sum_r V_{rr} - C,

    and ``E[S] = Sigma_b + V_d`` for the runs' sample covariance ``S``: the spread holds
    the run-specific part of the instance error but not the shared part ``C``. Each cell's
    variance is ``max(S_cc, V_d,cc) / R + C_cc`` (``S / R + C`` is unbiased; ``V_d`` is a
    known lower bound of the run-specific variance), its between-run variance
    ``max(0, S_cc - V_d,cc)``. The ``S / R`` part rests on ``R - 1`` degrees of freedom;
    the band's critical value is simulated from these components (:func:`pooled_band`).
    """
    if len(runs) < 2:
        raise EstimationError("The pooled profile over runs needs at least 2 runs; got "
                              f"{len(runs)}.")
    columns, n_dropped = _common_cells(runs)
    if columns[0].size == 0:
        raise EstimationError("No (cohort, checkpoint) cell is estimated in every run, so "
                              "there is no pooled profile: each run's cohorts are listed by "
                              "RunsResult.per_run[run].to_frame().")
    n_runs = len(runs)
    est = np.stack([r.estimate[c] for r, c in zip(runs, columns)])
    psis = [r.psi[:, c] for r, c in zip(runs, columns)]
    psi_bar = sum(psis) / n_runs
    instance = psi_bar.T @ psi_bar
    specific = sum((p - psi_bar).T @ (p - psi_bar) for p in psis) / (n_runs - 1)
    shared = instance - specific / n_runs
    spread = np.cov(est, rowvar=False, ddof=1).reshape(est.shape[1], est.shape[1])
    s, d = np.diag(spread), np.diag(specific)
    between = np.maximum(s - d, 0.0)
    covariance = instance + np.diag(between / n_runs)
    run_part = np.maximum(s, d) / n_runs
    total = np.diag(covariance)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(run_part > 0, (n_runs - 1) * (total / run_part) ** 2, np.inf)
    first, c0 = runs[0], columns[0]
    return PooledCells(cohort=first.cohort[c0], time=first.time[c0],
                       base_time=first.base_time[c0], estimate=est.mean(axis=0),
                       run_estimates=est, covariance=covariance, instance_covariance=instance,
                       shared_covariance=shared, specific_covariance=specific, spread=spread,
                       between_variance=between, df=np.minimum(df, _DF_CAP), n_runs=n_runs,
                       n_dropped=n_dropped)


def _psd_root(matrix: np.ndarray) -> np.ndarray:
    """``L`` with ``L L' = matrix`` clipped to its positive eigenvalues."""
    vals, vecs = np.linalg.eigh((matrix + matrix.T) / 2)
    return vecs * np.sqrt(np.clip(vals, 0.0, None))


def pooled_band(pooled: PooledCells, *, alpha: float, n_draws: int, rng,
                simultaneous: bool) -> CellBand:
    r"""The pooled profile's band: the studentised deviations simulated from its components.

    The statistic is ``T_c = (tau_bar_c - mu_c) / se_c`` with
    ``se_c^2 = max(S_cc, V_d,cc) / R + C_cc`` (:func:`pooled_cells`); its law depends on the
    unknown run-specific covariance ``Sigma_w = Sigma_b + V_d`` only through how much of
    the variance rests on the ``R - 1`` degrees of freedom of ``S``. Each draw takes the
    deviation ``N(0, C + Sigma_w / R)`` and, independent of it, ``R - 1`` residuals
    ``N(0, Sigma_w)`` whose sum of squares over ``R - 1`` is the draw's ``S``, and forms
    ``T`` as the data do (floor at ``V_d`` included). ``Sigma_w`` is ``V_d`` plus the
    between-run variances ``max(0, k S_cc - V_d,cc)`` on the diagonal (independent across
    cells: a rank-``R - 1`` estimate of their correlation cannot stand for the true one),
    with ``k = (R - 1) / chi2_{R-1}(0.5)`` so that ``k S_cc`` is median-unbiased for the
    run-specific variance: a plug-in that underestimates it as often as it overestimates
    it (the plain ``S`` underestimates it more often than not, and with three runs the
    band covered 0.925 of 400 Monte Carlo replications; with ``k``, 0.943, on seeds other
    than those reported in ``benchmarks/RESULTS.md``). The simultaneous critical value is
    the ``1 - alpha`` quantile of ``max_c |T_c|``; pointwise ones each cell's quantile of
    ``|T_c|``. Draws go through the one bootstrap loop with Gaussian multipliers. Without
    draws, each cell gets the t quantile with its Satterthwaite ``df``.
    """
    se = np.sqrt(np.diag(pooled.covariance))
    r, m = pooled.n_runs, se.size
    if n_draws <= 0:
        crit = normal_quantile(1 - alpha / 2)
        per_cell = t_critical_values(1 - alpha / 2,
                                     np.where(pooled.df >= _DF_CAP, np.inf, pooled.df))
        return CellBand(se, per_cell, float(crit), "pointwise")
    s, d = np.diag(pooled.spread), np.diag(pooled.specific_covariance)
    k = (r - 1) / _chi2_median(r - 1)
    plug_between = np.maximum(k * s - d, 0.0)
    root_w = _psd_root(pooled.specific_covariance + np.diag(plug_between))
    root_dev = _psd_root(pooled.shared_covariance + (pooled.specific_covariance
                                                    + np.diag(plug_between)) / r)
    shared_var = np.diag(pooled.shared_covariance)
    n_weights = r * m  # the deviation's m, then R - 1 residuals' m each
    chunks = MultiplierChunks(rng, n_draws, n_weights, "normal",
                              chunk=max(1, _CHUNK_ELEMENTS // max(n_weights, 1)))

    def drawer():
        def draw(row0, weights, out):
            w = weights.reshape(weights.shape[0], r, m)
            deviation = w[:, 0] @ root_dev.T
            residuals = w[:, 1:] @ root_w.T
            spread = (residuals ** 2).sum(axis=1) / (r - 1)
            with np.errstate(divide="ignore", invalid="ignore"):
                t = deviation / np.sqrt(np.maximum(spread, d) / r + shared_var)
            # the studentised draws on the scale of the cells' standard errors
            out.cells[row0:row0 + w.shape[0]] = np.where(np.isfinite(t), t, 0.0) * se
            out.total[row0:row0 + w.shape[0]] = 0.0
        return draw

    draws = multiplier_bootstrap(drawer, chunks, m, 0)
    if simultaneous and np.isfinite(se).sum() > 1:
        crit, rule = simultaneous_band(draws.cells, se, alpha, 1.0, at_least_normal=False)
        per_cell = np.full(m, crit)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            per_cell = np.quantile(np.abs(draws.cells / se), 1 - alpha, axis=0)
        crit, rule = normal_quantile(1 - alpha / 2), "pointwise"
    return CellBand(se, per_cell, float(crit), rule)


# ------------------------------------------------------------------------------ within
@dataclass(frozen=True)
class WithinCells:
    """The within-instance comparison's cells and their influence functions.

    Attributes
    ----------
    cohort, time, base_time : ndarray
    estimate : ndarray
        NaN where no instance of the cohort has a run that has not trained it by then.
    psi : ndarray (instances x cells)
        Influence functions per instance (cluster sums: an instance's pairs in every run).
    n_pairs : ndarray
        (run, instance) pairs of the cohort with at least one control run.
    n_instances : ndarray
        Distinct instances among them.
    reference : ndarray of bool
        Cells fixed at 0 (the universal base period's own cell).
    """

    cohort: np.ndarray
    time: np.ndarray
    base_time: np.ndarray
    estimate: np.ndarray
    psi: np.ndarray
    n_pairs: np.ndarray
    n_instances: np.ndarray
    reference: np.ndarray


def _cell_layout(cohorts: np.ndarray, times: np.ndarray, base_period: str, anticipation: float):
    """The cells (cohort, time index, base index, reference) as the DiD lays them out."""
    treated = np.unique(cohorts[np.isfinite(cohorts)])
    treated = treated[(treated > times[0] + anticipation) & (treated <= times[-1])]
    n_t = times.size
    out = []
    for g in treated:
        last_pre = int(np.flatnonzero(times + anticipation < g)[-1])
        if base_period == "varying":
            t_idx = np.arange(1, n_t)
            b_idx = np.where(g <= times[t_idx], last_pre, t_idx - 1)
            ref = np.zeros(t_idx.size, dtype=bool)
        else:
            t_idx = np.arange(n_t)
            b_idx = np.full(n_t, last_pre)
            ref = t_idx == last_pre
        out.append((g, t_idx, b_idx, ref))
    return out


def within_cells(y: np.ndarray, cohorts: np.ndarray, times: np.ndarray, *,
                 base_period: str = "varying", anticipation: float = 0.0,
                 run_trends: str = "never_treated") -> WithinCells:
    r"""Each instance compared with itself across runs.

    Parameters
    ----------
    y : ndarray (runs x instances x times)
        The outcome (oriented: higher = better predicted).
    cohorts : ndarray (runs x instances)
        Each instance's cohort in each run (``inf``: never trained in that run); cohorts
        after the last time count as never treated.
    times : ndarray
    base_period : {"varying", "universal"}
        The base of each cell, as :class:`~didmem.DiDEstimator`'s.
    anticipation : float
    run_trends : {"never_treated", "none"}
        ``"never_treated"``: first subtract from every run's outcomes, at each checkpoint,
        the mean of the instances that no run trains (validation instances), so that a shift
        common to a run's instances (an initialisation, a data order that makes one run
        better at a checkpoint) leaves the comparison; ``"none"``: compare raw changes (runs
        that differ only in their data order).

    Notes
    -----
    For the cell ``(g, c)`` with base ``b`` and ``d_{ri} = Y_{ric} - Y_{rib}``, every pair
    ``(r, i)`` with ``g_r(i) = g`` and a non-empty set ``S_{ri}`` of other runs ``s`` with
    ``g_s(i) > max(c, b) + anticipation`` gives ``D_{ri} = d_{ri} - mean_{s in S_{ri}} d_{si}``;
    the estimate is the mean of ``D`` over the pairs. Assumption: the runs are exchangeable
    given the instance (its untreated change from ``b`` to ``c`` has the same expectation in
    every run; after removing the runs' validation mean with ``run_trends="never_treated"``).
    The estimate is a ratio of instance sums, ``sum_i A_i / sum_i B_i``, so the influence of
    instance ``i`` is ``(A_i - tau B_i) / sum B``; the validation means add
    ``-sum_r a_r (d_rj - bar d_r) / n_N`` on validation instance ``j``, with ``a_r`` run
    ``r``'s net weight (as treated less as control).
    """
    y = np.asarray(y, dtype=np.float64)
    cohorts = np.asarray(cohorts, dtype=np.float64).copy()
    times = np.asarray(times, dtype=np.float64)
    cohorts[np.isfinite(cohorts) & (cohorts > times[-1])] = np.inf
    n_runs, n_units, _ = y.shape
    if n_runs < 2:
        raise EstimationError("The within-instance comparison needs at least 2 runs; got "
                              f"{n_runs}.")
    validation = np.all(np.isinf(cohorts), axis=0)
    if run_trends == "never_treated":
        if validation.sum() < 2:
            raise EstimationError(
                "run_trends='never_treated' removes each run's shift at each checkpoint with "
                "the instances that no run trains (validation instances), but the panel has "
                f"{int(validation.sum())}. Add validation instances, or pass "
                "run_trends='none' (runs that differ only in their data order).")
        y = y - y[:, validation, :].mean(axis=1, keepdims=True)
    blocks = _cell_layout(cohorts, times, base_period, anticipation)
    if not blocks:
        raise EstimationError("No cohort has a pre-treatment period within the panel's times "
                              "in any run: nothing to compare.")
    parts = [_cohort_cells(y, cohorts, times, g, t_idx, b_idx, anticipation,
                           validation if run_trends == "never_treated" else None)
             for g, t_idx, b_idx, _ in blocks]
    est = np.concatenate([p[0] for p in parts])
    reference = np.concatenate([ref for *_, ref in blocks])
    est[reference] = 0.0
    psi = np.concatenate([p[1] for p in parts], axis=1)
    psi[:, reference] = 0.0
    return WithinCells(
        cohort=np.concatenate([np.full(t.size, g) for g, t, _, _ in blocks]),
        time=np.concatenate([times[t] for _, t, _, _ in blocks]),
        base_time=np.concatenate([times[b] for _, _, b, _ in blocks]),
        estimate=est, psi=psi, n_pairs=np.concatenate([p[2] for p in parts]),
        n_instances=np.concatenate([p[3] for p in parts]), reference=reference)


def _cohort_cells(y, cohorts, times, g, t_idx, b_idx, anticipation, validation):
    """One cohort's cells: estimates, instance influence (instances x cells), pairs and
    instances with a control run."""
    change = y[:, :, t_idx] - y[:, :, b_idx]  # runs x instances x cells
    threshold = np.maximum(times[t_idx], times[b_idx]) + anticipation
    control = cohorts[:, :, None] > threshold[None, None, :]
    treated = (cohorts == g)[:, :, None]
    n_control = control.sum(axis=0)[None] - control
    control_sum = (control * change).sum(axis=0)[None] - control * change
    pair = treated & (n_control > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.where(pair, change - control_sum / np.maximum(n_control, 1), 0.0)
    n_pairs = pair.sum(axis=(0, 1))
    per_unit = pair.sum(axis=0)  # instances x cells
    with np.errstate(divide="ignore", invalid="ignore"):
        est = np.where(n_pairs > 0, diff.sum(axis=(0, 1)) / n_pairs, np.nan)
        psi = np.where(n_pairs > 0,
                       (diff.sum(axis=0) - np.nan_to_num(est) * per_unit) / n_pairs, 0.0)
        if validation is not None:
            weight = np.where(pair, 1.0 / np.maximum(n_control, 1), 0.0)
            as_control = (control * (weight.sum(axis=0)[None] - weight)).sum(axis=1)
            net = np.where(n_pairs > 0, (pair.sum(axis=1) - as_control) / n_pairs, 0.0)
            psi[validation] -= np.einsum("rm,rjm->jm", net, change[:, validation]) \
                / validation.sum()
    return est, psi, n_pairs, (per_unit > 0).sum(axis=0)


def wald_pretest(estimate: np.ndarray, psi: np.ndarray, which: np.ndarray):
    """Wald test that the cells ``which`` are all 0: ``(statistic, df, pvalue)`` with the
    influence covariance ``psi' psi`` (its pseudo-inverse; df its rank). NaNs without cells."""
    which = np.flatnonzero(which)
    if which.size == 0:
        return float("nan"), 0, float("nan")
    est = estimate[which]
    cov = psi[:, which].T @ psi[:, which]
    rank = int(np.linalg.matrix_rank(cov))
    if rank == 0:
        return float("nan"), 0, float("nan")
    stat = float(est @ np.linalg.pinv(cov, hermitian=True) @ est)
    return stat, rank, float(chdtrc(rank, stat))
