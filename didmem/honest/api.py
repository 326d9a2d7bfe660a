"""``didmem.sensitivity``: robustness of an event study to violations of parallel trends.

This module holds the declaration (signature, constraints, documentation), which the command
line reads without loading pandas or scipy; the work is in :mod:`didmem.honest._compute`.
"""

from __future__ import annotations

import sys
from typing import Mapping

import numpy as np

from .._validation import (Alpha, Count, Integral, OneOf, Satisfies, finite_number,
                           validate_params)
from ._choices import BIAS, METHODS, MONOTONICITY, RESTRICTIONS
from .result import SensitivityResult

__all__ = ["sensitivity", "SensitivityResult"]


def _target_weights(event_time) -> bool:
    """A number, a non-empty list of distinct numbers or a mapping to finite weights not all
    zero."""
    if finite_number(event_time):
        return True
    if isinstance(event_time, Mapping):
        return (len(event_time) > 0 and all(finite_number(k) for k in event_time)
                and all(finite_number(v) for v in event_time.values())
                and any(v != 0 for v in event_time.values()))
    if isinstance(event_time, (list, tuple, np.ndarray, *_pandas_index())):
        values = list(np.asarray(event_time).ravel())
        return (len(values) > 0 and all(finite_number(v) for v in values)
                and len(set(float(v) for v in values)) == len(values))
    return False




def _pandas_index() -> tuple:
    """``(pandas.Index,)`` when pandas is loaded, else ``()``: a value cannot be an Index of a
    pandas nobody imported, and this declaration does not load pandas for the check."""
    pandas = sys.modules.get("pandas")
    return (pandas.Index,) if pandas is not None else ()


_CONSTRAINTS = {
    "restriction": OneOf(*RESTRICTIONS),
    "m": Satisfies(lambda m: np.size(m) > 0 and np.all(np.isfinite(np.asarray(m, float)))
                   and np.all(np.asarray(m, float) >= 0),
                   "a finite non-negative number or a non-empty sequence of them"),
    "event_time": Satisfies(_target_weights,
                            "a post-treatment event time, a list of distinct event times (their "
                            "average) or a mapping from event times to finite weights, not all "
                            "zero"),
    "alpha": Alpha(allow_none=True),
    "method": OneOf(*METHODS),
    "grid_points": Count(10),
    "simulations": Count(10),
    "seed": Integral(0),
    "bias": OneOf(None, *BIAS),
    "monotonicity": OneOf(None, *MONOTONICITY),
    "progress": OneOf(None, True, False),
}


@validate_params(_CONSTRAINTS, owner="sensitivity")
def sensitivity(data, restriction: str = "smoothness", m=(0.0,), event_time=0, *,
                alpha: float | None = None, method: str = "C-LF", grid_points: int = 1000,
                simulations: int = 1000, seed: int = 0, bias: str | None = None,
                monotonicity: str | None = None,
                progress: bool | None = None) -> SensitivityResult:
    """Confidence intervals robust to restricted violations of parallel trends.

    Parameters
    ----------
    data : AggregateResult or tuple of (pandas.Series, pandas.DataFrame)
        An event-time aggregation (``res.aggregate("dynamic")`` of a fit with
        ``base_period="universal"``), or estimates by event time (reference period -1 left
        out) and their covariance labelled by event time on both axes, as R ``HonestDiD``
        takes them.
    restriction : {"smoothness", "relative_magnitudes"}
        ``"smoothness"``: ``Delta^SD(M)``, the slope of the violation changes by at most ``M``
        per period; intervals are the FLCI of Rambachan & Roth (2023, Section 4.1).
        ``"relative_magnitudes"``: ``Delta^RM(Mbar)``, every post-treatment first difference
        of the violation is at most ``Mbar`` times the largest pre-treatment one; intervals
        invert the ARP test over a grid of the target (Section 4.2).
    m : sequence of float
        The values of ``M`` or ``Mbar`` (non-negative).
    event_time : float, list of float or mapping
        The target: one post-treatment event time; a list of distinct post-treatment event
        times, meaning their average (as the command line's ``--average``); or a mapping from
        post-treatment event times to weights (finite, not all zero), in the data's units. Event times spaced by a constant other
        than 1 (training steps with a checkpoint every 1,000 steps: ..., -1000, 0, 1000) are
        read in periods of that spacing, so ``-1000`` is the reference period and ``M`` is
        per period squared.
    alpha : float, optional
        One minus the coverage; by default the aggregation's own (``data.alpha``, the level
        of the fit), or 0.05 for ``(beta, vcov)``.
    method : {"C-LF", "conditional"}
        Relative magnitudes, and smoothness with ``bias`` or ``monotonicity``: the
        conditional-least-favourable hybrid of Andrews, Roth & Pakes (``kappa = alpha / 10``;
        R's default) or their conditional test.
    grid_points : int
        10 to 1,000,000. Relative magnitudes only: points of the grid of the target over which the test is
        inverted (the identified set at the estimates, 20 standard errors beyond each end,
        widened while an end point is accepted); the interval's end points are grid points.
    simulations, seed : int
        ``"C-LF"`` only: draws (10 to 1,000,000) and seed (a non-negative integer) of the Monte
        Carlo least-favourable critical value.
    bias : {"positive", "negative"}, optional
        Also restrict the sign of the post-treatment violations (``delta_post >= 0``:
        ``Delta^SDPB``, ``Delta^RMB``; ``"negative"``: ``<= 0``), as R's ``biasDirection``.
    monotonicity : {"increasing", "decreasing"}, optional
        Also restrict the violation path to increase (decrease) from the reference period on
        (``Delta^SDI``, ``Delta^RMI``...), as R's ``monotonicityDirection``. At most one of
        ``bias`` and ``monotonicity``.
    progress : bool, optional
        Show progress (what is being computed, values done, time left) on standard error:
        by default when it is a terminal (from a second on); ``True`` always, ``False``
        never.

    Returns
    -------
    SensitivityResult

    Raises
    ------
    ParameterError
        An argument outside its declared constraints (the message names it), or ``(beta,
        vcov)`` whose labels disagree.
    EstimationError
        Estimates that cannot bound the violations: no pre-treatment estimate besides the
        reference period, a gap in the event times, NaN, a covariance that is not positive
        semi-definite, a target without variance, or cohorts with their reference periods at
        different event times (an irregular checkpoint grid).

    Notes
    -----
    ``(beta, vcov)`` are aligned by label: any order of the event times is read as sorted.
    Integer event times that are consecutive around -1 are periods; others spaced by a
    constant (``-2000, 0, 1000``) are read in periods of that spacing.

    The FLCI is ``v' beta +/- sd(v) cv_alpha(b(v) / sd(v))`` with ``v_post`` the target's
    weights, ``b(v) = M ||K'v||_1`` the worst-case bias over ``Delta^SD(M)`` (``K`` maps
    second differences to the violation path; ``v`` is orthogonal to linear trends) and
    ``cv_alpha(b)`` the ``1 - alpha`` quantile of ``|N(b, 1)|``; ``v_pre`` minimises the
    half-length. It is computed exactly (no Monte Carlo quantile, unlike R).

    With ``bias`` or ``monotonicity`` the restriction is a union of general polyhedra and
    each is tested by the ARP test through linear programs (or its dual vertices when they are
    few), as R does with ``method="C-LF"`` or ``"Conditional"``; the interval is found on a
    grid for smoothness too (R's default for these variants, the FLCI hybrid ``"C-F"``, is not
    offered). The union is tested from each end of the grid inwards, the first stage and the
    least-favourable value are decided by bounds where they suffice, and values of the target
    between two with the same optimal dual vertex are tested without a program: 10 values and
    the breakdown value take about 3.5 s of CPU at 5 + 7 periods and 8.5 s at 10 + 10 (see
    ``benchmarks/RESULTS.md``); 95 + 95 remains out of reach.

    Under relative magnitudes the set is the union over the pre-treatment difference that
    attains the maximum, and its sign, of polyhedra; each is tested by the statistic of
    Andrews, Roth & Pakes (2023) on its post-treatment rows, with the post-treatment effects
    other than the target as nuisance parameters, solved in closed form (four dual vertices,
    see ``didmem.honest._relative``). The breakdown value
    bisects on ``Mbar`` with the test of ``theta = 0`` itself (no grid).

    References
    ----------
    Rambachan, A. and Roth, J. (2023). A More Credible Approach to Parallel Trends. Review of
    Economic Studies 90(5), 2555-2591.
    """
    from ._compute import sensitivity_intervals

    return sensitivity_intervals(data, restriction, m, event_time, alpha, method, grid_points,
                                 simulations, seed, bias, monotonicity, progress)
