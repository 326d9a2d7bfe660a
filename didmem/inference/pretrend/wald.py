"""R ``did``'s Wald pre-test over thousands of cells, without the dense covariance.

With never-treated controls and no covariates, the influence function of a pre-treatment
cell ``c`` of cohort ``k`` is ``w_i a_c' z_i`` on cohort ``k``'s units and ``w_i b_c' z_i``
on the never-treated ones, with ``z_i = (y_i, 1)``, ``a_c = (e_t - e_b - mu1 e_1) / W1`` and
``b_c = -(e_t - e_b - mu0 e_1) / W0``. The covariance of the cells is therefore

.. math:: V = D + F F',

``D`` block diagonal (one block ``A_k' G_k A_k`` per cohort, ``G_k`` the weighted Gram
matrix of its units' ``z``) and ``F = B' Q \\Lambda^{1/2}`` from the never-treated Gram matrix
``G = Q \\Lambda Q'``, of rank at most ``T + 1``. The statistic ``tau' V^{-1} tau`` follows
from the blocks' Cholesky factors and the Woodbury identity,

.. math:: V^{-1} = D^{-1} - D^{-1} F (I + F' D^{-1} F)^{-1} F' D^{-1},

in ``O(sum_k p_k^3 + p (T + 1)^2)`` operations instead of ``O(p^3)`` (at the paper's scale,
``p = 4,465`` cells in blocks of at most 94 and ``T + 1 = 97``).

R declares the test unavailable when ``rcond(V) <= eps``. Here ``V >= D`` (``F F'`` is
positive semi-definite), so ``||V^{-1}||_2 <= 1 / lambda_min(D)`` and
``||V||_2 <= lambda_max(D) + ||F||_2^2``; with ``p`` for the change from the 2-norm to the
1-norm, ``rcond_1(V) >= lambda_min(D) / (p (lambda_max(D) + ||F||_2^2))``. When that bound
exceeds ``eps``, R's check passes too (LAPACK's estimate of ``rcond`` is never below the true
value); otherwise :func:`structured_wald` returns None and the caller takes the dense route,
whose check is R's.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

__all__ = ["structured_wald", "STRUCTURED_MIN_CELLS"]

STRUCTURED_MIN_CELLS = 400
"""Fewer pre-treatment cells than this take the dense route (R's computation, exactly)."""


def _coefficients(n_z: int, t, b, mu, scale) -> np.ndarray:
    """Columns ``(e_t - e_b - mu e_const) / scale`` (no base term where ``b < 0``)."""
    cols = np.arange(t.size)
    out = np.zeros((n_z, t.size))
    out[t, cols] = 1.0
    has_base = b >= 0
    out[b[has_base], cols[has_base]] -= 1.0
    out[-1, cols] = -mu
    return out / scale


def applies(prepared, cells, which: np.ndarray, influence) -> bool:
    """Whether the cells ``which`` have the structure :func:`structured_wald` uses."""
    return (influence.cohort_moments and prepared.clusters is None  # clustered: dense route
            and which.size >= STRUCTURED_MIN_CELLS
            and bool(np.all(cells.cs[which] == prepared.n_cohorts))
            and bool(np.all(cells.k[which] < prepared.n_cohorts)))


def structured_wald(prepared, cells, stats, which: np.ndarray, estimates: np.ndarray,
                    gram) -> float | None:
    """``tau' V^{-1} tau`` over the cells ``which`` from the structure of ``V``.

    Parameters
    ----------
    design, cells, stats
        The fit's prepared panel, cell layout and grouped statistics (``mu1``, ``mu0``,
        ``w1``, ``w0``).
    which : ndarray of int
        The cells tested (pre-treatment cells with a standard error); every one must have
        never-treated controls only (:func:`applies`).
    estimates : ndarray
        The estimates of the cells ``which``.
    gram : callable
        ``gram(block)``: ``sum_i w_i**2 z_i z_i'`` over the units of a block, ``z_i = (y_i,
        1)`` in the outcome ``stats`` are in (from the blocks' moments:
        :meth:`~didmem.inference.moments.cells.MomentsInfluence.z_gram`).

    Returns
    -------
    float or None
        The statistic; None when the bound on ``rcond(V)`` does not show that ``V`` passes
        R's check (the caller then takes the dense route and its check).
    """
    order = np.argsort(cells.k[which], kind="stable")
    cell = which[order]
    k, t, b = cells.k[cell], cells.t[cell], cells.b[cell]
    mu1, mu0 = stats["mu1"][cell], stats["mu0"][cell]
    w1, w0 = stats["w1"][cell], stats["w0"][cell]
    tau = np.asarray(estimates, dtype=np.float64)[order]
    control = gram(prepared.n_cohorts)
    n_z, p = control.shape[0], cell.size
    if not (np.all(np.isfinite(control)) and np.all(np.isfinite(tau))):
        return None
    lam, q = linalg.eigh(control)
    f = _coefficients(n_z, t, b, mu0, -w0).T @ (q * np.sqrt(np.clip(lam, 0.0, None)))
    d_inv_tau = np.empty(p)
    d_inv_f = np.empty_like(f)
    lam_min, lam_max = np.inf, 0.0
    bounds = np.flatnonzero(np.diff(k)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, p]):
        a = _coefficients(n_z, t[lo:hi], b[lo:hi], mu1[lo:hi], w1[lo:hi])
        block = a.T @ gram(int(k[lo])) @ a
        if not np.all(np.isfinite(block)):
            return None
        eig = linalg.eigvalsh(block)
        # a block of a cohort with fewer units than tested cells is singular; rounding can
        # leave its smallest eigenvalue a hair above zero, where Cholesky fails or does not
        # depending on the machine's LAPACK: such a block goes to the dense route and its check
        if not eig[0] > block.shape[0] * np.finfo(float).eps * eig[-1]:
            return None
        lam_min, lam_max = min(lam_min, eig[0]), max(lam_max, eig[-1])
        try:
            factor = linalg.cho_factor(block, check_finite=False)
        except linalg.LinAlgError:
            return None
        d_inv_tau[lo:hi] = linalg.cho_solve(factor, tau[lo:hi], check_finite=False)
        d_inv_f[lo:hi] = linalg.cho_solve(factor, f[lo:hi], check_finite=False)
    f_norm2 = float(linalg.eigvalsh(f.T @ f)[-1]) if f.size else 0.0
    if lam_min / (p * (lam_max + f_norm2)) <= np.finfo(float).eps:
        return None
    capacitance = np.eye(f.shape[1]) + f.T @ d_inv_f
    correction = d_inv_f @ linalg.solve(capacitance, f.T @ d_inv_tau, assume_a="pos",
                                        check_finite=False)
    return float(tau @ (d_inv_tau - correction))
