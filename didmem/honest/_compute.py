"""The intervals and breakdown value of :func:`didmem.sensitivity` (the work behind its
declaration in :mod:`didmem.honest.api`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import optimize
from threadpoolctl import threadpool_limits

from .._progress import progress as progress_line
from ..errors import EstimationError, ParameterError
from ..inference.bands import normal_quantile
from ..results import AggregateResult
from ._flci import SmoothnessProblem
from ._general import (PolyhedraUnion, monotone_rows, relative_magnitudes_pieces, sign_rows,
                       smoothness_pieces)
from ._inputs import _as_estimates, _listed, _target
from ._relative import RelativeMagnitudes
from .result import SensitivityResult

DEFAULT_ALPHA = 0.05  # for (beta, vcov) given without a level; an aggregation has its own


def sensitivity_intervals(data, restriction, m, event_time, alpha, method, grid_points,
                          simulations, seed, bias, monotonicity,
                          progress=None) -> SensitivityResult:
    """:func:`didmem.sensitivity` on arguments its declaration has checked."""
    ms = np.atleast_1d(np.asarray(m, dtype=float))
    if bias is not None and monotonicity is not None:
        raise ParameterError("sensitivity takes at most one of bias and monotonicity (as R "
                             f"HonestDiD); got bias={bias!r} and "
                             f"monotonicity={monotonicity!r}.")
    beta, sigma, e, n_pre, step = _as_estimates(data)
    if alpha is None:  # the aggregation's own level, unless given
        alpha = float(data.alpha) if isinstance(data, AggregateResult) else DEFAULT_ALPHA
    target = _target(event_time, e[e >= 0] * step)
    target.index = np.round(target.index.to_numpy(float) / step, 9)
    l_post = target.to_numpy()
    z = normal_quantile(1 - alpha / 2)
    theta = float(l_post @ beta[n_pre:])
    sd = float(np.sqrt(max(l_post @ sigma[n_pre:, n_pre:] @ l_post, 0.0)))
    if not sd > 0:
        raise EstimationError("The target (weights "
                              f"{_listed(target[target != 0].index * step)}) has no variance "
                              "under vcov; sensitivity intervals need a covariance with "
                              "positive variance of the target.")
    original = (theta - z * sd, theta + z * sd)
    name = "M" if restriction == "smoothness" else "Mbar"
    variant = None
    if bias is not None or monotonicity is not None:
        variant = f"bias {bias}" if bias is not None else f"monotonicity {monotonicity}"
    title = "sensitivity (" + restriction.replace("_", " ") + (f", {variant}" if variant else "") \
        + ")"
    # the problems are small and dense: several BLAS threads only contend on a busy machine
    with threadpool_limits(limits=1, user_api="blas"), \
            progress_line(ms.size + 1, title, progress) as bar:
        n_post = l_post.size

        def each(interval):
            out = []
            for mi in ms:
                bar.say(f"interval at {name} = {mi:g}")
                out.append(interval(float(mi)))
                bar.step()
            bar.say("breakdown value")
            return out

        if variant is not None:
            extra = sign_rows(n_pre, n_post, bias) if bias is not None \
                else monotone_rows(n_pre, n_post, monotonicity)
            make = smoothness_pieces if restriction == "smoothness" \
                else relative_magnitudes_pieces
            union = PolyhedraUnion(beta, sigma, n_pre, l_post, alpha,
                                   make(n_pre, n_post, extra), hybrid=method == "C-LF",
                                   grid_points=grid_points, simulations=simulations, seed=seed)
            rows = each(union.interval)
            breakdown = _breakdown_by_test(union,
                                           start=1.0 if restriction != "smoothness" else sd)
            label = method
        elif restriction == "smoothness":
            problem = SmoothnessProblem(sigma, n_pre, l_post, alpha)
            rows = each(lambda mi: problem.interval(beta, mi))
            breakdown = _breakdown(problem, beta, sd)
            label = "FLCI"
        else:
            rm = RelativeMagnitudes(beta, sigma, n_pre, l_post, alpha,
                                    hybrid=method == "C-LF", grid_points=grid_points,
                                    simulations=simulations, seed=seed)
            rows = each(rm.interval)
            breakdown = _breakdown_by_test(rm)
            label = method
        bar.step()
    frame = pd.DataFrame({"m": ms, "lower": [r[0] for r in rows], "upper": [r[1] for r in rows],
                          "method": label})
    target.index = target.index.to_numpy(float) * step  # back to the data's event times
    return SensitivityResult(restriction=restriction, target=target, original=original,
                             intervals=frame, breakdown=breakdown,
                             alpha=alpha, variant=variant)


def _breakdown(problem, beta, sd):
    """The smallest ``M`` whose FLCI contains zero: a root of the end point nearest zero.

    The end point is continuous in ``M``; the root is bracketed by doubling from ``M = 0`` and
    found by Brent's method, each evaluation warm-started from the previous solution.
    """
    lo, hi = problem.interval(beta, 0.0)
    if lo <= 0 <= hi:
        return 0.0
    sign = 1.0 if lo > 0 else -1.0

    def gap(mi):  # positive while zero is outside the interval
        lower, upper = problem.interval(beta, mi)
        return lower if sign > 0 else -upper

    left, right = 0.0, sd
    for _ in range(60):
        if gap(right) <= 0:
            break
        left, right = right, 2 * right
    else:
        return float("inf")
    return float(optimize.brentq(gap, left, right, xtol=1e-10 * right, rtol=1e-10))


def _breakdown_by_test(rm, rtol=1e-4, start=1.0):
    """The smallest bound whose confidence set accepts ``theta = 0``, by bisection.

    The set grows with the bound (the restriction is nested), so acceptance of zero is
    bracketed by doubling from ``start`` and bisected to ``rtol``.
    """
    if rm.covers_zero(0.0):
        return 0.0
    left, right = 0.0, float(start)
    for _ in range(30):
        if rm.covers_zero(right):
            break
        left, right = right, 2 * right
    else:
        return float("inf")
    while right - left > rtol * right:
        mid = 0.5 * (left + right)
        if rm.covers_zero(mid):
            right = mid
        else:
            left = mid
    return float(right)
