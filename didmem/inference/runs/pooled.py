"""Inference across training runs: the pooled profile, the one band of its own.

Two estimands of a panel of several runs (``Panel(..., run=...)``) beside each run's own
difference in differences (see the docs' *Estimands* and *Several runs* pages):

* :func:`pooled_cells`: the mean over runs of each run's tau_r(g, c), with runs a random
  factor. Its variance has a part that every run shares (their instance sampling error on
  the same instances, from the runs' influence functions across runs) and a run-specific
  part (run effects plus each run's own instance error), which the runs' spread estimates
  on ``R - 1`` degrees of freedom; :func:`pooled_band` simulates the studentised
  deviations from these components for the band's critical value.
* the within-instance comparison (:mod:`didmem.inference.runs.within`): each instance
  compared with itself across runs. Its influence functions are per instance, so it is one
  more :class:`~didmem.inference.influence.CellInfluence` and takes the shared band,
  small-sample correction and pre-test (:class:`~didmem.inference.cell_inference.
  CellInference`); only the pooled band, whose variance has a part on ``R - 1`` degrees of
  freedom, is simulated here.

The pooled band's draws go through the one bootstrap loop
(:func:`~didmem.inference.bootstrap.multiplier_bootstrap`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import chdtri

from ...errors import EstimationError
from ..bands import normal_quantile, simultaneous_band
from ..bootstrap import _CHUNK_ELEMENTS, MultiplierChunks, multiplier_bootstrap
from ..small_sample import t_critical_values

__all__ = ["RunCells", "CellBand", "PooledCells", "pooled_cells", "pooled_band",
           "between_plug_in", "BETWEEN_RULES", "RUN_TRENDS"]

from ..choices import RUN_TRENDS  # noqa: E402  (declared where the estimator reads it cheaply)

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
    instance_psi : ndarray or None
        ``psi_bar`` (instances x cells): the runs' influence functions averaged per instance,
        the pooled DiD's with the runs held fixed (``instance_covariance`` is its
        cross-product); what the efficient combination with the within-instance comparison
        reads (:mod:`didmem.inference.runs.combined`).
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
    instance_psi: np.ndarray | None = None


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
                       n_dropped=n_dropped, instance_psi=psi_bar)


def _psd_root(matrix: np.ndarray) -> np.ndarray:
    """``L`` with ``L L' = matrix`` clipped to its positive eigenvalues."""
    vals, vecs = np.linalg.eigh((matrix + matrix.T) / 2)
    return vecs * np.sqrt(np.clip(vals, 0.0, None))


BETWEEN_RULES = ("cell", "ratio", "shrunk")
"""Plug-ins of the between-run variances that :func:`pooled_band` simulates from."""


def between_plug_in(pooled: PooledCells, rule: str = "cell") -> np.ndarray:
    r"""The between-run variances ``B_c`` that the pooled band simulates from.

    ``"cell"`` (the band's rule): ``max(0, k S_cc - V_d,cc)`` per cell,
    ``k = (R - 1) / chi2_{R-1}(0.5)`` (median-unbiased; ``R - 1`` degrees of freedom each).
    ``"ratio"``: one factor for every cell, ``B_c = beta V_d,cc`` with
    ``beta = max(0, mean_c(S_cc / V_d,cc) - 1)`` (unbiased for a common ratio: ``E S_cc =
    V_d,cc + B_c``). ``"shrunk"``: the per-cell unbiased ``b_c = S_cc - V_d,cc`` shrunk toward
    their mean ``b`` by the empirical-Bayes weight ``v / (v + tau^2)``, ``v`` the mean sampling
    variance ``2 S_cc^2 / (R + 1)`` (unbiased for ``2 E[S]^2 / (R - 1)``) and
    ``tau^2 = max(0, var_c(b_c) - v)``, floored at 0. Issue 50: with three runs the per-cell
    plug-in makes the band conservative where the runs agree (``benchmarks/runs_floor.py
    --band``); the other two are measured there.
    """
    s, d = np.diag(pooled.spread), np.diag(pooled.specific_covariance)
    r = pooled.n_runs
    if rule == "cell":
        return np.maximum((r - 1) / _chi2_median(r - 1) * s - d, 0.0)
    if rule == "ratio":
        ok = d > 0
        beta = max(0.0, float(np.mean(s[ok] / d[ok])) - 1.0) if ok.any() else 0.0
        return beta * d
    if rule == "shrunk":
        b = s - d
        v = float(np.mean(2 * s ** 2 / (r + 1)))
        tau2 = max(0.0, float(np.var(b)) - v)
        weight = v / (v + tau2) if v + tau2 > 0 else 1.0
        return np.maximum(weight * b.mean() + (1 - weight) * b, 0.0)
    raise EstimationError(f"Unknown between-run plug-in {rule!r}; one of {BETWEEN_RULES}.")


def pooled_band(pooled: PooledCells, *, alpha: float, n_draws: int, rng,
                simultaneous: bool, between: str = "cell") -> CellBand:
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
    draws, each cell gets the t quantile with its Satterthwaite ``df``. ``between`` names
    the plug-in of the between-run variances (:func:`between_plug_in`).
    """
    se = np.sqrt(np.diag(pooled.covariance))
    r, m = pooled.n_runs, se.size
    if n_draws <= 0:
        crit = normal_quantile(1 - alpha / 2)
        per_cell = t_critical_values(1 - alpha / 2,
                                     np.where(pooled.df >= _DF_CAP, np.inf, pooled.df))
        return CellBand(se, per_cell, float(crit), "pointwise")
    d = np.diag(pooled.specific_covariance)
    plug_between = between_plug_in(pooled, between)
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
