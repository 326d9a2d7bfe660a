"""The leaf of the results: scalar estimates, the pre-test, aggregations and the profile matrix.

Everything here is shared by fitted results (:mod:`didmem.results`) and saved ones
(:mod:`didmem.results_io`); it imports neither, so those two never import each other both
ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import pandas as pd

from ._arrays import readonly

if TYPE_CHECKING:
    from .aggregate import AggregationSpec
    from .results import GroupTimeResult

__all__ = ["Estimate", "Pretest", "AggregateResult", "profile_matrix", "SIGN_NOTE"]

SIGN_NOTE = (
    "Sign convention: an estimate is positive when training on the instances raised the "
    "outcome (memorisation under a higher-is-better metric)."
)


@dataclass(frozen=True)
class Estimate:
    """A scalar estimate with its standard error and (pointwise) confidence interval."""

    estimate: float
    std_error: float
    ci_lower: float
    ci_upper: float

    @property
    def significant(self) -> bool:
        """True when the interval excludes zero."""
        return bool(self.ci_lower > 0 or self.ci_upper < 0)


@dataclass(frozen=True)
class Pretest:
    """Wald pre-test of parallel trends: all pre-treatment cells are zero.

    ``statistic = tau_pre' V^-1 tau_pre`` with the analytic covariance ``V`` of the
    pre-treatment cells (those with cohort > time, less cells whose variance is zero),
    chi-squared with ``df`` = their number, as R ``did``'s ``att_gt`` reports.
    ``note`` says why the test is missing when ``statistic`` is NaN.
    """

    statistic: float
    df: int
    pvalue: float
    note: str = ""


def profile_matrix(frame: pd.DataFrame, value: str, significant_only: bool) -> pd.DataFrame:
    """Cohort x time matrix of one column of a tidy cell table (NaN where no cell)."""
    if value not in frame.columns:
        raise KeyError(f"Unknown column {value!r}; choose from {list(frame.columns)}.")
    if significant_only:
        frame = frame.copy()
        frame.loc[~frame["significant"], value] = np.nan
    return frame.pivot(index="cohort", columns="time", values=value)


def _interval(est, se, crit):
    with np.errstate(invalid="ignore"):
        return est - crit * se, est + crit * se


def _significant(lo, hi):
    with np.errstate(invalid="ignore"):
        return (lo > 0) | (hi < 0)



@dataclass(frozen=True, eq=False)
class AggregateResult:
    """An aggregation of group-time effects: one value per key, and an overall value.

    Attributes
    ----------
    kind : str
        The aggregation (canonical R name or memorisation name).
    key_name : str or None
        ``"cohort"``, ``"event_time"`` or ``"time"``; None for ``simple``.
    overall : Estimate
        The overall value, with a pointwise interval.
    critical_value : float
        Multiplier of the keys' standard errors (simultaneous over keys when bootstrapped).
    """

    kind: str
    key_name: str | None
    keys: np.ndarray = field(repr=False)
    estimates: np.ndarray = field(repr=False)
    std_errors: np.ndarray = field(repr=False)
    overall: Estimate = None
    critical_value: float = 1.959963984540054
    band: str = "pointwise"
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    draws: np.ndarray | None = field(default=None, repr=False)
    covariance: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def _from_spec(cls, res: GroupTimeResult, spec: AggregationSpec) -> "AggregateResult":
        """The aggregation ``spec`` of a fitted result, with the result's own inference."""
        est = spec.weights @ np.asarray(res.estimates)
        inference = res.inference
        combo = inference.combination(
            spec.weights, spec.omega,
            simultaneous=res.band == "simultaneous" and spec.key_name is not None)
        se = combo.std_errors
        lo, hi = _interval(est[-1], se[-1], inference.normal_critical_value)
        return cls(kind=spec.kind, key_name=spec.key_name, keys=readonly(spec.keys),
                   estimates=readonly(est[:-1]), std_errors=readonly(se[:-1]),
                   overall=Estimate(float(est[-1]), float(se[-1]), float(lo), float(hi)),
                   critical_value=float(combo.band.critical_value), band=combo.band.kind,
                   options=MappingProxyType(dict(spec.options)),
                   draws=None if combo.draws is None else readonly(combo.draws),
                   covariance=readonly(combo.covariance[:-1, :-1]))

    def vcov(self) -> pd.DataFrame:
        """The analytic covariance of the keys' estimates, labelled by key on both axes.

        ``sum_i psi_i psi_i'`` of the same influence functions as the analytic standard
        errors (of cluster sums when clustered), as R ``did``'s ``honest_did`` uses
        (``IF'IF / n**2``); its diagonal is the analytic squared standard error. This is what
        :func:`didmem.sensitivity` takes.

        Raises
        ------
        ValueError
            For ``simple`` (no keys) or a result loaded without its covariance.
        """
        if self.key_name is None:
            raise ValueError(f"The {self.kind!r} aggregation has no keys, so no covariance "
                             "matrix; aggregate by event_time, cohort or time.")
        if self.covariance is None:
            raise ValueError("This aggregation carries no covariance (it was loaded from a "
                             "file written without it); aggregate the group-time result again.")
        idx = pd.Index(self.keys, name=self.key_name)
        return pd.DataFrame(np.array(self.covariance), index=idx,
                            columns=pd.Index(self.keys, name=self.key_name))

    def to_frame(self) -> pd.DataFrame:
        """One row per key: the key column, estimate, std_error, ci_lower, ci_upper, significant.

        For ``simple`` (no keys) the single row is the overall value.
        """
        if self.key_name is None:
            o = self.overall
            return pd.DataFrame({"estimate": [o.estimate], "std_error": [o.std_error],
                                 "ci_lower": [o.ci_lower], "ci_upper": [o.ci_upper],
                                 "significant": [o.significant]})
        lo, hi = _interval(self.estimates, self.std_errors, self.critical_value)
        return pd.DataFrame({self.key_name: self.keys, "estimate": self.estimates,
                             "std_error": self.std_errors, "ci_lower": lo, "ci_upper": hi,
                             "significant": _significant(lo, hi)})

    def summary(self) -> str:
        o = self.overall
        head = (f"{self.kind} aggregation: overall {o.estimate:.4g} (SE {o.std_error:.3g}, "
                f"95% CI [{o.ci_lower:.4g}, {o.ci_upper:.4g}])")
        if self.key_name is None:
            return head
        return head + f"\n{self.band} band, critical value {self.critical_value:.3f}\n" + \
            self.to_frame().to_string(index=False, float_format=lambda v: f"{v:.4g}")

    def __repr__(self) -> str:
        return f"<AggregateResult {self.kind}: {self.keys.size} keys, overall={self.overall.estimate:.4g}>"
