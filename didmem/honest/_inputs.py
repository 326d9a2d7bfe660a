"""The inputs of :func:`didmem.sensitivity` checked and put in periods: an event-time
aggregation or ``(beta, vcov)`` to ``(beta, sigma, event times, n_pre, step)``, and the
target's weights."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from .._validation import finite_number
from ..errors import EstimationError, ParameterError
from ..results import AggregateResult

def _listed(values) -> str:
    """``[-2, -1, 0]``: numbers for a message (no numpy reprs)."""
    return "[" + ", ".join(f"{float(v):g}" for v in values) + "]"


def _period(event_times) -> float:
    """The spacing of the event times: 1 for integer periods, 1000 for event times in
    training steps with a checkpoint every 1,000 steps (as the Pythia panels have)."""
    e = np.unique(np.asarray(event_times, float))
    if e.size < 2:
        return 1.0
    step = float(np.min(np.diff(e)))
    if step > 0 and step != 1 and np.allclose(e / step, np.round(e / step), rtol=0, atol=1e-9):
        return step
    return 1.0


def _consecutive(e, step) -> bool:
    """Are ``e / step`` with the reference period -1 consecutive integers?"""
    full = np.unique(np.concatenate([np.asarray(e, float) / step, [-1.0]]))
    return bool(np.all(full == np.round(full)) and np.all(np.diff(full) == 1))


def _in_periods(beta, vcov, step):
    """Event times divided by their spacing ``step``, so that -1 is the period before
    treatment."""
    if step == 1:
        return beta, vcov
    beta, vcov = beta.copy(), vcov.copy()
    beta.index = np.round(beta.index.to_numpy(float) / step, 9)
    vcov.index = np.round(vcov.index.to_numpy(float) / step, 9)
    vcov.columns = np.round(vcov.columns.to_numpy(float) / step, 9)
    return beta, vcov


def _from_aggregate(data):
    """``(beta, vcov, step)`` of an event-time aggregation, reference row dropped."""
    if data.key_name != "event_time":
        raise EstimationError("didmem.sensitivity needs an event-time aggregation "
                              f"(res.aggregate('dynamic')); got the {data.aggregation!r} aggregation "
                              f"keyed by {data.key_name!r}.")
    beta = pd.Series(np.asarray(data.estimates, float), index=np.asarray(data.keys, float))
    try:
        vcov = data.vcov()
    except ValueError as exc:
        raise EstimationError(f"didmem.sensitivity: {exc}") from None
    references = tuple(getattr(data, "reference_event_times", ()))
    if len(references) > 1:
        raise EstimationError(
            "didmem.sensitivity needs every cohort measured against the same reference event "
            f"time; in this aggregation the cohorts' reference periods sit at event times "
            f"{_listed(references)} (an irregular checkpoint grid: a checkpoint is missing "
            "just before some cohort). Keep only cohorts whose last pre-treatment checkpoint "
            "is one step before treatment, or score the missing checkpoint.")
    step = -references[0] if references and references[0] < 0 else _period(beta.index)
    beta, vcov = _in_periods(beta, vcov, step)
    e = beta.index.to_numpy()
    if -1.0 not in e or beta.loc[-1.0] != 0 or vcov.loc[-1.0, -1.0] != 0:
        raise EstimationError("didmem.sensitivity needs a universal base period (every effect "
                              "measured against the period before treatment, whose estimate "
                              "is then 0): fit with DiDEstimator(base_period='universal'). "
                              f"This aggregation has no zero reference row at event time "
                              f"{-step:g}.")
    keep = e != -1.0
    return beta[keep], vcov.loc[keep, keep], step


def _from_pair(beta, vcov):
    """``(beta, vcov, step)`` of estimates and covariance given by event time, aligned by
    label (sorted by event time, whatever order they came in)."""
    if not isinstance(beta, pd.Series) or not isinstance(vcov, pd.DataFrame):
        raise ParameterError("didmem.sensitivity((beta, vcov)) wants beta as a pandas Series "
                             "indexed by event_time and vcov as a DataFrame labelled by "
                             f"event_time on both axes; got ({type(beta).__name__}, "
                             f"{type(vcov).__name__}).")
    try:
        beta = beta.astype(float)
        beta.index = beta.index.astype(float)
        vcov = vcov.astype(float)
        vcov.index, vcov.columns = vcov.index.astype(float), vcov.columns.astype(float)
    except (TypeError, ValueError) as exc:
        raise ParameterError("didmem.sensitivity((beta, vcov)): beta, vcov and their labels "
                             f"(event times) must be numbers; {exc}") from None
    for what, index in (("beta", beta.index), ("vcov's rows", vcov.index),
                        ("vcov's columns", vcov.columns)):
        if index.has_duplicates:
            raise ParameterError(f"{what} list an event time twice: "
                                 f"{_listed(index[index.duplicated()].unique())}.")
    if not (set(vcov.index) == set(beta.index) == set(vcov.columns)):
        raise ParameterError("vcov must be labelled by the same event times as beta; beta has "
                             f"{_listed(beta.index)}, vcov rows {_listed(vcov.index)} and "
                             f"columns {_listed(vcov.columns)}.")
    beta = beta.sort_index()  # align by label: the arrays are used by position below
    vcov = vcov.loc[beta.index, beta.index]
    e = beta.index.to_numpy(float)
    without_reference = e[e != -1.0]
    # event times in periods when they are consecutive around -1 as they are; otherwise in
    # training steps spaced by a constant (-2000, 0, 1000 with the reference -1000 left out)
    step = 1.0 if _consecutive(without_reference, 1.0) else \
        _period(np.concatenate([e, [0.0]]))
    beta, vcov = _in_periods(beta, vcov, step)
    if -1.0 in beta.index:
        if beta.loc[-1.0] != 0:
            raise EstimationError(f"beta has a non-zero entry at event time {-step:g}, the "
                                  "reference period; leave the reference period out (or give "
                                  "it as 0).")
        beta = beta.drop(-1.0)
        vcov = vcov.drop(index=-1.0, columns=-1.0)
    return beta, vcov, step


def _as_estimates(data):
    """``(beta, sigma, event_times, n_pre, step)`` without the reference period, checked;
    event times in periods of their spacing ``step``."""
    if isinstance(data, AggregateResult):
        beta, vcov, step = _from_aggregate(data)
    elif isinstance(data, tuple) and len(data) == 2:
        beta, vcov, step = _from_pair(*data)
    else:
        raise ParameterError("didmem.sensitivity takes an event-time AggregateResult "
                             "(res.aggregate('dynamic')) or a tuple (beta, vcov); got "
                             f"{type(data).__name__}.")
    e = beta.index.to_numpy()
    b, sigma = beta.to_numpy(), vcov.to_numpy()
    bad = ~np.isfinite(b) | ~np.all(np.isfinite(sigma), axis=1)
    if bad.any():
        raise EstimationError("beta and vcov must be finite; event times with NaN or inf in "
                              f"beta or in vcov's row: {_listed(e[bad] * step)}.")
    if not _consecutive(e, 1.0):
        raise EstimationError("didmem.sensitivity needs consecutive event times around the "
                              f"reference period {-step:g}; got {_listed(e * step)} (a gap or "
                              "a repeat). Aggregate with the same min_e/max_e on a balanced "
                              "grid, or drop the gap.")
    n_pre = int((e < -1).sum())
    if not (e >= 0).any():
        raise EstimationError("No post-treatment event times (>= 0) among the estimates.")
    if n_pre < 1:
        raise EstimationError(
            "didmem.sensitivity needs at least one pre-treatment estimate besides the reference "
            f"period (an event time before {-step:g}) to bound the violations by; the estimates "
            f"have {_listed(e * step)}.")
    if not np.allclose(sigma, sigma.T, rtol=1e-8, atol=1e-14):
        raise EstimationError("vcov is not symmetric.")
    negative = np.diag(sigma) < 0
    if negative.any():
        raise EstimationError("vcov has a negative variance at event times "
                              f"{_listed(e[negative] * step)}.")
    scale = max(float(np.abs(sigma).max()), np.finfo(float).tiny)
    smallest = float(np.linalg.eigvalsh(sigma).min())
    if smallest < -1e-10 * scale:
        raise EstimationError("vcov is not positive semi-definite (its smallest eigenvalue is "
                              f"{smallest:.3g}); it is not a covariance matrix.")
    return b, sigma, e, n_pre, step



def _target(event_time, post_times):
    if finite_number(event_time):
        w = pd.Series({float(event_time): 1.0})
    elif isinstance(event_time, Mapping):
        w = pd.Series({float(k): float(v) for k, v in event_time.items()})
    else:  # a list of event times: their average, as the command line's --average
        times = [float(v) for v in np.asarray(event_time).ravel()]
        w = pd.Series({t: 1.0 / len(times) for t in times})
    missing = sorted(set(w.index) - set(post_times))
    if missing:
        raise ParameterError(f"event_time {_listed(missing)} is not among the post-treatment "
                             f"event times {_listed(post_times)}.")
    return w.reindex(post_times, fill_value=0.0)
