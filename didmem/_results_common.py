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

from .inference.bands import analytic_se, bootstrap_se, normal_quantile, simultaneous_band
from .inference.linear import combination_covariance, combination_draws

if TYPE_CHECKING:
    from .aggregate import AggregationSpec
    from .results import GroupTimeResult

__all__ = ["Estimate", "Pretest", "AggregateResult", "profile_matrix", "SIGN_NOTE"]

SIGN_NOTE = (
    "Sign convention: an estimate is positive when training on the instances raised the "
    "outcome (memorisation under a higher-is-better metric)."
)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


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
        est = spec.weights @ np.asarray(res.estimates)
        cov = combination_covariance(res.design, res.cells, res.stats, spec.weights,
                                     spec.omega, res.influence)
        se = analytic_se(np.diag(cov).copy())
        z = normal_quantile(1 - res.alpha / 2)
        crit, band, draws = z, "pointwise", None
        if res.bootstrap is not None:
            draws = combination_draws(res.design, res.bootstrap, spec.weights, spec.omega)
            scale = res.n_units / np.sqrt(res.n_clusters or res.n_units)
            se = bootstrap_se(draws, scale)
            if res.band == "simultaneous" and spec.key_name is not None:
                crit, band = simultaneous_band(draws[:, :-1], se[:-1], res.alpha, scale,
                                               at_least_normal=True)
        lo, hi = _interval(est[-1], se[-1], z)
        return cls(kind=spec.kind, key_name=spec.key_name, keys=_readonly(spec.keys),
                   estimates=_readonly(est[:-1]), std_errors=_readonly(se[:-1]),
                   overall=Estimate(float(est[-1]), float(se[-1]), float(lo), float(hi)),
                   critical_value=float(crit), band=band,
                   options=MappingProxyType(dict(spec.options)),
                   draws=None if draws is None else _readonly(draws),
                   covariance=_readonly(cov[:-1, :-1]))

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
