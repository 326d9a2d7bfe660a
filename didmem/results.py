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
from .inference.linear import (cell_covariance, combination_block_variances,
                               combination_covariance, combination_draws)
from .inference.small_sample import block_welch, cluster_correction, normal_level, t_critical_values
from .inference.pretrend import PretrendTest
from .results_pretrend import pretrend_test as _pretrend_test

__all__ = ["Estimate", "Pretest", "PretrendTest", "GroupTimeResult", "AggregateResult",
           "CellResult"]

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


def _small_sample_aggregate(res, spec, cov, draws, band, crit):
    """Welch-corrected standard errors and t critical values of an aggregation's rows.

    Each row's variance is corrected block by block (:func:`~didmem.inference.small_sample.
    block_welch`; CR1 with clusters); the band's normal-scale sup-t value comes from the
    draws studentised by the uncorrected analytic standard errors, and the keys share the
    largest of their t quantiles at its level. Returns the standard errors, the keys'
    critical value and the overall value's (pointwise) one.
    """
    raw = np.diag(cov).copy()
    if res.design.clusters is not None:
        var, df = cluster_correction(raw, res.n_clusters)
    else:
        parts = combination_block_variances(res.design, res.cells, res.stats, spec.weights,
                                            spec.omega, res.influence)
        var, df = block_welch(parts, np.diff(res.design.starts))
    se = np.where(np.isnan(analytic_se(raw)), np.nan, analytic_se(var))
    z_overall = float(t_critical_values(1 - res.alpha / 2, df[-1:])[0])
    if band == "simultaneous":
        raw_se = analytic_se(raw)
        scale = res.n_units / np.sqrt(res.n_clusters or res.n_units)
        c_normal, _ = simultaneous_band(draws[:, :-1], raw_se[:-1], res.alpha, scale,
                                        at_least_normal=True)
        level = normal_level(c_normal)
    else:
        level = 1 - res.alpha / 2
    keys_crit = t_critical_values(level, df[:-1])
    crit = float(np.nanmax(keys_crit)) if np.isfinite(keys_crit).any() else crit
    return se, crit, z_overall


def _interval(est, se, crit):
    with np.errstate(invalid="ignore"):
        return est - crit * se, est + crit * se


def _significant(lo, hi):
    with np.errstate(invalid="ignore"):
        return (lo > 0) | (hi < 0)


@dataclass(frozen=True, eq=False)
class GroupTimeResult:
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
        sup-t value of the bootstrap, or the normal quantile for pointwise intervals. With
        the small-sample correction the cells have their own multipliers
        (``cell_critical_values``) and this is the largest of them.
    band : {"simultaneous", "pointwise"}
    n_units, n_clusters : int
    influence : CellInfluence or None
        With covariates, the per-unit influence functions of the cells
        (:class:`didmem.inference.influence.CellInfluence`) from which standard errors,
        bootstrap draws, aggregations and the pre-test are computed; None on the grouped-sum
        route (no covariates).
    small_sample : SmallSampleCells or None
        The Welch correction (variances, degrees of freedom) when ``small_sample=True``
        (:mod:`didmem.inference.small_sample`).
    cell_critical_values : ndarray or None
        Each cell's multiplier under the small-sample correction: the t quantile, with the
        cell's degrees of freedom, at the pointwise level of the sup-t band.
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
    small_sample: Any = field(default=None, repr=False)
    cell_critical_values: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        for name in ("estimates", "std_errors", "analytic_std_errors"):
            object.__setattr__(self, name, _readonly(getattr(self, name)))
        if self.cell_critical_values is not None:
            object.__setattr__(self, "cell_critical_values",
                               _readonly(self.cell_critical_values))
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
    def _crit(self):
        """The multiplier of every cell's standard error (one value, or one per cell)."""
        if self.cell_critical_values is not None:
            return np.asarray(self.cell_critical_values)
        return self.critical_value

    @property
    def significant(self) -> np.ndarray:
        """Cells whose band excludes zero."""
        lo, hi = _interval(self.estimates, self.std_errors, self._crit)
        return _significant(lo, hi)

    def to_frame(self) -> pd.DataFrame:
        """Tidy table, one row per (cohort, time) cell.

        Columns: cohort, time, base_time (NaN for level comparisons), event_time, post,
        estimate, std_error, ci_lower, ci_upper, significant, n_treated, n_control.
        """
        d, c = self.design, self.cells
        lo, hi = _interval(self.estimates, self.std_errors, self._crit)
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
        pre = (self.cohorts > self.times) & np.isfinite(self.analytic_std_errors)
        which = np.flatnonzero(pre)
        if which.size == 0:
            return Pretest(np.nan, 0, np.nan, "no pre-treatment cells to test")
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

    def pretrend_test(self, method: str | None = None) -> PretrendTest:
        """Pre-test of parallel trends.

        Parameters
        ----------
        method : {None, "event", "max_t", "wald"}
            ``None``: the calibrated default, ``"event"``. ``"event"``: Wald test that the
            event-time averages of the pre-treatment cells (R's ``dynamic`` aggregation at
            ``e < 0``) are zero; with ``small_sample`` its covariance is scaled by
            ``n / (n - 1)`` and the p-value is Hotelling's F. ``"max_t"``: the largest
            studentised pre-treatment cell against the multiplier bootstrap's maximum (the
            fit's draws, or 999 fresh ones seeded by ``random_state``). ``"wald"``: R
            ``did``'s Wald test of every pre-treatment cell, the same numbers as
            :attr:`pretest`.

        Returns
        -------
        PretrendTest
            ``statistic``, ``pvalue``, ``method``, ``df`` (Wald tests) and, for ``"event"``,
            its power against a linear pre-trend of 0.25 pre-cell standard errors per period.

        Notes
        -----
        R's Wald test inverts the covariance of every pre-treatment cell, estimated from the
        units; with thousands of cells (the paper's 4,465) it rejects true parallel trends
        almost always. The event-time test has one restriction per event time and, against a
        trend shared by the cohorts, the power of all the cells together; the max-|t| test is
        calibrated however many cells there are (Chernozhukov, Chetverikov & Kato 2013) and
        detects a few large deviations. Sizes and powers: the docs' *Inference* page.
        """
        return _pretrend_test(self, method)

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
            extra = (" with small-sample (Welch, t) correction"
                     if self.cell_critical_values is not None else "")
            return f"analytic standard errors (influence function){extra}; pointwise intervals"
        if self.cell_critical_values is not None:
            crit = np.asarray(self.cell_critical_values)
            crit = crit[np.isfinite(crit)]
            lo_c, hi_c = (crit.min(), crit.max()) if crit.size else (np.nan, np.nan)
            return (f"multiplier bootstrap, {self.bootstrap.n_draws} {self.bootstrap.multiplier} "
                    f"draws; {self.band} {100 * (1 - self.alpha):g}% band with small-sample "
                    f"(Welch, t) correction, critical values {lo_c:.3f}-{hi_c:.3f}")
        return (f"multiplier bootstrap, {self.bootstrap.n_draws} {self.bootstrap.multiplier} "
                f"draws; {self.band} {100 * (1 - self.alpha):g}% band, critical value "
                f"{self.critical_value:.3f}")

    def summary(self) -> str:
        """A text summary: settings, significant cells, overall effect and the pre-test."""
        frame = self.to_frame()
        post = frame[frame["post"]]
        overall = self.aggregate("simple").overall
        pre = self.pretest
        calibrated = self.pretrend_test()
        p = dict(self.params)
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
            f"95% CI [{overall.ci_lower:.4g}, {overall.ci_upper:.4g}])",
            "  " + calibrated.describe(),
            (f"  R did's Wald pre-test (all {pre.df} pre-treatment cells; over-rejects with "
             f"many cells): W = {pre.statistic:.4g}, p = {pre.pvalue:.4g}")
            if pre.df and np.isfinite(pre.statistic)
            else f"  R did's Wald pre-test: not available ({pre.note})",
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
        z_overall = z
        if res.small_sample is not None:
            se, crit, z_overall = _small_sample_aggregate(res, spec, cov, draws, band, crit)
        lo, hi = _interval(est[-1], se[-1], z_overall)
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
        (``IF'IF / n**2``); its diagonal is the analytic squared standard error of R's rule
        (``small_sample=False``; the default's standard errors are Welch-corrected, see
        :mod:`didmem.inference.small_sample`). This is what :func:`didmem.sensitivity` takes.

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


_CELL_COLUMNS = ("cohort", "time", "event_time", "estimate", "std_error", "ci_lower",
                 "ci_upper", "significant", "n_units")


@dataclass(frozen=True, eq=False)
class CellResult:
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
