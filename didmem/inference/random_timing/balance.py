"""The balance of pre-treatment outcomes across cohorts: a check of random timing.

Under random timing every pre-treatment comparison ``X = sum_g A_0g . Ybar_g`` (the
estimands' ``Xhat``: each cohort against its controls in the checkpoint before it is
treated) has mean zero. R ``staggered``'s ``balance_checks`` stacks the ``Xhat`` of the
estimands asked for, with their design-based covariance ``V = sum_g A_0g S_g A_0g' / N_g``,
and reports a t-test per row and the Wald statistic ``X' V^+ X`` against a chi-squared with
as many degrees of freedom as rows. This module gives the same numbers (to 1e-8:
tests/test_reference_random_timing.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import chdtrc, ndtr

from ...errors import EstimationError
from . import weights
from .design import TimingDesign, generalised_inverse

__all__ = ["BalanceTest", "balance_test"]


@dataclass(frozen=True, eq=False)
class BalanceTest:
    """Per row: the pre-treatment difference ``x_hat``, its standard error, ``t`` and the
    two-sided normal ``pvalue``; jointly: ``wald``, ``df`` and ``pvalue_wald``."""

    rows: tuple
    x_hat: np.ndarray
    std_error: np.ndarray
    t: np.ndarray
    pvalue: np.ndarray
    wald: float
    df: int
    pvalue_wald: float


def balance_test(design: TimingDesign, estimands=("simple", "cohort", "calendar"),
                 event_times=(0,), last_treated: bool = False) -> BalanceTest:
    """R ``staggered``'s ``balance_checks`` (``estimand = "all"`` by default: the
    ``Xhat`` of simple, cohort, calendar and the event times)."""
    codes, n, n_t = design.codes, design.count, design.n_times
    builders = {"simple": weights.simple_weights, "cohort": weights.cohort_weights,
                "calendar": weights.calendar_weights}
    names, a_0 = [], []
    for name in estimands:
        names.append(name)
        a_0.append(builders[name](codes, n, n_t, last_treated)[1])
    for e in event_times:
        pair = weights.event_time_weights(codes, n, n_t, int(e), last_treated)
        if pair is None:
            raise EstimationError(f"No cohort has a comparison at event time {e}.")
        names.append(f"ES{int(e)}")
        a_0.append(pair[1])
    a_0 = np.stack(a_0)  # (J, K, T)
    x_hat = np.einsum("jkt,kt->j", a_0, design.mean)
    a0_k = a_0.transpose(1, 0, 2)
    vcv = np.einsum("kjs,kis,k->ji", a0_k @ design.cov, a0_k, 1.0 / n)
    se = np.sqrt(np.diag(vcv))
    t = np.abs(x_hat / se)
    wald = float(x_hat @ generalised_inverse(vcv) @ x_hat)
    return BalanceTest(rows=tuple(names), x_hat=x_hat, std_error=se, t=t,
                       pvalue=2 * ndtr(-t), wald=wald, df=len(names),
                       pvalue_wald=float(chdtrc(len(names), wald)))
