"""Sant'Anna & Zhao's (2020) estimators of the ATT from repeated cross-sections.

Plain numpy, one 2x2 comparison at a time, following R ``DRDID`` (``reg_did_rc``,
``std_ipw_did_rc``, ``drdid_rc``). R ``did`` uses them for every cell of a panel with holes
(``allow_unbalanced_panel = TRUE``) and of repeated cross-sections (``panel = FALSE``):
the rows of the cell's cohort and controls observed at its time (``post = 1``) or at its
base period (``post = 0``), each with its own covariates. Each function returns the ATT
and its influence function per row on DRDID's scale (``var(ATT) ~ mean(IF**2) / n``, ``n``
the cell's rows). On a panel a unit's influence function is the sum over its rows.

Inputs: ``y`` outcomes, ``post`` 1 at the cell's time and 0 at its base period, ``d`` 1 for
the cohort and 0 for the controls, ``x`` the covariates with an intercept column, ``w``
sampling weights (normalised here to mean 1, as DRDID does).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, xlogy

from .panel import TRIM_LEVEL, _normalised, _pscore_parts

__all__ = ["reg_did_rc", "std_ipw_did_rc", "drdid_rc"]


def _ols(y, x, w, rows):
    """Weighted least squares on ``rows``: fitted values on every row and the asymptotic
    linear representation of the coefficients (zero outside ``rows``)."""
    wr = w * rows
    xtx = x.T @ (wr[:, None] * x)
    beta = np.linalg.solve(xtx, x.T @ (wr * y))
    fitted = x @ beta
    alr = (wr * (y - fitted))[:, None] * x @ np.linalg.inv(xtx / y.size)
    return fitted, alr


def _logit_irls(x, d, w, tol=1e-8, max_iter=100):
    """The logistic regression as R ``fastglm`` (DRDID's fitter) iterates it: IRLS from
    R's binomial start ``mu = (w d + 1/2) / (w + 1)``, stopped when the deviance changes by
    less than ``tol`` (``fastglm``'s default) relative to ``0.1 + |deviance|``. Returns the
    fitted probabilities R's estimates are built on; with weights they can differ from the
    exact optimum in the eighth digit, which R's results carry."""
    mu = (w * d + 0.5) / (w + 1.0)
    eta = np.log(mu / (1.0 - mu))
    mu = expit(eta)

    def deviance(mu):
        return float(np.sum(2.0 * w * (xlogy(d, d / mu) + xlogy(1 - d, (1 - d) / (1 - mu)))))

    dev = deviance(mu)
    for _ in range(max_iter):
        var = mu * (1.0 - mu)
        z = eta + (d - mu) / var
        weight = w * var
        beta = np.linalg.solve(x.T @ (weight[:, None] * x), x.T @ (weight * z))
        eta = x @ beta
        mu = expit(eta)
        dev_old, dev = dev, deviance(mu)
        if abs(dev - dev_old) / (0.1 + abs(dev)) < tol:
            break
    return mu


def _pscore(d, x, w, trim_level):
    return _pscore_parts(_logit_irls(x, d, w), d, x, w, trim_level)


def _hajek(weight, value):
    """A weighted mean's estimate and its influence function (``weight`` per row)."""
    m = np.mean(weight)
    est = np.mean(weight * value) / m
    return est, weight * (value - est) / m


def reg_did_rc(y, post, d, x, w):
    """Outcome-regression DiD for repeated cross-sections: ATT and influence function."""
    w = _normalised(w)
    fit_pre, alr_pre = _ols(y, x, w, (1 - d) * (1 - post))
    fit_post, alr_post = _ols(y, x, w, (1 - d) * post)
    treat_post, inf_treat_post = _hajek(w * d * post, y)
    treat_pre, inf_treat_pre = _hajek(w * d * (1 - post), y)
    w_cont = w * d
    cont, inf_cont = _hajek(w_cont, fit_post - fit_pre)
    m1 = np.mean(w_cont[:, None] * x, axis=0)
    inf_cont = inf_cont + (alr_post - alr_pre) @ m1 / np.mean(w_cont)
    att = (treat_post - treat_pre) - cont
    return att, (inf_treat_post - inf_treat_pre) - inf_cont


def std_ipw_did_rc(y, post, d, x, w, trim_level=TRIM_LEVEL):
    """Normalised inverse-probability-weighted DiD for repeated cross-sections.

    Returns ``att, inf, n_trimmed, max_ps`` (control rows trimmed, largest fitted score).
    """
    w = _normalised(w)
    ps, keep, alr_ps, max_ps = _pscore(d, x, w, trim_level)
    odds = keep * w * ps * (1 - d) / (1 - ps)
    treat_post, inf_tp = _hajek(keep * w * d * post, y)
    treat_pre, inf_tb = _hajek(keep * w * d * (1 - post), y)
    w_cp, w_cb = odds * post, odds * (1 - post)
    cont_post, inf_cp = _hajek(w_cp, y)
    cont_pre, inf_cb = _hajek(w_cb, y)
    m2 = (np.mean((w_cp * (y - cont_post))[:, None] * x, axis=0) / np.mean(w_cp)
          - np.mean((w_cb * (y - cont_pre))[:, None] * x, axis=0) / np.mean(w_cb))
    inf_cont = inf_cp - inf_cb + alr_ps @ m2
    att = (treat_post - treat_pre) - (cont_post - cont_pre)
    return att, (inf_tp - inf_tb) - inf_cont, int((~keep).sum()), max_ps


def drdid_rc(y, post, d, x, w, trim_level=TRIM_LEVEL):
    """Locally efficient doubly robust DiD for repeated cross-sections (Sant'Anna & Zhao
    2020, their estimator with outcome regressions on both groups in both periods).

    Returns ``att, inf, n_trimmed, max_ps`` (control rows trimmed, largest fitted score).
    """
    w = _normalised(w)
    ps, keep, alr_ps, max_ps = _pscore(d, x, w, trim_level)
    fit_c0, alr_c0 = _ols(y, x, w, (1 - d) * (1 - post))
    fit_c1, alr_c1 = _ols(y, x, w, (1 - d) * post)
    fit_t0, alr_t0 = _ols(y, x, w, d * (1 - post))
    fit_t1, alr_t1 = _ols(y, x, w, d * post)
    fit_c = post * fit_c1 + (1 - post) * fit_c0
    resid = y - fit_c
    odds = keep * w * ps * (1 - d) / (1 - ps)
    w_tb, w_tp = keep * w * d * (1 - post), keep * w * d * post
    w_cb, w_cp = odds * (1 - post), odds * post
    w_d = keep * w * d
    treat_pre, inf_tb = _hajek(w_tb, resid)
    treat_post, inf_tp = _hajek(w_tp, resid)
    cont_pre, inf_cb = _hajek(w_cb, resid)
    cont_post, inf_cp = _hajek(w_cp, resid)
    d_post, inf_e1 = _hajek(w_d, fit_t1 - fit_c1)
    dt1_post, inf_e2 = _hajek(w_tp, fit_t1 - fit_c1)
    d_pre, inf_e3 = _hajek(w_d, fit_t0 - fit_c0)
    dt0_pre, inf_e4 = _hajek(w_tb, fit_t0 - fit_c0)
    att = ((treat_post - treat_pre) - (cont_post - cont_pre)
           + (d_post - dt1_post) - (d_pre - dt0_pre))

    def colmean(weight, value=1.0):
        return np.mean((weight * value)[:, None] * x, axis=0)

    m1_post = -colmean(w_tp, post) / np.mean(w_tp)
    m1_pre = -colmean(w_tb, 1 - post) / np.mean(w_tb)
    inf_treat_or = alr_c1 @ m1_post + alr_c0 @ m1_pre
    m2_pre = colmean(w_cb, resid - cont_pre) / np.mean(w_cb)
    m2_post = colmean(w_cp, resid - cont_post) / np.mean(w_cp)
    inf_cont_ps = alr_ps @ (m2_post - m2_pre)
    m3_post = -colmean(w_cp, post) / np.mean(w_cp)
    m3_pre = -colmean(w_cb, 1 - post) / np.mean(w_cb)
    inf_cont_or = alr_c1 @ m3_post + alr_c0 @ m3_pre
    inf_eff = (inf_e1 - inf_e2) - (inf_e3 - inf_e4)
    mom_post = colmean(w_d / np.mean(w_d) - w_tp / np.mean(w_tp))
    mom_pre = colmean(w_d / np.mean(w_d) - w_tb / np.mean(w_tb))
    inf_or = (alr_t1 - alr_c1) @ mom_post - (alr_t0 - alr_c0) @ mom_pre
    inf_treat = inf_tp - inf_tb + inf_treat_or
    inf_cont = inf_cp - inf_cb + inf_cont_ps + inf_cont_or
    return att, inf_treat - inf_cont + inf_eff + inf_or, int((~keep).sum()), max_ps
