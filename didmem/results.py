"""Immutable results: group-time effects, their aggregations and the pre-test."""

from __future__ import annotations

import html
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy import linalg
from scipy.special import chdtrc

from .aggregate import AggregationSpec, build_aggregation
from .errors import InferenceWarning
from .inference.bands import analytic_se, bootstrap_se, normal_quantile, simultaneous_band
from .inference.bootstrap import BootstrapDraws
from .inference.linear import cell_covariance, combination_covariance, combination_draws

__all__ = ["Estimate", "Pretest", "GroupTimeResult", "AggregateResult", "CellResult"]

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


def _level(alpha: float) -> str:
    """The coverage of an interval with level ``alpha`` as a label, e.g. ``"90%"``."""
    return f"{100 * (1 - alpha):g}%"


class _PicklableProxies:
    """Pickling and deep copies of frozen results that hold read-only mappings.

    ``MappingProxyType`` cannot be pickled, so the state carries plain dicts and the
    proxies are rebuilt on loading; results then cross ``multiprocessing`` and joblib.
    """

    _proxies: tuple = ()

    def __getstate__(self):
        state = dict(self.__dict__)
        for name in self._proxies:
            if isinstance(state.get(name), MappingProxyType):
                state[name] = dict(state[name])
        return state

    def __setstate__(self, state):
        for name, value in state.items():
            if name in self._proxies and isinstance(value, dict):
                for v in value.values():
                    if isinstance(v, np.ndarray):
                        v.flags.writeable = False
                value = MappingProxyType(value)
            elif isinstance(value, np.ndarray):
                value.flags.writeable = False
            object.__setattr__(self, name, value)


def _interval(est, se, crit):
    with np.errstate(invalid="ignore"):
        return est - crit * se, est + crit * se


def _significant(lo, hi):
    with np.errstate(invalid="ignore"):
        return (lo > 0) | (hi < 0)


@dataclass(frozen=True, eq=False)
class GroupTimeResult(_PicklableProxies):
    """Group-time effects tau(g, c) of one estimator on one panel.

    Attributes
    ----------
    estimator : str
        Name of the estimator class.
    params : Mapping
        The estimator parameters that produced the result.
    outcome : str
    lower_is_better : bool
        True when the outcome's sign was flipped before estimation (surprisal, rank, ...),
        so that positive estimates mean memorisation.
    critical_value : float
        Multiplier of the standard errors in ``ci_lower`` / ``ci_upper``: the simultaneous
        sup-t value of the bootstrap, or the normal quantile for pointwise intervals.
    band : {"simultaneous", "pointwise"}
    n_units, n_clusters : int
    influence : CellInfluence or None
        With covariates, the per-unit influence functions of the cells
        (:class:`didmem.inference.influence.CellInfluence`) from which standard errors,
        bootstrap draws, aggregations and the pre-test are computed; None on the grouped-sum
        route (no covariates).
    """

    estimator: str
    params: Mapping[str, Any]
    outcome: str
    lower_is_better: bool
    design: Any = field(repr=False)
    cells: Any = field(repr=False)
    stats: Mapping[str, np.ndarray] = field(repr=False)
    estimates: np.ndarray = field(repr=False)
    std_errors: np.ndarray = field(repr=False)
    analytic_std_errors: np.ndarray = field(repr=False)
    critical_value: float = 1.959963984540054
    band: str = "pointwise"
    alpha: float = 0.05
    bootstrap: BootstrapDraws | None = field(default=None, repr=False)
    influence: Any = field(default=None, repr=False)

    _proxies = ("params", "stats")

    def __post_init__(self):
        for name in ("estimates", "std_errors", "analytic_std_errors"):
            object.__setattr__(self, name, _readonly(getattr(self, name)))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "stats", MappingProxyType({k: _readonly(v) for k, v in self.stats.items()}))

    # ------------------------------------------------------------------ basics
    @property
    def n_units(self) -> int:
        return self.design.n_units

    @property
    def n_clusters(self) -> int:
        return self.design.n_clusters

    @property
    def cohorts(self) -> np.ndarray:
        return self.design.cohorts[self.cells.k]

    @property
    def times(self) -> np.ndarray:
        return self.design.times[self.cells.t]

    @property
    def significant(self) -> np.ndarray:
        """Cells whose band excludes zero."""
        lo, hi = _interval(self.estimates, self.std_errors, self.critical_value)
        return _significant(lo, hi)

    def to_frame(self) -> pd.DataFrame:
        """Tidy table, one row per (cohort, time) cell.

        Columns: cohort, time, base_time (NaN for level comparisons), event_time, post,
        estimate, std_error, ci_lower, ci_upper, significant, n_treated, n_control.
        """
        d, c = self.design, self.cells
        lo, hi = _interval(self.estimates, self.std_errors, self.critical_value)
        counts = np.diff(d.starts)
        tail = np.cumsum(counts[::-1])[::-1]
        n_control = tail[c.cs] - np.where(c.k >= c.cs, counts[c.k], 0)
        base = np.where(c.b >= 0, d.times[np.maximum(c.b, 0)], np.nan)
        return pd.DataFrame(
            {
                "cohort": self.cohorts,
                "time": self.times,
                "base_time": base,
                "event_time": self.times - self.cohorts,
                "post": self.cohorts <= self.times,
                "estimate": self.estimates,
                "std_error": self.std_errors,
                "ci_lower": lo,
                "ci_upper": hi,
                "significant": _significant(lo, hi),
                "n_treated": counts[c.k],
                "n_control": n_control,
            }
        )

    def profile(self, value: str = "estimate", significant_only: bool = False) -> pd.DataFrame:
        """The cohort x time matrix of one column of :meth:`to_frame` (NaN where no cell).

        With ``significant_only``, cells whose band covers zero are NaN, as in the paper's
        heatmaps.
        """
        return profile_matrix(self.to_frame(), value, significant_only)

    # ------------------------------------------------------------ aggregation
    def aggregate(self, kind: str = "simple", *, min_e: float = -np.inf, max_e: float = np.inf,
                  balance_e: float | None = None, time: float | None = None) -> "AggregateResult":
        """Aggregate the cells.

        Parameters
        ----------
        kind : str
            Memorisation names: ``"instantaneous"`` (c = g, one value per cohort),
            ``"persistent"`` (by event time e = c - g > 0), ``"residual"`` (c = T, per
            cohort; ``time`` picks T, by default the last checkpoint), ``"cohort"``,
            ``"checkpoint"``, ``"overall"``. R ``did`` names: ``"simple"``, ``"group"``,
            ``"dynamic"``, ``"calendar"`` (``"cohort"``, ``"checkpoint"`` and ``"overall"``
            are their aliases).
        min_e, max_e, balance_e : float, optional
            Event-time window and balancing, as in R's ``aggte`` (``max_e`` also limits the
            post-treatment cells of ``simple`` and ``group``; event times are on the
            original time scale).
        time : float, optional
            The final checkpoint of ``residual``.

        Returns
        -------
        AggregateResult
            Standard errors from the influence function, with R's estimated-weights term, or
            from the same bootstrap draws as the cells; the band over keys is simultaneous
            when the cells' band is.

        Notes
        -----
        With ``w_g`` the cohort shares among the keys' cells, a key is
        ``sum_c w_{g(c)} tau(c) / sum_c w_{g(c)}``; the overall value of ``group``,
        ``instantaneous`` and ``residual`` weights cohorts by their shares, that of
        ``dynamic``, ``persistent`` and ``calendar`` is the plain mean of the keys
        (``dynamic``: keys with e >= 0), as in R ``did``.
        """
        spec = build_aggregation(self.design, self.cells, np.asarray(self.estimates), kind,
                                 min_e=min_e, max_e=max_e, balance_e=balance_e, time=time)
        return AggregateResult._from_spec(self, spec)

    # ------------------------------------------------------------- pre-test
    @cached_property
    def pretest(self) -> Pretest:
        """Wald pre-test of parallel trends over the pre-treatment cells (computed once)."""
        before = self.cohorts > self.times
        pre = before & np.isfinite(self.analytic_std_errors)
        which = np.flatnonzero(pre)
        if which.size == 0:
            n_before = int(before.sum())
            return Pretest(np.nan, 0, np.nan, "no pre-treatment cells to test" if not n_before
                           else f"none of the {n_before} pre-treatment cells has a standard "
                                "error; their variance is zero: is the outcome constant?")
        cov = cell_covariance(self.design, self.cells, self.stats, which, self.influence)
        if not np.all(np.isfinite(cov)):
            warnings.warn("Pre-test not computed: NaN in the pre-treatment covariance.",
                          InferenceWarning, stacklevel=2)
            return Pretest(np.nan, which.size, np.nan, "NaN in the covariance")
        lu, piv = linalg.lu_factor(cov, check_finite=False)
        rcond, _ = linalg.lapack.dgecon(lu, np.abs(cov).sum(axis=0).max(), norm="1")
        if rcond <= np.finfo(float).eps:  # R: rcond(preV) <= .Machine$double.eps
            warnings.warn("Pre-test not computed: the pre-treatment covariance is singular.",
                          InferenceWarning, stacklevel=2)
            return Pretest(np.nan, which.size, np.nan, "singular covariance")
        est = np.asarray(self.estimates)[which]
        stat = float(est @ linalg.lu_solve((lu, piv), est, check_finite=False))
        return Pretest(stat, int(which.size), float(chdtrc(which.size, stat)))

    def plot(self, kind: str = "profile", **options):
        """Draw a figure of :mod:`didmem.plotting` (``kind`` is a key of ``PLOTS``).

        ``options`` (``ax=``, ``lr_schedule=``, ...) go to the plotting function; returns the
        matplotlib Axes.
        """
        from .plotting import PLOTS

        if kind not in PLOTS:
            from .errors import ParameterError

            raise ParameterError(f"Unknown figure {kind!r}; choose from {sorted(PLOTS)}.")
        return PLOTS[kind](self, **options)

    # ------------------------------------------------------------------- save
    def save(self, path):
        """Write the cells, aggregations, pre-test and settings to a parquet file.

        Read it back with :func:`didmem.load_result` (see :mod:`didmem.results_io`); the
        result itself is not changed.
        """
        from .results_io import save_result

        return save_result(self, path)

    # --------------------------------------------------------------- display
    def _inference_line(self) -> str:
        if self.bootstrap is None:
            return "analytic standard errors (influence function); pointwise intervals"
        return (f"multiplier bootstrap, {self.bootstrap.n_draws} {self.bootstrap.multiplier} "
                f"draws; {self.band} {_level(self.alpha)} band, critical value "
                f"{self.critical_value:.3f}")

    def summary(self) -> str:
        """A text summary: settings, significant cells, overall effect and the pre-test."""
        frame = self.to_frame()
        post = frame[frame["post"]]
        overall = self.aggregate("simple").overall
        pre = self.pretest
        p = dict(self.params)
        if "outcome" in p:  # the outcome used, also when the panel's only one was implied
            p["outcome"] = self.outcome
        lines = [
            f"{self.estimator} on outcome {self.outcome!r}"
            + (" (sign flipped: lower is better)" if self.lower_is_better else ""),
            f"  units: {self.n_units} in {self.design.n_cohorts} cohorts + "
            f"{np.diff(self.design.starts)[-1]} never-treated; {self.design.times.size} times"
            + (f"; {self.n_clusters} clusters" if self.n_clusters else ""),
            "  settings: " + ", ".join(f"{k}={v!r}" for k, v in p.items()),
            f"  inference: {self._inference_line()}",
            f"  cells: {len(frame)} ({len(post)} post-treatment); significant: "
            f"{int(post['significant'].sum())} post, "
            f"{int(frame.loc[~frame['post'], 'significant'].sum())} pre",
            f"  overall ATT (simple): {overall.estimate:.4g} (SE {overall.std_error:.3g}, "
            f"{_level(self.alpha)} CI [{overall.ci_lower:.4g}, {overall.ci_upper:.4g}])",
            (f"  pre-test of parallel trends: W = {pre.statistic:.4g}, df = {pre.df}, "
             f"p = {pre.pvalue:.4g}") if pre.df and np.isfinite(pre.statistic)
            else f"  pre-test: not available ({pre.note})",
            "  " + SIGN_NOTE,
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<GroupTimeResult {self.estimator} outcome={self.outcome!r}: "
                f"{self.cells.size} cells, {self.n_units} units, {self.band} band>")

    def _repr_html_(self) -> str:
        head = self.to_frame().head(20).to_html(index=False, float_format=lambda v: f"{v:.4g}")
        text = html.escape(self.summary()).replace("\n", "<br>")
        return f"<div><p style='font-family:monospace'>{text}</p>{head}</div>"


@dataclass(frozen=True, eq=False)
class AggregateResult(_PicklableProxies):
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
    alpha: float = 0.05

    _proxies = ("options",)

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
        if spec.undefined_overall:  # e.g. only pre-treatment event times: NaN as in R
            est[-1] = se[-1] = np.nan
        lo, hi = _interval(est[-1], se[-1], z)
        return cls(kind=spec.kind, key_name=spec.key_name, keys=_readonly(spec.keys),
                   estimates=_readonly(est[:-1]), std_errors=_readonly(se[:-1]),
                   overall=Estimate(float(est[-1]), float(se[-1]), float(lo), float(hi)),
                   critical_value=float(crit), band=band,
                   options=MappingProxyType(dict(spec.options)),
                   draws=None if draws is None else _readonly(draws),
                   covariance=_readonly(cov[:-1, :-1]), alpha=float(res.alpha))

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
                f"{_level(self.alpha)} CI [{o.ci_lower:.4g}, {o.ci_upper:.4g}])")
        if self.key_name is None:
            return head
        return head + f"\n{self.band} band, critical value {self.critical_value:.3f}\n" + \
            self.to_frame().to_string(index=False, float_format=lambda v: f"{v:.4g}")

    def __repr__(self) -> str:
        return f"<AggregateResult {self.kind}: {self.keys.size} keys, overall={self.overall.estimate:.4g}>"


_CELL_COLUMNS = ("cohort", "time", "event_time", "estimate", "std_error", "ci_lower",
                 "ci_upper", "significant", "n_units")


@dataclass(frozen=True, eq=False)
class CellResult(_PicklableProxies):
    """Estimates of one of the other memorisation estimators on the (cohort, time) grid.

    The architectural, extractable, influence-function and two-way fixed-effects estimators
    return this result, so that they line up row for row with :class:`GroupTimeResult` (see
    :func:`didmem.compare`).

    Attributes
    ----------
    estimator : str
        Name of the estimator class.
    params : Mapping
        The estimator parameters that produced the result.
    outcome : str
        The outcome (metric) the estimates are on.
    assumption : str
        The identifying assumption the estimator rests on, in words.
    cells : pandas.DataFrame
        One row per (cohort, time) cell: cohort, time, event_time, estimate, std_error,
        ci_lower, ci_upper, significant, n_units (NaN standard errors where undefined).
    units : pandas.DataFrame or None
        Per-instance estimates (unit, cohort, time, estimate, std_error) of instance-level
        estimators; None for the regression.
    extra : Mapping
        Estimator-specific tables (for example the event-study coefficients of the
        two-way fixed-effects regression).
    alpha : float
        One minus the coverage of the (pointwise) intervals.
    """

    estimator: str
    params: Mapping[str, Any]
    outcome: str
    assumption: str
    cells: pd.DataFrame = field(repr=False)
    units: pd.DataFrame | None = field(default=None, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    alpha: float = 0.05

    _proxies = ("params", "extra")

    def __post_init__(self):
        missing = [c for c in _CELL_COLUMNS if c not in self.cells.columns]
        if missing:  # pragma: no cover - internal invariant
            raise ValueError(f"CellResult cells lack columns {missing}.")
        cells = self.cells.loc[:, list(_CELL_COLUMNS)].sort_values(["cohort", "time"])
        object.__setattr__(self, "cells", cells.reset_index(drop=True))
        if self.units is not None:
            object.__setattr__(self, "units", self.units.reset_index(drop=True).copy())
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    @classmethod
    def from_cells(cls, *, cohort, time, estimate, std_error, n_units, alpha=0.05, **kwargs):
        """Build the cell table with pointwise normal intervals from arrays."""
        cohort = np.asarray(cohort, dtype=np.float64)
        time = np.asarray(time, dtype=np.float64)
        est = np.asarray(estimate, dtype=np.float64)
        se = np.asarray(std_error, dtype=np.float64)
        lo, hi = _interval(est, se, normal_quantile(1 - alpha / 2))
        cells = pd.DataFrame({"cohort": cohort, "time": time, "event_time": time - cohort,
                              "estimate": est, "std_error": se, "ci_lower": lo, "ci_upper": hi,
                              "significant": _significant(lo, hi),
                              "n_units": np.asarray(n_units, dtype=np.int64)})
        return cls(cells=cells, alpha=alpha, **kwargs)

    @property
    def estimates(self) -> np.ndarray:
        """The cells' estimates, in the order of :meth:`to_frame`."""
        return self.cells["estimate"].to_numpy()

    def to_frame(self) -> pd.DataFrame:
        """Tidy table, one row per (cohort, time) cell (a copy of :attr:`cells`)."""
        return self.cells.copy()

    def unit_frame(self) -> pd.DataFrame:
        """Per-instance estimates; raises for estimators that have none."""
        if self.units is None:
            raise AttributeError(f"{self.estimator} has no per-instance estimates.")
        return self.units.copy()

    def profile(self, value: str = "estimate") -> pd.DataFrame:
        """The cohort x time matrix of one column of :meth:`to_frame`."""
        return self.cells.pivot(index="cohort", columns="time", values=value)

    def summary(self) -> str:
        c = self.cells
        post = c[c["time"] >= c["cohort"]]
        lines = [f"{self.estimator} on outcome {self.outcome!r}",
                 f"  assumption: {self.assumption}",
                 f"  cells: {len(c)} ({len(post)} post-treatment); significant post: "
                 f"{int(post['significant'].sum())}"]
        if self.units is not None:
            lines.append(f"  instances: {self.units['unit'].nunique()}")
        lines.append("  " + SIGN_NOTE)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<CellResult {self.estimator} outcome={self.outcome!r}: {len(self.cells)} cells>"
