"""Closed-form variances of the target's keys and the Gaussian sup-t critical value.

Without covariates and with equal weights, every cell of :class:`~didmem.DiDEstimator`
(never-treated controls, varying base period) is

    tau_hat(g, t) = (mean_g Y_t - mean_g Y_b) - (mean_C Y_t - mean_C Y_b),

a contrast of group means. A key of an aggregation is a linear combination of cells, so it is
``sum_groups L[group] . mean_group Y`` and, with independent units whose outcome vector over
the checkpoints has covariance ``Sigma``,

    Cov(key_a, key_b) = sum_groups L_a[group]' Sigma L_b[group] / n_group.

Only the never-treated group is shared between cohorts, which is what correlates the keys.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import nct, norm

from ..inference.bands import normal_quantile
from ..inference.small_sample import normal_level, t_critical_values, welch_correction

__all__ = ["key_contrasts", "key_covariance_parts", "sup_t_critical", "analytic_power",
           "welch_df", "small_sample_critical", "t_power"]


def key_contrasts(cohort_pos: np.ndarray, n_times: int, aggregation: str) -> np.ndarray:
    """Coefficients ``L`` (keys x groups x times) of the target's keys on group means.

    ``cohort_pos`` are the positions (in the kept checkpoints) of the treated cohorts, each
    at least 1; group ``j < n_cohorts`` is cohort ``j`` and the last group is the control.
    ``aggregation`` is ``"instantaneous"``, ``"persistent"`` or ``"simple"``; the cohorts have equal
    sizes, so cohort-share weights are equal.
    """
    n_c = cohort_pos.size

    def cell(g_idx, t):
        out = np.zeros((n_c + 1, n_times))
        b = cohort_pos[g_idx] - 1
        out[g_idx, t] += 1.0
        out[g_idx, b] -= 1.0
        out[n_c, t] -= 1.0
        out[n_c, b] += 1.0
        return out

    keys = []
    if aggregation == "instantaneous":
        keys = [cell(j, cohort_pos[j]) for j in range(n_c)]
    elif aggregation == "persistent":
        for e in range(1, n_times):
            members = [cell(j, cohort_pos[j] + e) for j in range(n_c) if cohort_pos[j] + e < n_times]
            if members:
                keys.append(np.mean(members, axis=0))
    else:  # simple: all post-treatment cells, equal weights
        members = [cell(j, t) for j in range(n_c) for t in range(cohort_pos[j], n_times)]
        keys = [np.mean(members, axis=0)]
    return np.array(keys)


def key_covariance_parts(L: np.ndarray, sigma: np.ndarray):
    """The covariance of the keys per treated unit and per control unit.

    Returns ``(treated, control)`` with ``Cov = treated / n_per_cohort + control / n_control``.
    """
    a = np.einsum("kgt,ts->kgs", L, sigma)
    treated = np.einsum("kgs,jgs->kj", a[:, :-1], L[:, :-1])
    control = a[:, -1] @ L[:, -1].T
    return treated, control


def sup_t_critical(cov: np.ndarray, alpha: float, rng, n_draws: int = 20000) -> float:
    """The ``1 - alpha`` quantile of ``max_k |Z_k|``, ``Z ~ N(0, corr(cov))``, by simulation.

    Never below the normal quantile (R did's ``aggte`` falls back to pointwise intervals
    there); with one key it is the normal quantile.
    """
    z = normal_quantile(1 - alpha / 2)
    if cov.shape[0] == 1:
        return float(z)
    sd = np.sqrt(np.diag(cov))
    corr = cov / np.outer(sd, sd)
    vals, vecs = np.linalg.eigh(corr)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    draws = rng.standard_normal((n_draws, corr.shape[0])) @ root.T
    return float(max(np.quantile(np.abs(draws).max(axis=1), 1 - alpha), z))


def analytic_power(effect: np.ndarray, se: np.ndarray, crit: float) -> float:
    """Average over keys of ``P(|N(effect, se^2)| > crit * se)``."""
    shift = np.abs(effect) / se
    return float(np.mean(norm.cdf(shift - crit) + norm.cdf(-shift - crit)))


def welch_df(treated: np.ndarray, control: np.ndarray, u: int, v: int) -> np.ndarray:
    """Welch-Satterthwaite degrees of freedom of keys whose variance is ``treated + control``
    (the treated part estimated from ``u`` units per cohort, the control part from ``v``).

    The estimator corrects each cohort's block separately; taking the treated part as one
    block of ``u`` units gives fewer degrees of freedom for keys that average cohorts, so the
    planned power errs low there.
    """
    treated, control = np.asarray(treated, float), np.asarray(control, float)
    # the inference's own Welch rule, given parts that it scales by n / (n - 1) back to these
    _, df = welch_correction(treated * (u - 1) / u, control * (v - 1) / v,
                             np.full(treated.shape, u), np.full(control.shape, v))
    return np.where(np.isnan(df), np.inf, df)


def small_sample_critical(crit: float, df: np.ndarray) -> np.ndarray:
    """Each key's t quantile at the pointwise level of a normal-scale critical value, as the
    estimator's small-sample band takes it (:mod:`didmem.inference.small_sample`)."""
    return t_critical_values(normal_level(crit), df)


def t_power(effect: np.ndarray, se: np.ndarray, crit: np.ndarray, df: np.ndarray) -> float:
    """Average over keys of ``P(|T| > crit)``, ``T`` noncentral t with ``df`` and
    noncentrality ``effect / se`` (the studentised key under the small-sample band)."""
    shift = np.abs(np.asarray(effect, float)) / se
    with np.errstate(all="ignore"):
        upper = nct.sf(crit, df, shift)
        lower = nct.cdf(-crit, df, shift)
    # far in the tails scipy's noncentral t returns NaN: the normal limit is exact enough there
    upper = np.where(np.isfinite(upper), upper, norm.cdf(shift - crit))
    lower = np.where(np.isfinite(lower), lower, norm.cdf(-shift - crit))
    return float(np.mean(upper + lower))
