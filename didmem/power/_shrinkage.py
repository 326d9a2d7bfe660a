"""The pilot's key effects shrunk towards their pooled mean (empirical Bayes), with draws.

A pilot estimates each key's effect (a cohort's instantaneous effect, an event time's
persistent effect) with noise. Power is convex in the effect where it is small, so planning
at the noisy estimates overstates it on average (Jensen's inequality): with a pilot of 8
cohorts x 30 instances and a true effect of 0.5, planned power at the pilot's own estimates
was 0.06 / 0.25 / 0.39 where the estimator's Monte Carlo power is 0.03 / 0.15 / 0.35.

The normal-normal model: ``est_k ~ N(tau_k, s_k^2)`` with ``tau_k ~ N(mu, A)``. ``A`` is the
method-of-moments (DerSimonian & Laird 1986) estimate of the between-key variance, ``mu`` the
precision-weighted mean; the posterior mean of ``tau_k`` is
``mu + (1 - B_k) (est_k - mu)``, ``B_k = s_k^2 / (s_k^2 + A)`` (Efron & Morris 1975). With no
evidence of heterogeneity (``A = 0``) every key is planned at the pooled mean. Draws of the
effects from their posterior (``mu`` drawn from its sampling distribution, then each
``tau_k`` given ``mu``) give an interval of the planned power that reflects the pilot's
size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ShrunkEffects", "shrink"]


@dataclass(frozen=True)
class ShrunkEffects:
    """Posterior means of the key effects, and what is needed to draw from the posterior."""

    estimates: np.ndarray  # the pilot's own estimates
    std_errors: np.ndarray
    mean: float  # pooled mean mu
    mean_se: float
    between_var: float  # A
    posterior_mean: np.ndarray

    def draws(self, n: int, rng) -> np.ndarray:
        """``n`` draws (n x keys) of the key effects from their posterior."""
        mu = self.mean + self.mean_se * rng.standard_normal((n, 1))
        keep = self._keep()
        centre = mu + keep * (self.estimates - mu)
        sd = self.std_errors * np.sqrt(keep)
        return centre + sd * rng.standard_normal((n, self.estimates.size))

    def _keep(self) -> np.ndarray:
        """``1 - B_k``: the share of a key's deviation from the mean that is kept."""
        s2 = self.std_errors ** 2
        if np.isinf(self.between_var):  # nothing to pool: each key keeps its estimate
            return np.ones_like(s2)
        with np.errstate(invalid="ignore", divide="ignore"):
            keep = self.between_var / (s2 + self.between_var)
        return np.where(s2 > 0, keep, 1.0)  # a key without a standard error keeps its own


def shrink(estimates, std_errors) -> ShrunkEffects:
    """Empirical-Bayes posterior means of key effects estimated with the given errors.

    Keys without a finite standard error keep their estimate out of the pooling; with one
    key (the overall effect) there is nothing to pool, and the key keeps its estimate.
    """
    est = np.asarray(estimates, float)
    se = np.asarray(std_errors, float)
    ok = np.isfinite(est) & np.isfinite(se) & (se > 0)
    full_se = np.where(ok, se, 0.0)
    if ok.sum() < 2:
        return ShrunkEffects(est, full_se, float(np.nanmean(est)), 0.0, np.inf, est.copy())
    e, s2 = est[ok], se[ok] ** 2
    w = 1.0 / s2
    fixed = float(w @ e / w.sum())
    q = float(w @ (e - fixed) ** 2)
    denom = float(w.sum() - (w ** 2).sum() / w.sum())
    between = max(0.0, (q - (e.size - 1)) / denom) if denom > 0 else 0.0
    w_star = 1.0 / (s2 + between)
    mean = float(w_star @ e / w_star.sum())
    mean_se = float(np.sqrt(1.0 / w_star.sum()))
    unshrunk = ShrunkEffects(est, full_se, mean, mean_se, between, est)
    posterior = mean + unshrunk._keep() * (est - mean)
    return ShrunkEffects(est, full_se, mean, mean_se, between, posterior)
