"""Conditional and hybrid tests of moment inequalities with nuisance parameters.

Andrews, Roth & Pakes (2023), "Inference for linear conditional moment inequalities", as used
by Rambachan & Roth (2023) for ``Delta^RM``. The null is that some nuisance ``g`` satisfies
``E[y] - X g <= 0`` with ``y ~ N(mu, sigma)``. The statistic is the value of the linear program
``eta = min {e : y - X g <= e * sd}`` (``sd`` the standard deviations of ``y``); the conditional
test compares it with a normal quantile truncated to the range over which the optimal vertex of
the dual program stays optimal; the hybrid first rejects when ``eta`` exceeds the
least-favourable critical value at level ``kappa`` and then runs the conditional test at level
``(alpha - kappa) / (1 - kappa)`` with the truncation capped at that critical value.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np
from scipy import special

from ..errors import EstimationError
from ._lp import linprog

_TOL_DUAL = 1e-6


def eta_program(y, x, sd, primal=False):
    """``(eta, lambda)``: the statistic and the dual weights (non-negative, sum ``lambda sd = 1``);
    with ``primal``, also the minimising nuisance ``g``."""
    k = x.shape[1]
    cost = np.zeros(k + 1)
    cost[0] = 1.0
    res = linprog(cost, np.column_stack([-sd, -x]), -y)
    if not res.ok:
        raise EstimationError(f"The linear program of the moment-inequality test failed: "
                              f"{res.message}")
    if primal:
        return float(res.x[0]), -res.ineqlin_marginals, res.x[1:]
    return float(res.x[0]), -res.ineqlin_marginals


def _dual_value(s, b, c, w):
    """``max_gamma gamma' (s + b c)`` over ``gamma >= 0, w' gamma = e1``, and the maximiser."""
    rhs = np.zeros(w.shape[1])
    rhs[0] = 1.0
    res = linprog(-(s + b * c), a_eq=w.T, b_eq=rhs, free=False)
    if not res.ok:
        raise EstimationError(f"The dual linear program of the conditional test failed: "
                              f"{res.message}")
    return -float(res.fun), res.x


def _dual_truncation(y, sigma, w, gamma, eta, known=None):
    """``(vlo, vup)``: where ``gamma`` stays optimal as ``gamma' y`` moves (ARP Appendix D);
    see :func:`_dual_range`."""
    return _dual_range(y, sigma, w, gamma, eta, known)[:2]


def _dual_range(y, sigma, w, gamma, eta, known=None):
    """``(vlo, vup, g_lo, g_up)``: where ``gamma`` stays optimal as ``gamma' y`` moves (ARP
    Appendix D), and the dual vertices whose lines end that range (``None`` at an infinite end).

    ``g(c) = max_gamma gamma'(s + b c)`` is convex and piecewise linear with ``g(c) >= c`` and
    equality on ``[vlo, vup]``; Newton steps on the supporting lines from either side reach
    the end points in finitely many steps. ``known`` (:class:`DualVertices`), the dual
    vertices met so far: the nearest crossing of a known vertex's line is outside the range or
    on its end, so the first step is taken there; where ``gamma`` is still optimal there, it is
    the end (one program instead of several).
    """
    var = float(gamma @ sigma @ gamma)
    b = sigma @ gamma / var
    s = y - b * float(gamma @ y)
    scale = np.sqrt(var)
    seeds = known.crossings(s, b) if known is not None else ((np.inf, None), (-np.inf, None))
    ends = []
    for side, (start, vertex) in zip((+1.0, -1.0), seeds):
        far = eta + side * 1e4 * scale
        if vertex is not None and side * (far - start) > 0:
            c = start
            value, g = _dual_value(s, b, c, w)
            if known is not None:
                known.add(g)
            if value - c <= 1e-9 * (abs(c) + scale):
                ends.append((c, vertex))
                continue
        else:
            c = far
            value, g = _dual_value(s, b, c, w)
            if known is not None:
                known.add(g)
            if value - c <= 1e-9 * (abs(c) + scale):
                ends.append((side * np.inf, None))
                continue
        for _ in range(200):
            crossing = g
            slope = float(g @ b)
            c = float(g @ s) / (1.0 - slope)
            value, g = _dual_value(s, b, c, w)
            if known is not None:
                known.add(g)
            if value - c <= 1e-9 * (abs(c) + scale):
                break
        ends.append((c, crossing))
    (vup, g_up), (vlo, g_lo) = ends
    return vlo, vup, g_lo, g_up


class DualVertices:
    """Dual vertices ``gamma`` of one statistic's program met so far (rows of ``vertices``).

    Each is feasible for the dual, so ``gamma' y`` bounds the statistic ``eta(y)`` from below
    (weak duality): where the bound exceeds the least-favourable critical value the hybrid
    test rejects without a program. Their lines also bound the conditioning range from outside
    (:func:`_dual_truncation`).
    """

    def __init__(self, n: int, limit: int = 256):
        self.vertices = np.zeros((0, n))
        self.limit = limit

    def add(self, gamma) -> None:
        gamma = np.asarray(gamma, float)
        full = self.vertices.shape[0] >= self.limit
        if full or (self.vertices.size
                    and np.abs(self.vertices - gamma).max(axis=1).min() <= 1e-12):
            return
        self.vertices = np.vstack([self.vertices, gamma])

    def lower(self, ys) -> np.ndarray:
        """A lower bound on ``eta`` for each column of ``ys`` (``-inf`` with no vertex)."""
        return self.lower_new(ys, 0)

    def lower_new(self, ys, start) -> np.ndarray:
        """The bound of :meth:`lower` from the vertices from index ``start`` on."""
        new = self.vertices[start:]
        if not new.size:
            return np.full(ys.shape[1], -np.inf)
        return (new @ ys).max(axis=0)

    def crossings(self, s, b):
        """``((upper, vertex), (lower, vertex))``: the nearest crossings above and below of the
        known vertices' lines ``gamma' s + c gamma' b`` with the line ``c``, and the vertices
        that cross there (``(+/-inf, None)`` where none). Vertices whose slope is within 1e-6
        of one are left out: their crossings are ill-conditioned."""
        none = ((np.inf, None), (-np.inf, None))
        if not self.vertices.size:
            return none
        slope = self.vertices @ b
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = (self.vertices @ s) / (1.0 - slope)
        out = list(none)
        up = np.flatnonzero(slope > 1 + 1e-6)
        if up.size:
            j = up[np.argmin(cross[up])]
            out[0] = (float(cross[j]), self.vertices[j])
        lo = np.flatnonzero(slope < 1 - 1e-6)
        if lo.size:
            j = lo[np.argmax(cross[lo])]
            out[1] = (float(cross[j]), self.vertices[j])
        return tuple(out)


def truncation(y, x, sigma, sd, lam, eta):
    """``(vlo, vup, sigma_b)`` of the conditional test at the statistic ``eta``."""
    k = x.shape[1]
    w = np.column_stack([sd, x])
    basis = lam > _TOL_DUAL
    if basis.sum() == k + 1 and (k == 0 or np.linalg.matrix_rank(x[basis]) == k):
        # primal: the active rows determine eta = v_b' y; the others bound its range
        w_b = w[basis]
        e1 = np.zeros(k + 1)
        e1[0] = 1.0
        v_b = np.zeros(y.size)
        v_b[basis] = np.linalg.solve(w_b.T, e1)
        var = float(v_b @ sigma @ v_b)
        rest = ~basis
        if not rest.any():
            return -np.inf, np.inf, np.sqrt(var)
        gam = w[rest] @ np.linalg.solve(w_b, np.eye(y.size)[basis]) - np.eye(y.size)[rest]
        rho = gam @ sigma @ v_b / var
        bound = -(gam @ y) / np.where(rho == 0, np.nan, rho) + float(v_b @ y)
        vlo = np.max(bound[rho > 0]) if np.any(rho > 0) else -np.inf
        vup = np.min(bound[rho < 0]) if np.any(rho < 0) else np.inf
        return float(vlo), float(vup), np.sqrt(var)
    gamma = lam
    vlo, vup = _dual_truncation(y, sigma, w, gamma, eta)
    return vlo, vup, float(np.sqrt(gamma @ sigma @ gamma))


def truncated_rejects(z, zlo, zup, size):
    """The conditional test's decision for standardised statistics ``z`` conditioned on
    ``[zlo, zup]``: reject when ``z > max(0, q)``, ``q`` the ``1 - size`` quantile of the
    standard normal truncated there (the lower end when the range is empty). ``z`` outside its
    range (beyond 1e-9, rounding) is not rejected. Decided through the truncated upper tail
    (:func:`truncated_upper_tail`), which is exact far out where the quantile is not.
    """
    z, zlo, zup = np.broadcast_arrays(*(np.asarray(v, float) for v in (z, zlo, zup)))
    out = np.zeros(z.shape, bool)
    inside = (zlo - 1e-9 <= z) & (z <= zup + 1e-9) & (z > 0)
    zi, lo, hi = z[inside], zlo[inside], zup[inside]
    flat = hi <= lo
    hi = np.where(flat, lo, hi)
    out[inside] = np.where(flat, zi > lo, truncated_upper_tail(np.clip(zi, lo, hi), lo, hi) < size)
    return out


def conditional_test(y, x, sigma, alpha, lf_cv=None, kappa=0.0):
    """Reject ``E[y] - X g <= 0`` for every ``g``? The conditional (``lf_cv`` None) or the
    conditional-least-favourable hybrid test."""
    sd = np.sqrt(np.diag(sigma))
    eta, lam = eta_program(y, x, sd)
    size = alpha
    if lf_cv is not None:
        if eta > lf_cv:
            return True
        size = (alpha - kappa) / (1 - kappa)
    vlo, vup, sigma_b = truncation(y, x, sigma, sd, lam, eta)
    if sigma_b <= np.finfo(float).eps:
        return eta > 0
    if lf_cv is not None:
        vup = min(vup, lf_cv)
    return bool(truncated_rejects(eta / sigma_b, vlo / sigma_b, vup / sigma_b, size))


_UNLISTED = object()


def least_favourable_cv(x, sigma, kappa, simulations, seed, vertices=_UNLISTED):
    """The ``1 - kappa`` quantile of ``eta`` when ``E[y] = 0`` (Monte Carlo, seeded).

    With the dual vertices listed, ``eta`` of every draw is a maximum over them. Otherwise only
    the draws that can reach the quantile are solved exactly (:func:`_top_etas`): the result is
    the same number as solving every draw's program. ``vertices``: those of
    :func:`dual_vertices` when already listed (or ``None``: too many to list).
    """
    return LeastFavourable(x, sigma, kappa, simulations, seed, vertices).value


class LeastFavourable:
    """The least-favourable critical value of :func:`least_favourable_cv`, computed when first
    asked for (``value``); ``upper`` bounds it from above without a program: the same
    quantile of each draw's statistic at nuisance zero, ``max_r y_r / sd_r``, which is at least
    the draw's ``eta`` (order statistics keep the order)."""

    def __init__(self, x, sigma, kappa, simulations, seed, vertices=_UNLISTED, hint=None):
        rng = np.random.default_rng(seed)
        self.hint = hint  # a LeastFavourable of a nearby program: its top draws go first
        self.top = ()  # the draws whose statistic was solved (the top ones)
        n = x.shape[0]
        self.x, self.kappa, self.simulations = x, kappa, simulations
        self.sd = np.sqrt(np.diag(sigma))
        chol = np.linalg.cholesky(sigma + 1e-14 * np.trace(sigma) / n * np.eye(n))
        self.draws = rng.standard_normal((simulations, n)) @ chol.T
        self.vertices = (dual_vertices(np.column_stack([self.sd, x])) if vertices is _UNLISTED
                         else vertices)
        self._value = None
        self._lower = None  # (vertices used, bound)
        self.upper = float(np.quantile((self.draws / self.sd).max(axis=1), 1 - kappa))

    def lower(self, vertices) -> float:
        """A bound below the value from dual vertices of the same program (each draw's
        ``eta`` is at least ``gamma' y``), less a margin for the programs' tolerances."""
        if not vertices.size:
            return -np.inf
        if self._lower is None or self._lower[0] != vertices.shape[0]:
            q = float(np.quantile((vertices @ self.draws.T).max(axis=0), 1 - self.kappa))
            self._lower = (vertices.shape[0], q - 1e-7 * (abs(q) + 1.0))
        return self._lower[1]

    @property
    def value(self) -> float:
        if self._value is None:
            kappa, simulations = self.kappa, self.simulations
            if self.vertices is not None:
                etas = (self.vertices @ self.draws.T).max(axis=0)
            else:
                position = int(np.floor((simulations - 1) * (1 - kappa)))
                first = () if self.hint is None else self.hint.top
                etas = _top_etas(self.draws, self.x, self.sd, simulations - position, first)
                self.top = tuple(np.argsort(etas)[::-1][:simulations - position])
                self.hint = None
            self._value = float(np.quantile(etas, 1 - kappa))
        return self._value


def _top_etas(draws, x, sd, need, first=()):
    """``eta`` of each draw, exact for the ``need`` largest; the others replaced by upper bounds
    no larger than the ``need``-th largest value, so that any quantile at or above that rank
    is the one of the exact values.

    Every program solved gives a dual vertex ``gamma`` (``eta >= gamma' y`` for every draw,
    weak duality) and, through its optimal basis, a nuisance value ``g(y)`` linear in the draw
    (``eta <= max_r (y_r - x_r g(y)) / sd_r`` for any ``g``). The draws are solved in the order
    of their upper bounds until no unsolved draw can exceed the ``need``-th largest exact
    value; a draw whose two bounds meet is exact without a program. ``first``: draws to solve
    before the others (while they can still reach the top), e.g. the top draws of a nearby
    program: an early cut leaves fewer draws open. The top values do not depend on the order.
    """
    m, n = draws.shape
    k = x.shape[1]
    w = np.column_stack([sd, x])
    ys = draws.T  # rows x draws
    lower = np.full(m, -np.inf)
    upper = (ys / sd[:, None]).max(axis=0)  # g = 0
    exact = np.zeros(m, bool)
    eta = np.full(m, np.nan)
    first = list(first)[::-1]
    while True:
        tight = ~exact & (upper - lower <= 1e-12 * (np.abs(upper) + 1.0))
        eta[tight], exact[tight] = upper[tight], True
        known = np.sort(eta[exact])
        cut = known[-need] if known.size >= need else -np.inf
        open_ = ~exact & (upper > cut)
        if not open_.any():
            break
        while first and not open_[first[-1]]:
            first.pop()
        i = first.pop() if first else int(np.flatnonzero(open_)[np.argmax(upper[open_])])
        value, lam, g_i = eta_program(draws[i], x, sd, primal=True)
        eta[i], exact[i] = value, True
        lower = np.maximum(lower, lam @ ys)
        rows = lam > _TOL_DUAL
        if rows.sum() == k + 1 and np.linalg.matrix_rank(w[rows]) == k + 1:
            g = np.linalg.solve(w[rows], ys[rows])[1:]  # the basis's nuisance, linear in y
        else:
            g = g_i[:, None]  # a degenerate basis: this draw's minimiser, for every draw
        upper = np.minimum(upper, ((ys - x @ g) / sd[:, None]).max(axis=0))
    return np.where(exact, eta, upper)


class _Basis:
    """A non-degenerate optimal basis of the statistic's program and its conditional test."""

    def __init__(self, rows, w, sigma):
        self.rows = rows
        self.w_inv = np.linalg.inv(w[rows])
        k1 = w.shape[1]
        n = w.shape[0]
        e1 = np.zeros(k1)
        e1[0] = 1.0
        self.v = np.zeros(n)
        self.v[rows] = self.w_inv.T @ e1
        self.var = float(self.v @ sigma @ self.v)
        select = np.eye(n)[rows]
        self.gam = w[~rows] @ self.w_inv @ select - np.eye(n)[~rows]
        self.rho = self.gam @ sigma @ self.v / self.var

    def eta_if_optimal(self, y, w, sd):
        """``eta`` for each column of ``y`` (rows x cases) where this basis is optimal, else NaN."""
        sol = self.w_inv @ y[self.rows]
        slack = y - w @ sol
        fits = np.all(slack <= 1e-10 * (np.abs(y) + sd[:, None]), axis=0)
        return np.where(fits, sol[0], np.nan)

    def truncation(self, y):
        """``(vlo, vup)`` for each column of ``y``."""
        base = self.v @ y
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = -(self.gam @ y) / self.rho[:, None] + base
        pos, neg = self.rho > 0, self.rho < 0
        vlo = bound[pos].max(axis=0) if pos.any() else np.full(y.shape[1], -np.inf)
        vup = bound[neg].min(axis=0) if neg.any() else np.full(y.shape[1], np.inf)
        return vlo, vup


class _Vertex:
    """A degenerate optimal dual vertex ``gamma`` at one ``theta`` and the vertices whose lines
    end its conditioning range (``g_lo``, ``g_up``; ``None`` at an infinite end, or when the
    first stage rejected, ``first``, and the range was not needed)."""

    def __init__(self, gamma, sigma, g_lo=None, g_up=None, first=False):
        self.gamma, self.g_lo, self.g_up, self.first = gamma, g_lo, g_up, first
        self.var = float(gamma @ sigma @ gamma)
        self.b = sigma @ gamma / self.var

    def same(self, other) -> bool:
        """The same vertex, ended by the same vertices?"""
        def close(u, v):
            return (u is None and v is None) or (u is not None and v is not None
                                                 and np.abs(u - v).max() <= 1e-10)
        return (other is not None and self.first == other.first
                and close(self.gamma, other.gamma) and close(self.g_lo, other.g_lo)
                and close(self.g_up, other.g_up))

    def statistics(self, ys):
        """``(eta, vlo, vup)`` at each column of ``ys`` where this vertex is optimal and its
        range is ended by the same vertices."""
        eta = self.gamma @ ys
        s = ys - np.outer(self.b, eta)

        def end(g, default):
            if g is None:
                return np.full(eta.shape, default)
            return (g @ s) / (1.0 - float(g @ self.b))
        return eta, end(self.g_lo, -np.inf), end(self.g_up, np.inf)


def conditional_test_line(y0, a, x, sigma, alpha, thetas, lf_cv=None, kappa=0.0, known=None):
    """Reject at each ``theta`` the null for ``y = y0 - a theta``? (boolean array).

    The same test as :func:`conditional_test`, vectorised over ``theta``, with fewer programs:

    - a non-degenerate optimal basis found at one ``theta`` is checked against every other
      ``theta`` (where it stays optimal, the primal formulas give the test);
    - with the hybrid, every dual vertex met (each program gives one) bounds the statistic
      from below at every ``theta``: where the bound exceeds ``lf_cv`` the first stage rejects
      without a program (``known``, :class:`DualVertices`, carries the vertices over calls);
      ``lf_cv`` may be a :class:`LeastFavourable`, whose value is then only computed where
      its upper bound does not already decide;
    - a degenerate optimal vertex is tested through the dual (:func:`_dual_range`). Where two
      values of ``theta`` have the same optimal vertex and the same vertices ending its range,
      so does every ``theta`` between (the statistic is convex in ``theta`` and the vertex's
      line touches it at both; ``vup`` is concave and ``vlo`` convex in ``theta`` and each
      meets the same line at both), so those are tested without a program. The values between
      are taken by bisection.
    """
    thetas = np.asarray(thetas, float)
    sd = np.sqrt(np.diag(sigma))
    w = np.column_stack([sd, x])
    k1 = w.shape[1]
    ys = y0[:, None] - np.outer(a, thetas)
    reject = np.zeros(thetas.size, bool)
    done = np.zeros(thetas.size, bool)
    size = alpha if lf_cv is None else (alpha - kappa) / (1 - kappa)
    known = DualVertices(y0.size) if known is None else known
    state = {"seen": 0, "bound": np.full(thetas.size, -np.inf)}
    lazy = isinstance(lf_cv, LeastFavourable)

    def cut():
        """At least ``lf_cv``: its value where known, else its upper bound."""
        return lf_cv.upper if lazy and lf_cv._value is None else lf()

    def lf():
        return lf_cv.value if lazy else lf_cv

    def first_stage():
        if lf_cv is None or known.vertices.shape[0] == state["seen"]:
            return
        state["bound"] = np.maximum(state["bound"], known.lower_new(ys, state["seen"]))
        state["seen"] = known.vertices.shape[0]
        # a margin far above the programs' tolerances: a bound this far above is an eta above
        hit = ~done & (state["bound"] > cut() + 1e-7 * (abs(cut()) + 1.0))
        reject[hit], done[hit] = True, True

    def decide(idx, etas, vlo, vup, sigma_b):
        tiny = sigma_b <= np.finfo(float).eps

        def second(cap, rows=slice(None)):  # the conditional stage, vup capped at ``cap``
            hi = vup[rows] if cap is None else np.minimum(vup[rows], cap)
            return truncated_rejects(etas[rows] / sigma_b, vlo[rows] / sigma_b, hi / sigma_b,
                                     size)
        if lf_cv is None:
            out = etas > 0 if tiny else second(None)
        elif lazy and lf_cv._value is None and not tiny:
            # decided by bounds on the critical value where they agree: a smaller cap only
            # makes the conditional stage reject more (P(Z > z | lo <= Z <= hi) grows with hi)
            high = lf_cv.upper
            out = (etas > high) | second(high)
            low = lf_cv.lower(known.vertices)
            sure = (etas <= low) & ~second(low)
            rest = ~out & ~sure
            if rest.any():
                out[rest] = (etas[rest] > lf()) | second(lf(), rest)
        else:
            out = (etas > lf()) | (etas > 0 if tiny else second(lf()))
        reject[idx] = out
        done[idx] = True

    def solve(i):
        """Test ``theta_i`` (and what its program settles); its degenerate vertex or None."""
        first_stage()
        if done[i]:
            return None
        y = ys[:, i]
        eta, lam = eta_program(y, x, sd)
        known.add(lam)
        rows = lam > _TOL_DUAL
        if rows.sum() != k1 or np.linalg.matrix_rank(w[rows]) != k1:
            if lf_cv is not None and eta > cut():  # the first stage rejects
                reject[i], done[i] = True, True
                return _Vertex(lam, sigma, first=True)
            sigma_b = np.sqrt(max(float(lam @ sigma @ lam), 0.0))
            if sigma_b <= np.finfo(float).eps:  # no variance: no range to condition on
                decide(np.array([i]), np.array([eta]), np.array([-np.inf]),
                       np.array([np.inf]), sigma_b)
                return None
            vlo, vup, g_lo, g_up = _dual_range(y, sigma, w, lam, eta, known)
            vertex = _Vertex(lam, sigma, g_lo, g_up)
            decide(np.array([i]), np.array([eta]), np.array([vlo]), np.array([vup]),
                   np.sqrt(max(vertex.var, 0.0)))
            return vertex
        basis = _Basis(rows, w, sigma)
        todo = np.flatnonzero(~done)
        etas = basis.eta_if_optimal(ys[:, todo], w, sd)
        etas[todo == i] = eta
        fit = np.isfinite(etas)
        idx, etas = todo[fit], etas[fit]
        vlo, vup = basis.truncation(ys[:, idx])
        decide(idx, etas, vlo, vup, np.sqrt(basis.var))
        return None

    order = np.argsort(thetas, kind="stable")

    def between(lo, hi, v_lo, v_hi):
        """Test the values strictly between sorted positions ``lo`` and ``hi``."""
        inner = [q for q in range(lo + 1, hi) if not done[order[q]]]
        if not inner:
            return
        if v_lo is not None and v_lo.same(v_hi):
            idx = order[inner]
            etas, vlo, vup = v_lo.statistics(ys[:, idx])
            decide(idx, etas, vlo, vup, np.sqrt(max(v_lo.var, 0.0)))
            return
        mid = inner[len(inner) // 2]
        v_mid = solve(order[mid])
        between(lo, mid, v_lo, v_mid)
        between(mid, hi, v_mid, v_hi)

    first_stage()
    while not done.all():
        open_ = np.flatnonzero(~done[order])
        lo, hi = open_[0], open_[-1]
        v_lo = solve(order[lo])
        v_hi = solve(order[hi]) if hi != lo else None
        between(lo, hi, v_lo, v_hi)
    return reject


def dual_vertices(w, limit=20000):
    """The vertices of ``{gamma >= 0 : w' gamma = e1}`` (rows), or ``None`` when there are more
    than ``limit`` candidate bases, ``w`` lacks full column rank or the set is empty (the
    statistic's program is then unbounded; the LP path says so).

    By duality ``eta(y) = max_v gamma_v' y`` over these vertices, and the conditioning range of
    the test is where the optimal vertex's line stays on top of the others' (ARP, Appendix D):
    with the list in hand the test needs no linear program.
    """
    n, k1 = w.shape
    if comb(n, k1) > limit or np.linalg.matrix_rank(w) < k1:
        return None
    e1 = np.zeros(k1)
    e1[0] = 1.0
    bases = np.array(list(combinations(range(n), k1)), dtype=np.intp).reshape(-1, k1)
    found = []
    for start in range(0, bases.shape[0], 4096):  # batched: every candidate basis at once
        rows = bases[start:start + 4096]
        sub = w[rows]  # bases x k1 x k1
        det = np.abs(np.linalg.det(sub))
        ok = det >= 1e-12 * np.prod(np.linalg.norm(sub, axis=2), axis=1)
        if not ok.any():
            continue
        rows, sub = rows[ok], sub[ok]
        g = np.linalg.solve(sub.transpose(0, 2, 1), np.broadcast_to(e1, (rows.shape[0], k1))
                            [..., None])[..., 0]
        feasible = np.all(g >= -1e-10 * np.abs(g).max(axis=1, keepdims=True), axis=1)
        v = np.zeros((int(feasible.sum()), n))
        np.put_along_axis(v, rows[feasible], np.maximum(g[feasible], 0.0), axis=1)
        found.append(v)
    if not found or not sum(f.shape[0] for f in found):
        return None
    vertices = np.unique(np.round(np.vstack(found), 12), axis=0)
    return vertices


def vertex_test_line(y0, a, sigma, vertices, alpha, thetas, lf_cv=None, kappa=0.0):
    """:func:`conditional_test_line` from the dual vertices: exact, vectorised, no LP."""
    ys = y0[:, None] - np.outer(a, np.asarray(thetas, float))  # rows x thetas
    values = vertices @ ys  # vertices x thetas
    vsv = vertices @ sigma @ vertices.T
    lf = None if lf_cv is None else np.array([lf_cv], float)
    return vertex_decisions(values[None], vsv[None], alpha, lf, kappa)[0]


def vertex_decisions(values, vsv, alpha, lf_cv=None, kappa=0.0):
    """The conditional (or hybrid) test's decisions from the dual vertices' values.

    Parameters
    ----------
    values : ndarray, shape (problems, vertices, cases)
        ``gamma_v' y`` for each dual vertex ``v`` of each problem and each case (a value of
        ``theta``): the statistic is their maximum over ``v``.
    vsv : ndarray, shape (problems, vertices, vertices)
        ``Cov(gamma_v' y, gamma_u' y)``.
    alpha : float
        Level of the test.
    lf_cv : ndarray, shape (problems,), optional
        Least-favourable critical values at level ``kappa``: the hybrid test.
    kappa : float
        First-stage level of the hybrid.

    Returns
    -------
    ndarray of bool, shape (problems, cases)
        True where the test rejects.

    Notes
    -----
    Along ``y = s + b c`` with ``b = Sigma gamma* / var(gamma*' y)`` and ``s`` independent of
    ``c = gamma*' y``, vertex ``v``'s line is ``gamma_v' s + c slope_v`` with
    ``slope_v = Cov(gamma_v' y, gamma*' y) / var``; ``gamma*`` stays optimal while its line
    (``c``) is on top of every other, which bounds ``c`` to ``[vlo, vup]`` (ARP, Appendix D).
    Only the vertices' values and covariances enter, so a problem whose few relevant vertices
    are known in closed form needs no moment-space algebra at all.
    """
    values = np.asarray(values, float)
    vsv = np.asarray(vsv, float)
    rows = np.arange(values.shape[0])[:, None]
    best = values.argmax(axis=1)  # problems x cases
    eta = np.take_along_axis(values, best[:, None, :], axis=1)[:, 0, :]
    cov = vsv[rows, best, :]  # problems x cases x vertices
    var = np.take_along_axis(cov, best[..., None], axis=2)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = cov / var[..., None]
        cross = (values.transpose(0, 2, 1) - slope * eta[..., None]) / (1.0 - slope)
    vup = np.where(slope > 1 + 1e-12, cross, np.inf).min(axis=-1)
    vlo = np.where(slope < 1 - 1e-12, cross, -np.inf).max(axis=-1)
    sigma_b = np.sqrt(np.maximum(var, 0.0))
    size = alpha
    reject = np.zeros(eta.shape, bool)
    if lf_cv is not None:
        lf = np.asarray(lf_cv, float)[:, None]
        size = (alpha - kappa) / (1 - kappa)
        reject |= eta > lf
        vup = np.minimum(vup, lf)
    tiny = sigma_b <= np.finfo(float).eps
    reject |= tiny & (eta > 0)
    test = ~tiny & ~reject
    reject[test] = truncated_rejects(eta[test] / sigma_b[test], vlo[test] / sigma_b[test],
                                     vup[test] / sigma_b[test], size)
    return reject


def _log1mexp(x):
    """``log(1 - exp(x))`` for ``x <= 0``, accurate near 0 and for very negative ``x``."""
    x = np.minimum(x, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(x > -np.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def truncated_upper_tail(z, lo, hi):
    """``P(Z > z | lo <= Z <= hi)`` for a standard normal ``Z`` and ``lo <= z <= hi``.

    Computed from ``log Phi(-x)`` so that it stays accurate far in the upper tail, where the
    conditional test's ranges lie when the statistic is large. The test rejects at level
    ``size`` exactly when this is below ``size`` (for ``z > 0``), the same decision as
    comparing ``z`` with the truncated normal's ``1 - size`` quantile.
    """
    a, l, h = special.log_ndtr(-z), special.log_ndtr(-lo), special.log_ndtr(-hi)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.exp(a + _log1mexp(h - a) - l - _log1mexp(h - l))
