"""Inference across training runs: the pooled profile and the within-instance comparison.

Two estimands of a panel of several runs (``Panel(..., run=...)``) beside each run's own
difference in differences (see the docs' *Estimands* and *Several runs* pages):

* :func:`pooled_cells`: the mean over runs of each run's tau_r(g, c), with runs a random
  factor. Its variance has an instance part (the runs' influence functions, summed per
  instance: the same instances enter every run) and a between-run part (the spread of the
  run estimates beyond what their instance sampling explains; a method-of-moments estimate,
  clipped to a positive semi-definite matrix). Its intervals use t quantiles with
  Satterthwaite degrees of freedom, since the between-run part rests on ``R - 1``.
* :func:`within_cells`: each instance compared with itself across runs: in run ``r`` the
  instances first trained at ``g``, against the same instances in the runs that have not
  trained them by ``c``, each differenced against its own base-period score. Influence
  functions per instance (the instances are the clusters).

Both bands come from Gaussian multiplier draws of their influence rows, through the one
bootstrap loop (:func:`~didmem.inference.bootstrap.multiplier_bootstrap`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import chdtrc

from ..errors import EstimationError
from .bands import analytic_se, normal_quantile, simultaneous_band
from .bootstrap import MultiplierChunks, multiplier_bootstrap
from .small_sample import normal_level, t_critical_values

__all__ = ["RunCells", "CellBand", "PooledCells", "WithinCells", "pooled_cells",
           "within_cells", "gaussian_band", "RUN_TRENDS"]

from ._choices import RUN_TRENDS  # noqa: E402  (declared where the estimator reads it cheaply)

_DF_CAP = 1e6  # degrees of freedom beyond which a t quantile is the normal one
_CHUNK_ELEMENTS = 1_000_000


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
    """The pooled profile's cells (those that every run has) and their inference.

    Attributes
    ----------
    cohort, time, base_time, estimate : ndarray
        The cells and the mean over runs of the runs' estimates.
    run_estimates : ndarray (runs x cells)
    covariance : ndarray
        The pooled estimates' covariance: the instance part plus the between-run variances
        / R on the diagonal.
    instance_covariance : ndarray
        The instance part alone, ``psi_bar' psi_bar`` with ``psi_bar`` the runs' influence
        functions averaged per instance: the variance with the runs held fixed.
    between_variance : ndarray
        Per cell, the between-run variance of tau_r(g, c): the spread of the run estimates
        less the part of it that instance sampling explains, truncated at 0.
    df : ndarray
        Satterthwaite degrees of freedom of each cell's variance.
    rows : ndarray
        Influence rows whose cross-product is ``covariance`` (the instances', then one per
        cell with a between-run variance): what the band draws from.
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
    between_variance: np.ndarray
    df: np.ndarray
    rows: np.ndarray
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
    r"""The mean profile over runs, with runs a random factor.

    With ``R`` runs, ``tau_bar = mean_r tau_r``; each run's estimate deviates from the
    population mean ``mu`` by a run effect ``b_r`` (variance ``Sigma_b``) and its instance
    sampling error, which is correlated across runs through the shared instances. With
    ``V_rs = psi_r' psi_s`` (the runs' influence functions, instances aligned),

    .. math::

        \operatorname{Var}(\bar\tau) = \Sigma_b / R + \frac{1}{R^2}\sum_{r,s} V_{rs},
        \qquad
        \hat\Sigma_b = S - \Big(\frac{1}{R}\sum_r V_{rr}
                                - \frac{1}{R(R-1)}\sum_{r \ne s} V_{rs}\Big),

    ``S`` the sample covariance of the run estimates: its expectation is ``Sigma_b`` plus the
    run-specific part ``V_d`` of the instance error (the diagonal less the off-diagonal
    blocks). Each cell's between-run variance is ``max(0, S_cc - V_d,cc)``, so the variance is
    never below the fixed-run one; untruncated it equals ``S_cc / R + mean_{r != s} V_rs,cc``.
    The between-run part enters the covariance as independent across cells: estimated from
    ``R - 1`` degrees of freedom its correlation has rank ``R - 1`` at most and cannot stand
    for the true one, and independence gives the largest sup-t value (Sidak's inequality),
    a conservative band. The ``S / R`` part rests on ``R - 1`` degrees of freedom: each
    cell's are Satterthwaite's, ``(R - 1) (v / (max(S_cc, V_d,cc) / R))^2`` (the spread is
    at least its instance part in expectation), and at most the same ratio taken over all
    the cells, ``(R - 1) (sum_c v_c / sum_c max(S_cc, V_d,cc) / R)^2``: with few runs a
    cell's spread is often small by chance, and its own ratio would then pass for many
    degrees of freedom (Monte Carlo with three runs: 0.875 coverage with per-cell degrees
    of freedom on the observed spread).
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
    psi_sum = np.zeros((runs[0].psi.shape[0], columns[0].size))
    own = np.zeros((columns[0].size, columns[0].size))
    for r, c in zip(runs, columns):
        psi = r.psi[:, c]
        psi_sum += psi
        own += psi.T @ psi
    psi_bar = psi_sum / n_runs
    instance = psi_bar.T @ psi_bar
    cross = psi_sum.T @ psi_sum - own
    within_specific = own / n_runs - cross / (n_runs * (n_runs - 1))
    spread = np.cov(est, rowvar=False, ddof=1).reshape(est.shape[1], est.shape[1])
    between = np.maximum(np.diag(spread) - np.diag(within_specific), 0.0)
    # the between-run part enters as independent across cells: with R - 1 degrees of freedom
    # its estimated correlation has rank R - 1 at most and cannot stand for the true one;
    # independence makes the sup-t value the largest (Sidak), a conservative band
    factor = np.diag(np.sqrt(between / n_runs))[between > 0]
    covariance = instance + np.diag(between / n_runs)
    # the run-sampled part of the variance, S / R, rests on R - 1 degrees of freedom; it is at
    # least the run-specific instance part (known from the instances), which keeps a spread
    # small by chance from passing for many degrees of freedom
    run_part = np.maximum(np.diag(spread), np.diag(within_specific)) / n_runs
    total = np.diag(covariance)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(run_part > 0, (n_runs - 1) * (total / run_part) ** 2, np.inf)
        # and at most the band's: the same ratio over all cells, so that a cell whose runs
        # agree by chance does not pass for many more degrees of freedom than the others
        live = total > 0
        if run_part[live].sum() > 0:
            df = np.minimum(df, (n_runs - 1) * (total[live].sum() / run_part[live].sum()) ** 2)
    first, c0 = runs[0], columns[0]
    return PooledCells(cohort=first.cohort[c0], time=first.time[c0],
                       base_time=first.base_time[c0], estimate=est.mean(axis=0),
                       run_estimates=est, covariance=covariance, instance_covariance=instance,
                       between_variance=between,
                       df=np.minimum(df, _DF_CAP), rows=np.vstack([psi_bar, factor]),
                       n_dropped=n_dropped)


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
