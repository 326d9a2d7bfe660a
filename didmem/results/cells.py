"""Immutable results: group-time effects, their aggregations and the pre-test."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .._arrays import readonly
from .._validation import Instance, Interval, Satisfies, validate_params
from ..errors import EstimationError, ParameterError
from ..inference.cell_inference import (DEFAULT_PRETREND, PRETREND_METHODS, CellInference,
                                        PretrendTest, cell_counts, normal_quantile)
from .common import (
    SIGN_NOTE,
    Estimate,
    Pretest,
    PicklableProxies,
    _interval,
    level_label,
    _significant,
    profile_matrix,
)
from .aggregations import AggregateResult, build_aggregation
from ._settings import ResultSettings
from .saving import save_result

__all__ = ["Estimate", "Pretest", "PretrendTest", "GroupTimeResult", "AggregateResult",
           "CellResult"]


def _inferred(name: str, doc: str) -> property:
    """A read-only attribute of the result that the fit's inference object holds."""
    return property(lambda self: getattr(self.inference, name), doc=doc)


def _event_bound(value) -> bool:
    """A number, possibly infinite (the default window is unbounded), never NaN."""
    return isinstance(value, (int, float, np.integer, np.floating)) \
        and not isinstance(value, bool) and not np.isnan(value)


_AGGREGATE_OPTIONS = {
    "aggregation": Instance(str, description="an aggregation's name (a str)"),
    "min_e": Satisfies(_event_bound, "a number (-inf or inf for no bound), not NaN"),
    "max_e": Satisfies(_event_bound, "a number (-inf or inf for no bound), not NaN"),
    "balance_e": Interval(allow_none=True),
    "time": Interval(allow_none=True),
}


@dataclass(frozen=True, eq=False)
class GroupTimeResult(PicklableProxies):
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
    inference : CellInference
        The fit's inference (:class:`didmem.inference.cell_inference.CellInference`): scale,
        bootstrap draws, alpha and the band rule, shared by the cells, every aggregation and
        the pre-test. ``prepared``, ``cells``, ``stats``, ``influence``, ``bootstrap`` and
        ``alpha`` are read from it.
    critical_value : float
        Multiplier of the standard errors in ``ci_lower`` / ``ci_upper``: the simultaneous
        sup-t value of the bootstrap, or the normal quantile for pointwise intervals. With
        the small-sample correction the cells have their own multipliers
        (``cell_critical_values``) and this is the largest of them.
    band : {"simultaneous", "pointwise"}
    n_units, n_clusters : int
    cell_critical_values : ndarray or None
        Each cell's multiplier under the small-sample correction: the t quantile, with the
        cell's degrees of freedom, at the pointwise level of the sup-t band
        (:mod:`didmem.inference.small_sample`); None under R's rule (``small_sample=False``).
    """

    estimator: str
    params: Mapping[str, Any]
    outcome: str
    lower_is_better: bool
    inference: CellInference = field(repr=False)
    estimates: np.ndarray = field(repr=False)
    std_errors: np.ndarray = field(repr=False)
    analytic_std_errors: np.ndarray = field(repr=False)
    critical_value: float = float("nan")  # always given by the inference that made it
    band: str = "pointwise"
    cell_critical_values: np.ndarray | None = field(default=None, repr=False)

    _proxies = ("params",)

    @classmethod
    def from_inference(cls, inference: CellInference, *, estimator: str,
                       params: Mapping[str, Any], outcome: str, lower_is_better: bool,
                       **extra) -> "GroupTimeResult":
        """The one builder of a group-time result (of every route and every exposure):
        the cells' estimates from the fit's influence, their standard errors and band from
        its inference. ``extra`` are a subclass's own fields."""
        analytic, band = inference.cell_band(inference.variance)
        return cls(estimator=estimator, params=params, outcome=outcome,
                   lower_is_better=lower_is_better, inference=inference,
                   estimates=inference.influence.estimates, std_errors=band.std_errors,
                   analytic_std_errors=analytic, critical_value=band.critical_value,
                   band=band.rule, cell_critical_values=band.cell_critical_values, **extra)

    def __post_init__(self):
        for name in ("estimates", "std_errors", "analytic_std_errors"):
            object.__setattr__(self, name, readonly(getattr(self, name)))
        if self.cell_critical_values is not None:
            object.__setattr__(self, "cell_critical_values",
                               readonly(self.cell_critical_values))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    # ------------------------------------------------------------------ basics
    prepared = _inferred("prepared", "The prepared panel the cells were estimated on.")
    cells = _inferred("cells", "The layout of the (cohort, time) cells.")
    stats = _inferred("stats", "The cells' grouped statistics (read-only).")
    @property
    def influence(self):
        """The cells' influence functions where a route holds them per unit or per row
        (covariates, holes, cross-sections, later exposures: a
        :class:`~didmem.inference.influence.CellInfluence`); None on the balanced route
        without covariates, whose influence is the cells' grouped statistics
        (``inference.influence`` holds it there too)."""
        influence = self.inference.influence
        return None if influence.cohort_moments else influence
    bootstrap = _inferred("bootstrap", "The bootstrap draws, or None for analytic inference.")
    alpha = _inferred("alpha", "One minus the coverage of intervals and bands.")
    small_sample = _inferred("correction", "The small-sample correction (Welch variances and "
                             "degrees of freedom), or None under R's rule.")

    @property
    def n_units(self) -> int:
        return self.prepared.n_units

    @property
    def n_clusters(self) -> int:
        return self.prepared.n_clusters

    @property
    def cohorts(self) -> np.ndarray:
        return self.prepared.cohorts[self.cells.k]

    @property
    def times(self) -> np.ndarray:
        return self.prepared.times[self.cells.t]

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
        d, c = self.prepared, self.cells
        lo, hi = _interval(self.estimates, self.std_errors, self._crit)
        n_treated, n_control = cell_counts(d, c)
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
                "n_treated": n_treated,
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
    @validate_params(_AGGREGATE_OPTIONS)
    def aggregate(self, aggregation: str = "simple", *, min_e: float = -np.inf,
                  max_e: float = np.inf, balance_e: float | None = None,
                  time: float | None = None) -> "AggregateResult":
        """Aggregate the cells.

        Parameters
        ----------
        aggregation : str
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
        def compute():
            spec = build_aggregation(self.prepared, self.cells, np.asarray(self.estimates), aggregation,
                                     min_e=min_e, max_e=max_e, balance_e=balance_e, time=time)
            return AggregateResult._from_spec(self, spec)

        # computed once per aggregation and its options: the summary, the results file and the report
        # ask for the same aggregations
        return self._memo(("aggregate", aggregation, min_e, max_e, balance_e, time), compute)

    # ------------------------------------------------------------- pre-test
    @cached_property
    def pretest(self) -> Pretest:
        """Wald pre-test of parallel trends over the pre-treatment cells (computed once)."""
        before = self.cohorts > self.times
        pre = before & np.isfinite(self.analytic_std_errors)
        return Pretest(*self.inference.pretest(np.asarray(self.estimates), np.flatnonzero(pre),
                                               n_before=int(before.sum())))

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
            fit's draws, or 999 fresh ones seeded by ``seed``). ``"wald"``: R
            did's Wald test of every pre-treatment cell, the same numbers as
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
        trend shared by the cohorts, the power of all the cells together; the maximum-absolute-t test is
        calibrated however many cells there are (Chernozhukov, Chetverikov & Kato 2013) and
        detects a few large deviations. Sizes and powers: the docs' *Inference* page.
        """
        if method is not None and method not in PRETREND_METHODS:
            raise ParameterError(f"The 'method' of pretrend_test must be one of "
                                 f"{set(PRETREND_METHODS)} or None. Got {method!r}.")
        return self._memo(("pretrend_test", method), lambda: self._pretrend_test(method))

    def _pretrend_test(self, method: str | None) -> PretrendTest:
        if method == "wald":
            pre = self.pretest
            return PretrendTest("wald", pre.statistic, pre.pvalue, df=float(pre.df),
                                n_restrictions=int(pre.df), note=pre.note)
        which = np.flatnonzero((self.cohorts > self.times)
                               & np.isfinite(np.asarray(self.analytic_std_errors)))
        if which.size == 0:
            n_pre = int(np.sum((self.cohorts > self.times) & (np.asarray(self.cells.ref) == 0)))
            if n_pre:  # cells to test, but none with a standard error
                return PretrendTest(
                    method or DEFAULT_PRETREND, np.nan, np.nan,
                    note=f"none of the {n_pre} pre-treatment cells has a standard error; their "
                         "variance is zero: is the outcome constant?")
        rows = None
        if method in (None, "event") and which.size:
            est = np.where(np.isfinite(self.estimates), np.asarray(self.estimates), 0.0)
            spec = build_aggregation(self.prepared, self.cells, est, "dynamic")
            keys = np.flatnonzero(spec.keys < 0)
            rows = (spec.weights[keys], spec.omega[keys])
        return self.inference.pretrend_test(
            method, estimates=self.estimates, std_errors=self.std_errors,
            analytic_std_errors=self.analytic_std_errors, which=which, event_rows=rows,
            seed=self.params.get("seed"))

    def plot(self, figure: str = "profile", **options):
        """Draw a figure of :mod:`didmem.results.plotting` (``figure`` is a key of ``PLOTS``).

        ``options`` (``ax=``, ``lr_schedule=``, ...) go to the plotting function; returns the
        matplotlib Axes.
        """
        from .plotting import plot_result  # a face: imported when a figure is drawn

        return plot_result(self, figure, **options)

    # ------------------------------------------------------------------- save
    def save(self, path):
        """Write the cells, aggregations, pre-test and settings to a parquet file.

        Read it back with :func:`didmem.load_result` (see :mod:`didmem.results.saving`); the
        result itself is not changed.
        """
        return save_result(self, path)

    # --------------------------------------------------------------- display
    @property
    def settings(self) -> ResultSettings:
        """The resolved settings the summary and the report read, as a results file keeps
        them (:class:`~didmem.results._settings.ResultSettings`)."""
        return self._memo("settings", lambda: ResultSettings.of_fit(self))

    def _inference_line(self) -> str:
        return self.inference.describe(self.critical_value, self.band,
                                       self.cell_critical_values)

    def summary(self) -> str:
        """A text summary: settings, significant cells, overall effect and the pre-test."""
        return self._memo("summary", self._summary)

    def _summary(self) -> str:
        frame = self.to_frame()
        post = frame[frame["post"]]
        overall = self.aggregate("simple").overall
        pre = self.pretest
        calibrated = self.pretrend_test()
        p = dict(self.params)
        if "outcome" in p:  # the outcome used, also when the panel's only one was implied
            p["outcome"] = self.outcome
        lines = [
            f"{self.estimator} on outcome {self.outcome!r}"
            + (" (sign flipped: lower is better)" if self.lower_is_better else ""),
            f"  units: {self.n_units} ({self.n_units - np.diff(self.prepared.starts)[-1]} in "
            f"{self.prepared.n_cohorts} cohorts, {np.diff(self.prepared.starts)[-1]} never-treated); "
            f"{self.prepared.times.size} times"
            + (f"; {self.n_clusters} clusters" if self.n_clusters else "")
            + _holes_note(self.prepared),
            "  settings: " + ", ".join(f"{k}={v!r}" for k, v in p.items()),
            *([f"  source: {self.settings.source}"] if self.settings.source else []),
            f"  inference: {self._inference_line()}",
            f"  {self.inference.std_error_note()}",
            f"  cells: {len(frame)} ({len(post)} post-treatment); significant: "
            f"{int(post['significant'].sum())} post, "
            f"{int(frame.loc[~frame['post'], 'significant'].sum())} pre",
            f"  overall ATT (simple): {overall.estimate:.4g} (SE {overall.std_error:.3g}, "
            f"{level_label(self.alpha)} CI [{overall.ci_lower:.4g}, {overall.ci_upper:.4g}])",
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


_CELL_COLUMNS = ("cohort", "time", "event_time", "estimate", "std_error", "ci_lower",
                 "ci_upper", "significant", "n_units")


@dataclass(frozen=True, eq=False)
class CellResult(PicklableProxies):
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
            raise EstimationError(f"CellResult cells lack columns {missing}.")
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
        """Per-instance estimates; an EstimationError for estimators that have none."""
        if self.units is None:
            raise EstimationError(f"{self.estimator} has no per-instance estimates.")
        return self.units.copy()

    def profile(self, value: str = "estimate", significant_only: bool = False) -> pd.DataFrame:
        """The cohort x time matrix of one column of :meth:`to_frame` (NaN where no cell).

        With ``significant_only``, cells whose interval covers zero are NaN.
        """
        return profile_matrix(self.to_frame(), value, significant_only)

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


def _holes_note(prepared) -> str:
    """What a panel with holes or cross-sections adds to the summary's units line."""
    rows = getattr(prepared, "holes", None)
    if rows is None:
        return ""
    n, n_t = prepared.n_units, prepared.times.size
    if rows.size == n and np.all(np.diff(rows.unit_start) == 1):
        return " (repeated cross-sections: one row per unit)"
    return (f"; {n * n_t - rows.size} of {n * n_t} (unit, time) rows missing, kept as R did's "
            "allow_unbalanced_panel")
