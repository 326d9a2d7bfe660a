"""ARP confidence sets over unions of general polyhedra: the sign and monotonicity variants.

A restriction ``Delta`` is a union of polyhedra ``{delta : A delta <= d}`` (one for smoothness,
one per pre-treatment difference and sign for relative magnitudes). Intersecting it with a sign
restriction (``delta_post >= 0`` or ``<= 0``: the bias of the post-treatment estimates has a
known sign) or a monotonicity restriction (the violation path increases or decreases after
treatment) adds rows to every polyhedron; the closed form of ``_relative`` no longer applies, so
each polyhedron is tested by the general route of ``_arp``: the dual vertices when they are few
enough to list, otherwise one linear program per optimal basis along the grid of ``theta``.

As in R ``HonestDiD`` (``postPeriodMomentsOnly = TRUE``), the tests use only the rows that
involve a post-treatment estimate.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, optimize

from ._arp import (DualVertices, LeastFavourable, conditional_test_line, dual_vertices,
                   vertex_test_line)
from ._grid import GridInversion
from ._relative import differences



def sign_rows(n_pre: int, n_post: int, direction: str) -> np.ndarray:
    """``A`` of ``delta_post >= 0`` (``"positive"``) or ``<= 0`` (``"negative"``)."""
    rows = np.zeros((n_post, n_pre + n_post))
    rows[:, n_pre:] = -np.eye(n_post)
    return rows if direction == "positive" else -rows


def monotone_rows(n_pre: int, n_post: int, direction: str) -> np.ndarray:
    """``A`` of a violation path that increases (or decreases) from the reference period on:
    ``delta_0 >= 0`` and ``delta_t >= delta_{t-1}`` (the pre-treatment rows, which involve no
    post-treatment estimate, are left out as R does)."""
    rows = -differences(n_pre, n_post)[n_pre:]
    return rows if direction == "increasing" else -rows


def smoothness_rows(n_pre: int, n_post: int) -> np.ndarray:
    """``A`` of ``|second difference| <= M`` at every period whose second difference involves a
    post-treatment estimate (``+`` rows, then ``-`` rows); ``d = M``."""
    first = differences(n_pre, n_post)
    second = first[1:] - first[:-1]
    second = second[np.any(second[:, n_pre:] != 0, axis=1)]
    return np.vstack([second, -second])


class PolyhedraUnion(GridInversion):
    """The ARP confidence set of ``l' tau_post`` when ``delta`` lies in a union of polyhedra.

    Parameters
    ----------
    beta, sigma, n_pre, l_post, alpha
        As for :class:`didmem.honest._relative.RelativeMagnitudes`: the estimates (reference
        period left out) and their covariance, the number of pre-treatment estimates, the
        target's post-treatment weights and one minus the coverage.
    pieces : callable
        ``pieces(m)``: a list of ``(A, d)``, the polyhedra ``A delta <= d`` at bound ``m``.
    hybrid, grid_points, simulations, seed
        As for :class:`didmem.honest._relative.RelativeMagnitudes`.
    """

    def __init__(self, beta, sigma, n_pre, l_post, alpha, pieces, hybrid=True,
                 grid_points=1000, simulations=1000, seed=0):
        self.beta, self.sigma = np.asarray(beta, float), np.asarray(sigma, float)
        self.n_pre, self.l_post, self.alpha = int(n_pre), np.asarray(l_post, float), alpha
        self.pieces = pieces
        self.hybrid, self.grid_points = hybrid, int(grid_points)
        self.simulations, self.seed = int(simulations), int(seed)
        self.kappa = alpha / 10 if hybrid else 0.0
        self.a_theta = self.l_post / float(self.l_post @ self.l_post)
        self.null = linalg.null_space(self.l_post[None, :]) if self.l_post.size > 1 \
            else np.zeros((1, 0))
        self.sd_theta = float(np.sqrt(self.l_post @ self.sigma[n_pre:, n_pre:] @ self.l_post))
        self._cache = {}
        self._known = {}  # (m, polyhedron): the dual vertices its programs have met
        self._favourite = 0  # the polyhedron that last accepted a theta
        self._last_lf = {}  # polyhedron: its critical value at the bound met last

    def _tests(self, m):
        """For each polyhedron: ``(A, d, y0, a_theta, x, sigma_y, vertices, lf)`` on the rows
        that involve a post-treatment estimate (``lf`` the least-favourable critical value)."""
        return [(*problem[:7], None if lf is None else lf.value)
                for *problem, lf in self._problems(m)]

    def _problems(self, m):
        """:meth:`_tests` with each critical value a :class:`~._arp.LeastFavourable`, computed
        when first needed."""
        key = float(m)
        if key not in self._cache:
            out = []
            for a, d in self.pieces(m):
                keep = np.any(a[:, self.n_pre:] != 0, axis=1)
                a, d = a[keep], np.asarray(d, float)[keep]
                a_post = a[:, self.n_pre:]
                x = a_post @ self.null
                sig = a @ self.sigma @ a.T
                vertices = dual_vertices(np.column_stack([np.sqrt(np.diag(sig)), x]))
                lf = None
                if self.hybrid:  # the same draws at every bound: the last bound's top first
                    lf = LeastFavourable(x, sig, self.kappa, self.simulations, self.seed,
                                         vertices, self._last_lf.get(len(out)))
                    self._last_lf[len(out)] = lf
                out.append((a, d, a @ self.beta - d, a_post @ self.a_theta, x, sig, vertices,
                            lf))
            self._cache[key] = out
        return self._cache[key]

    def accepts(self, m, thetas) -> np.ndarray:
        """Which ``theta`` the union of the tests accepts at bound ``m``.

        The polyhedra are tested in turn, the one that last accepted first (the union does not
        depend on the order; a ``theta`` accepted by one is not tested by the others).
        """
        thetas = np.atleast_1d(np.asarray(thetas, float))
        accept = np.zeros(thetas.size, bool)
        problems = self._problems(m)
        order = sorted(range(len(problems)), key=lambda p: p != self._favourite)
        for p in order:
            _, _, y0, a_theta, x, sig, vertices, lf = problems[p]
            todo = ~accept
            if not todo.any():
                break
            if vertices is None:
                known = self._known.setdefault((float(m), p), DualVertices(y0.size))
                rej = conditional_test_line(y0, a_theta, x, sig, self.alpha, thetas[todo], lf,
                                            self.kappa, known)
            else:
                rej = vertex_test_line(y0, a_theta, sig, vertices, self.alpha, thetas[todo],
                                       None if lf is None else lf.value, self.kappa)
            if not rej.all():
                self._favourite = p
            accept[np.flatnonzero(todo)[~rej]] = True
        return accept

    def accepted_ends(self, m, thetas) -> tuple[int, int] | None:
        """:meth:`GridInversion.accepted_ends`, testing from each end of the grid inwards and
        stopping at the first accepted point: the points between are never tested (the
        union's test costs programs at every point the linear programs decide)."""
        thetas = np.asarray(thetas, float)
        n = thetas.size
        first = self._scan(m, thetas, np.arange(n))
        if first is None:
            return None
        last = self._scan(m, thetas, np.arange(n - 1, first, -1))
        return first, (first if last is None else last)

    def _scan(self, m, thetas, order, block=16):
        """The first index of ``order`` whose ``theta`` is accepted (``None`` when none is),
        testing in blocks of growing size."""
        start = 0
        while start < order.size:
            chunk = order[start:start + block]
            hit = np.flatnonzero(self.accepts(m, thetas[chunk]))
            if hit.size:
                return int(chunk[hit[0]])
            start += block
            block *= 2
        return None

    def identified_bounds(self, m):
        """The identified set of ``l' tau`` at ``beta`` (union over the polyhedra; ``None``
        when every polyhedron is empty there)."""
        lo, hi = [], []
        n_post = self.l_post.size
        for a, d, *_ in self._problems(m):
            # A (beta - (0, tau)) <= d  <=>  -A_post tau <= d - A beta
            ends = []
            for sense in (1.0, -1.0):
                res = optimize.linprog(sense * self.l_post, A_ub=-a[:, self.n_pre:],
                                       b_ub=d - a @ self.beta, bounds=[(None, None)] * n_post,
                                       method="highs")
                if res.status != 0:
                    break
                ends.append(sense * res.fun)
            if len(ends) == 2:
                lo.append(ends[0])
                hi.append(ends[1])
        return (min(lo), max(hi)) if lo else None

    def grid(self, m):
        """A ``theta`` grid around the identified set at ``beta``, 20 sd beyond each end."""
        bounds = self.identified_bounds(m)
        centre = float(self.l_post @ self.beta[self.n_pre:])
        lo, hi = bounds if bounds is not None else (centre, centre)
        return np.linspace(lo - 20 * self.sd_theta, hi + 20 * self.sd_theta, self.grid_points)


def relative_magnitudes_pieces(n_pre, n_post, extra):
    """``pieces(mbar)`` of ``Delta^RM(mbar)`` intersected with the rows ``extra``."""
    from ._relative import polyhedra

    def pieces(mbar):
        out = []
        for _, a in polyhedra(n_pre, n_post, mbar):
            rows = np.vstack([a, extra])
            out.append((rows, np.zeros(rows.shape[0])))
        return out
    return pieces


def smoothness_pieces(n_pre, n_post, extra):
    """``pieces(m)`` of ``Delta^SD(m)`` intersected with the rows ``extra``."""
    sd = smoothness_rows(n_pre, n_post)

    def pieces(m):
        rows = np.vstack([sd, extra])
        return [(rows, np.concatenate([np.full(sd.shape[0], float(m)),
                                       np.zeros(extra.shape[0])]))]
    return pieces
