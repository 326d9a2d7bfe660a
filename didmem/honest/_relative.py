"""Confidence sets under relative magnitudes ``Delta^RM(Mbar)`` (Rambachan & Roth 2023, 4.2).

``Delta^RM(Mbar)``: every post-treatment first difference of the violation is at most ``Mbar``
times the largest pre-treatment one in absolute value. It is the union over the pre-treatment
difference ``s`` that attains the maximum and its sign of the polyhedra
``{delta : |post difference t| <= Mbar * sign * (pre difference s)}``; the confidence set is the
union of the ARP confidence sets for each polyhedron (as in R ``HonestDiD``, only the
post-treatment rows enter the tests), found by inverting the test over a grid of ``theta``.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, optimize

from ._arp import (conditional_test, conditional_test_line, dual_vertices,
                   least_favourable_cv, vertex_test_line)


def polyhedra(n_pre: int, n_post: int, mbar: float):
    """``A`` for each ``(s, sign)``: ``A delta <= 0``, columns the estimates (reference out)."""
    n = n_pre + 1 + n_post  # full path with the reference at index n_pre
    diff = np.zeros((n - 1, n))
    for r in range(n - 1):
        diff[r, r], diff[r, r + 1] = -1.0, 1.0
    post = diff[n_pre:]
    keep = np.arange(n) != n_pre
    out = []
    for s in range(n_pre):
        for sign in (1.0, -1.0):
            bound = mbar * sign * diff[s]
            a = np.vstack([post - bound, -post - bound])[:, keep]
            out.append(((s, sign), a))
    return out


def identified_bounds(beta, n_pre, l_post, a):
    """The identified set of ``l' tau`` at ``beta`` for one polyhedron (``None`` if empty)."""
    n_post = l_post.size
    rhs = -a[:, :n_pre] @ beta[:n_pre]
    ends = []
    for sense in (1.0, -1.0):
        res = optimize.linprog(sense * l_post, A_ub=a[:, n_pre:], b_ub=rhs,
                               bounds=[(None, None)] * n_post, method="highs")
        if res.status == 2:
            return None
        if res.status != 0:
            raise RuntimeError(f"The identified-set program failed: {res.message}")
        ends.append(float(l_post @ beta[n_pre:]) - sense * res.fun)
    # minimising l' delta gives the upper end of theta, maximising the lower
    return min(ends), max(ends)


class RelativeMagnitudes:
    """The ARP confidence set of ``l' tau_post`` under ``Delta^RM(Mbar)``.

    Parameters
    ----------
    beta, sigma : ndarray
        Estimates (reference period left out, pre first) and their covariance.
    n_pre : int
        Number of pre-treatment estimates.
    l_post : ndarray
        The target's weights on the post-treatment estimates.
    alpha : float
        One minus the coverage.
    hybrid : bool
        The conditional-least-favourable hybrid (``kappa = alpha / 10``) rather than the
        conditional test.
    grid_points : int
        Points of the ``theta`` grid.
    simulations, seed : int
        Draws and seed of the least-favourable critical value (hybrid only).
    """

    def __init__(self, beta, sigma, n_pre, l_post, alpha, hybrid=True, grid_points=1000,
                 simulations=1000, seed=0):
        if n_pre < 1:
            raise ValueError("Relative magnitudes need at least one pre-treatment estimate "
                             "besides the reference period.")
        self.beta, self.sigma = np.asarray(beta, float), np.asarray(sigma, float)
        self.n_pre, self.l_post, self.alpha = int(n_pre), np.asarray(l_post, float), alpha
        self.hybrid, self.grid_points = hybrid, int(grid_points)
        self.simulations, self.seed = int(simulations), int(seed)
        self.kappa = alpha / 10 if hybrid else 0.0
        n_post = self.l_post.size
        # tau = l theta / l'l + N g: the nuisance g spans the complement of l
        self.a_theta = self.l_post / float(self.l_post @ self.l_post)
        self.null = linalg.null_space(self.l_post[None, :]) if n_post > 1 \
            else np.zeros((1, 0))
        self.sd_theta = float(np.sqrt(self.l_post @ self.sigma[n_pre:, n_pre:] @ self.l_post))

    def _pieces(self, mbar):
        for key, a in polyhedra(self.n_pre, self.l_post.size, mbar):
            a_post = a[:, self.n_pre:]
            sig = a @ self.sigma @ a.T
            lf = None
            if self.hybrid:
                lf = least_favourable_cv(a_post @ self.null, sig, self.kappa,
                                         self.simulations, self.seed)
            yield key, a, a_post @ self.a_theta, a_post @ self.null, sig, lf

    def accepts(self, mbar, thetas) -> np.ndarray:
        """Which ``theta`` the union of the tests accepts under ``Delta^RM(mbar)``."""
        thetas = np.atleast_1d(np.asarray(thetas, float))
        accept = np.zeros(thetas.size, bool)
        for _, a, a_theta, x, sig, lf in self._pieces(mbar):
            todo = ~accept
            if not todo.any():
                break
            vertices = dual_vertices(np.column_stack([np.sqrt(np.diag(sig)), x]))
            if vertices is None:
                rej = conditional_test_line(a @ self.beta, a_theta, x, sig, self.alpha,
                                            thetas[todo], lf, self.kappa)
            else:
                rej = vertex_test_line(a @ self.beta, a_theta, sig, vertices, self.alpha,
                                       thetas[todo], lf, self.kappa)
            accept[np.flatnonzero(todo)[~rej]] = True
        return accept

    def grid(self, mbar):
        """A ``theta`` grid around the identified set at ``beta``, 20 sd beyond each end."""
        lo, hi = [], []
        for _, a in polyhedra(self.n_pre, self.l_post.size, mbar):
            b = identified_bounds(self.beta, self.n_pre, self.l_post, a)
            if b is not None:
                lo.append(b[0])
                hi.append(b[1])
        centre = float(self.l_post @ self.beta[self.n_pre:])
        lo = min(lo, default=centre) - 20 * self.sd_theta
        hi = max(hi, default=centre) + 20 * self.sd_theta
        return np.linspace(lo, hi, self.grid_points)

    def interval(self, mbar, thetas=None) -> tuple[float, float]:
        """``(lower, upper)``: the smallest and largest accepted grid points (NaN if none).

        The default grid is widened (doubled about its centre) while an end point is accepted.
        """
        fixed = thetas is not None
        thetas = self.grid(mbar) if thetas is None else np.asarray(thetas, float)
        for _ in range(6):
            acc = self.accepts(mbar, thetas)
            if not acc.any():
                return float("nan"), float("nan")
            if fixed or not (acc[0] or acc[-1]):
                break
            mid, half = 0.5 * (thetas[0] + thetas[-1]), thetas[-1] - thetas[0]
            thetas = np.linspace(mid - half, mid + half, self.grid_points)
        return float(thetas[acc][0]), float(thetas[acc][-1])

    def covers_zero(self, mbar) -> bool:
        """Is ``theta = 0`` accepted under ``Delta^RM(mbar)``? (no grid needed)."""
        for _, a, a_theta, x, sig, lf in self._pieces(mbar):
            if not conditional_test(a @ self.beta, x, sig, self.alpha, lf, self.kappa):
                return True
        return False
