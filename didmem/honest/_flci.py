"""Fixed-length confidence intervals under smoothness (Armstrong & Kolesar 2018; R&R 2023)."""

from __future__ import annotations

import numpy as np
from scipy import optimize, special

from ._deltas import second_difference_map


def folded_normal_quantile(bias: float, alpha: float) -> float:
    """``cv_alpha(b)``: the ``1 - alpha`` quantile of ``|N(b, 1)|``."""
    b = abs(float(bias))

    def excess(c):
        return special.ndtr(c - b) - special.ndtr(-c - b) - (1 - alpha)

    hi = b + special.ndtri(1 - alpha / 2) + 1.0
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12))


def _min_variance_given_bias(sigma, n_pre, l_post, t, k, m, bias_bound, start):
    """``min v' sigma v`` over ``v_pre`` with ``v't = 0`` and ``m ||K'v||_1 <= bias_bound``."""
    n_d = k.shape[1]
    kp, kq = k[:n_pre].T, k[n_pre:].T @ l_post  # K'v = kp v_pre + kq

    def var(x):
        v = np.concatenate([x[:n_pre], l_post])
        return v @ sigma @ v

    def grad(x):
        v = np.concatenate([x[:n_pre], l_post])
        g = np.zeros_like(x)
        g[:n_pre] = 2 * (sigma @ v)[:n_pre]
        return g

    cons = [
        {"type": "eq", "fun": lambda x: x[:n_pre] @ t[:n_pre] + l_post @ t[n_pre:],
         "jac": lambda x: np.concatenate([t[:n_pre], np.zeros(n_d)])},
        {"type": "ineq", "fun": lambda x: np.concatenate([x[n_pre:] - kp @ x[:n_pre] - kq,
                                                           x[n_pre:] + kp @ x[:n_pre] + kq]),
         "jac": lambda x: np.vstack([np.hstack([-kp, np.eye(n_d)]),
                                     np.hstack([kp, np.eye(n_d)])])},
    ]
    if m > 0 and np.isfinite(bias_bound):
        cons.append({"type": "ineq", "fun": lambda x: bias_bound - m * x[n_pre:].sum(),
                     "jac": lambda x: np.concatenate([np.zeros(n_pre), -m * np.ones(n_d)])})
    res = optimize.minimize(var, start, jac=grad, constraints=cons, method="SLSQP",
                            options={"maxiter": 500, "ftol": 1e-14})
    return res.x


def _polish(sigma, n_pre, l_post, t, k, m, alpha, v, h):
    """A last SLSQP pass on the half-length itself, from the best point of the bias search."""
    n_d = k.shape[1]
    kp, kq = k[:n_pre].T, k[n_pre:].T @ l_post

    def length(x):
        w = np.concatenate([x[:n_pre], l_post])
        sd = np.sqrt(w @ sigma @ w)
        return sd * folded_normal_quantile(m * x[n_pre:].sum() / sd, alpha)

    cons = [
        {"type": "eq", "fun": lambda x: x[:n_pre] @ t[:n_pre] + l_post @ t[n_pre:]},
        {"type": "ineq", "fun": lambda x: np.concatenate([x[n_pre:] - kp @ x[:n_pre] - kq,
                                                           x[n_pre:] + kp @ x[:n_pre] + kq]),
         "jac": lambda x: np.vstack([np.hstack([-kp, np.eye(n_d)]),
                                     np.hstack([kp, np.eye(n_d)])])},
    ]
    x0 = np.concatenate([v[:n_pre], np.abs(k.T @ v)])
    res = optimize.minimize(length, x0, constraints=cons, method="SLSQP",
                            options={"maxiter": 300, "ftol": 1e-15})
    if res.success and np.all(cons[1]["fun"](res.x) >= -1e-12) and res.fun < h:
        w = np.concatenate([res.x[:n_pre], l_post])
        sd = float(np.sqrt(w @ sigma @ w))
        true = sd * folded_normal_quantile(m * float(np.abs(k.T @ w).sum()) / sd, alpha)
        if true < h:
            return true, w
    return h, v


def flci(beta, sigma, n_pre, l_post, m, alpha):
    """The FLCI for ``l_post' tau_post`` under ``Delta^SD(m)``: ``(lower, upper)``.

    The estimator is ``v' beta`` with ``v_post = l_post``; its worst-case bias over
    ``Delta^SD(m)`` is ``m ||K'v||_1`` when ``v`` is orthogonal to linear trends (else
    infinite). The half-length ``sd(v) cv_alpha(bias / sd(v))`` is minimised over the bias
    bound, the variance being minimised for each bound (a small quadratic program).
    """
    t, k = second_difference_map(n_pre, l_post.size)
    n_d = k.shape[1]
    if n_pre < 1:
        raise ValueError("The smoothness restriction needs at least one pre-treatment "
                         "estimate besides the reference period.")
    # the linear-extrapolation start: slope from the last pre period
    x0 = np.zeros(n_pre + n_d)
    x0[n_pre - 1] = (l_post @ t[n_pre:]) / 1.0
    x0[n_pre:] = np.abs(k[:n_pre].T @ x0[:n_pre] + k[n_pre:].T @ l_post) + 1e-9
    state = {"x": x0}

    def solve(bound):
        x = _min_variance_given_bias(sigma, n_pre, l_post, t, k, m, bound, state["x"])
        state["x"] = x
        return x

    def half_length(bound):
        x = solve(bound)
        v = np.concatenate([x[:n_pre], l_post])
        sd = float(np.sqrt(v @ sigma @ v))
        bias = m * float(np.abs(k.T @ v).sum())
        return sd * folded_normal_quantile(bias / sd, alpha), v

    if m == 0:
        h, v = half_length(np.inf)
    else:
        # from zero bias to the bias of the minimum-variance estimator (no bias bound)
        free = np.concatenate([solve(np.inf)[:n_pre], l_post])
        b_max = m * float(np.abs(k.T @ free).sum())
        state["x"] = x0
        grid = np.linspace(0.0, b_max, 21)
        vals = [half_length(b)[0] for b in grid]
        i = int(np.argmin(vals))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        best = optimize.minimize_scalar(lambda b: half_length(b)[0], bounds=(lo, hi),
                                        method="bounded", options={"xatol": 1e-10 * max(b_max, 1e-12)})
        h, v = half_length(best.x)
        if vals[i] < h:
            h, v = half_length(grid[i])
        h, v = _polish(sigma, n_pre, l_post, t, k, m, alpha, v, h)
    centre = float(v @ beta)
    return centre - h, centre + h
