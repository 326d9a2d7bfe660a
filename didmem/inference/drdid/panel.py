"""Sant'Anna & Zhao's (2020) two-period panel estimators of the ATT with covariates.

Plain numpy, one 2x2 comparison at a time: the readable statement of the formulas and the
test oracle of the compiled per-cell kernel in :mod:`didmem.inference.covariates.cells`. Each
function follows R ``DRDID`` (``reg_did_panel``, ``std_ipw_did_panel``, ``drdid_panel``)
and returns the ATT and its influence function on DRDID's scale, ``IF`` with
``var(ATT) ~ mean(IF**2) / n``; didmem's per-unit ``psi`` is ``IF / n``. The influence
functions include the estimation effect of the nuisance models (OLS outcome regression on
the controls, logistic propensity score).

Inputs: ``dy`` outcome changes, ``d`` 1 for treated and 0 for controls, ``x`` the covariates
with an intercept column, ``w`` sampling weights (normalised here to mean 1, as DRDID does).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = ["reg_did_panel", "std_ipw_did_panel", "drdid_panel", "logit_fit", "TRIM_LEVEL"]

TRIM_LEVEL = 0.995  # controls with a propensity score at or above it get weight 0 (DRDID)
OVERLAP_LEVEL = 0.999  # R did's overlap check: a fitted propensity score at or above it
PS_CAP = 1 - 1e-6  # propensity scores are capped here (DRDID)


def logit_fit(x, d, w, *, max_iter=50, tol=1e-10):
    """Weighted logistic regression by Newton-Raphson (R ``glm(binomial)``'s solution).

    Returns
    -------
    beta : ndarray
    ps : ndarray
        Fitted probabilities (uncapped).
    converged : bool
    """
    beta = np.zeros(x.shape[1])
    # R's glm starts from mu = (w y + 0.5) / (w + 1); any start gives the same optimum.
    converged = False
    dev_old = np.inf
    for _ in range(max_iter):
        ps = expit(x @ beta)
        info = x.T @ ((w * ps * (1 - ps))[:, None] * x)
        try:
            beta = beta + np.linalg.solve(info, x.T @ (w * (d - ps)))
        except np.linalg.LinAlgError:  # separated: the information matrix vanished
            break
        eta = x @ beta
        dev = float(np.sum(w * (np.logaddexp(0, eta) - d * eta)))
        if abs(dev - dev_old) <= tol * (abs(dev) + 0.1):
            converged = True
            break
        dev_old = dev
    return beta, expit(x @ beta), converged


def _ols_on_controls(dy, d, x, w):
    wc = w * (1 - d)
    xtx = x.T @ (wc[:, None] * x)
    beta = np.linalg.solve(xtx, x.T @ (wc * dy))
    fitted = x @ beta
    # asymptotic linear representation of beta: w_i (1-d_i) e_i x_i' (X'WX / n)^{-1}
    alr = (wc * (dy - fitted))[:, None] * x @ np.linalg.inv(xtx / dy.size)
    return fitted, alr


def _pscore(d, x, w, trim_level):
    _, ps, _ = logit_fit(x, d, w)
    return _pscore_parts(ps, d, x, w, trim_level)


def _pscore_parts(ps, d, x, w, trim_level):
    """From fitted propensity scores: the capped scores, the rows kept by DRDID's trimming,
    the asymptotic linear representation of the logit coefficients and the largest score."""
    max_ps = float(ps.max())
    ps = np.minimum(ps, PS_CAP)
    keep = np.where(d == 1, True, ps < trim_level)
    info = x.T @ ((w * ps * (1 - ps))[:, None] * x)
    # asymptotic linear representation of the logit coefficients: score x (info / n)^{-1}
    alr = (w * (d - ps))[:, None] * x @ np.linalg.inv(info / d.size)
    return ps, keep, alr, max_ps


def _normalised(w):
    w = np.asarray(w, dtype=np.float64)
    return w / w.mean()


def reg_did_panel(dy, d, x, w):
    """Outcome-regression DiD (Heckman, Ichimura & Todd 1997): ATT and influence function."""
    w = _normalised(w)
    fitted, alr = _ols_on_controls(dy, d, x, w)
    w_treat = w * d
    eta_treat = np.mean(w_treat * dy) / np.mean(w_treat)
    eta_cont = np.mean(w_treat * fitted) / np.mean(w_treat)
    att = eta_treat - eta_cont
    inf_treat = w_treat * (dy - eta_treat) / np.mean(w_treat)
    m1 = np.mean(w_treat[:, None] * x, axis=0)
    inf_cont = (w_treat * (fitted - eta_cont) + alr @ m1) / np.mean(w_treat)
    return att, inf_treat - inf_cont


def std_ipw_did_panel(dy, d, x, w, trim_level=TRIM_LEVEL):
    """Normalised (Hajek) inverse-probability-weighted DiD (Abadie 2005): ATT and IF.

    Returns ``att, inf, n_trimmed, max_ps`` (controls trimmed, largest fitted score).
    """
    w = _normalised(w)
    ps, keep, alr, max_ps = _pscore(d, x, w, trim_level)
    w_treat = keep * w * d
    w_cont = keep * w * ps * (1 - d) / (1 - ps)
    eta_treat = np.mean(w_treat * dy) / np.mean(w_treat)
    eta_cont = np.mean(w_cont * dy) / np.mean(w_cont)
    inf_treat = w_treat * (dy - eta_treat) / np.mean(w_treat)
    inf_cont = w_cont * (dy - eta_cont) / np.mean(w_cont)
    m2 = np.mean((w_cont * (dy - eta_cont))[:, None] * x, axis=0) / np.mean(w_cont)
    inf_cont = inf_cont + alr @ m2
    return eta_treat - eta_cont, inf_treat - inf_cont, int((~keep).sum()), max_ps


def drdid_panel(dy, d, x, w, trim_level=TRIM_LEVEL):
    """Locally efficient doubly robust DiD (Sant'Anna & Zhao 2020): ATT and IF.

    Returns ``att, inf, n_trimmed, max_ps`` (controls trimmed, largest fitted score).
    """
    w = _normalised(w)
    ps, keep, alr_ps, max_ps = _pscore(d, x, w, trim_level)
    fitted, alr_ols = _ols_on_controls(dy, d, x, w)
    resid = dy - fitted
    w_treat = keep * w * d
    w_cont = keep * w * ps * (1 - d) / (1 - ps)
    eta_treat = np.mean(w_treat * resid) / np.mean(w_treat)
    eta_cont = np.mean(w_cont * resid) / np.mean(w_cont)
    m1 = np.mean(w_treat[:, None] * x, axis=0)
    inf_treat = (w_treat * (resid - eta_treat) - alr_ols @ m1) / np.mean(w_treat)
    m2 = np.mean((w_cont * (resid - eta_cont))[:, None] * x, axis=0)
    m3 = np.mean(w_cont[:, None] * x, axis=0)
    inf_cont = (w_cont * (resid - eta_cont) + alr_ps @ m2 - alr_ols @ m3) / np.mean(w_cont)
    return eta_treat - eta_cont, inf_treat - inf_cont, int((~keep).sum()), max_ps
