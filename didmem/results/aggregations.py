"""Aggregations of group-time effects: memorisation names and R did's ``aggte`` types.

Every aggregation is a set of *keys* (cohorts, event times or times) plus an overall value,
each a linear combination of cells ``sum_c L[key, c] tau(c)``. Where the weights are
estimated cohort shares ``pg = W_g / n``, the influence function gains R's
estimated-weights term, which for a key with cells ``S`` and total weight ``P = sum pg`` is

    sum_c (tau_c - theta) (w_i 1{G_i = g_c} - pg_c) / P

per unit (divided by ``n`` on the scale of ``psi``). It is parametrised here by one
coefficient per cohort, ``omega[key, g]``, so that analytic variances and bootstrap draws of
every key follow from the cells' influence functions and the same grouped sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import pandas as pd
from scipy import sparse

from .._arrays import readonly
from ..errors import EstimationError, ParameterError
from .common import Estimate, PicklableProxies, _interval, _significant, level_label

if TYPE_CHECKING:
    from .cells import GroupTimeResult

__all__ = ["AGGREGATIONS", "ALIASES", "AggregationSpec", "build_aggregation", "AggregateResult"]

AGGREGATIONS = ("simple", "group", "dynamic", "calendar", "instantaneous", "persistent", "residual")
ALIASES = {"overall": "simple", "cohort": "group", "checkpoint": "calendar", "event_time": "dynamic"}
KEY_NAMES = {
    "simple": None,
    "group": "cohort",
    "dynamic": "event_time",
    "calendar": "time",
    "instantaneous": "cohort",
    "persistent": "event_time",
    "residual": "cohort",
}


@dataclass(frozen=True)
class AggregationSpec:
    """Keys of an aggregation and the linear maps from cells to them.

    The last row of ``weights`` and ``omega`` is the overall value.
    """

    aggregation: str
    key_name: str | None
    keys: np.ndarray
    weights: sparse.csr_matrix  # (n_keys + 1) x n_cells
    omega: np.ndarray  # (n_keys + 1) x n_cohorts
    options: dict
    #: True when the overall value is undefined (NaN), e.g. a dynamic window with only
    #: pre-treatment event times, as R ``aggte`` and csdid report it
    undefined_overall: bool = False
    #: event times of the cohorts' reference cells (universal base period), which no key
    #: averages in; empty for the other aggregations
    reference_event_times: tuple = ()


def canonical_aggregation(aggregation: str) -> str:
    aggregation = ALIASES.get(aggregation, aggregation)
    if aggregation not in AGGREGATIONS:
        raise ParameterError(
            f"Unknown aggregation {aggregation!r}; choose one of {sorted(set(AGGREGATIONS) | set(ALIASES))}."
        )
    return aggregation


class _Cells:
    """Cell labels on the original scale, plus cohort shares."""

    def __init__(self, prepared, cells, att):
        self.att = att
        self.k = cells.k
        self.cohort = prepared.cohorts[cells.k]
        self.time = prepared.times[cells.t]
        self.event = self.time - self.cohort
        self.post = self.cohort <= self.time
        self.ref = np.asarray(cells.ref) != 0  # universal base: the cohort's reference cell
        self.n_cohorts = prepared.n_cohorts
        self.cohorts = prepared.cohorts
        self.pg = prepared.cohort_shares
        self.pg_cell = self.pg[cells.k]
        self.size = cells.k.size


class _Rows:
    """The rows of an aggregation, each kept sparse: the cells it averages and their weights
    (a key averages a few of thousands of cells), and its row of ``omega``."""

    def __init__(self, cells: _Cells):
        self.c = cells
        self.cells: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.omegas: list[np.ndarray] = []
        self.undefined = False  # the last row is NaN (an overall value with no keys)

    def _append(self, idx: np.ndarray, values: np.ndarray, omega: np.ndarray) -> None:
        self.cells.append(idx)
        self.values.append(values)
        self.omegas.append(omega)

    def weighted(self, idx: np.ndarray, estimated_weights: bool = True) -> None:
        """A key that averages cells ``idx`` with weights proportional to cohort shares."""
        c = self.c
        omega = np.zeros(c.n_cohorts)
        values = np.zeros(0)
        if idx.size:
            total = c.pg_cell[idx].sum()
            values = c.pg_cell[idx] / total
            if estimated_weights:
                theta = values @ c.att[idx]
                np.add.at(omega, c.k[idx], (c.att[idx] - theta) / total)
        self._append(idx, values, omega)

    def single(self, cell: int) -> None:
        self._append(np.array([cell]), np.ones(1), np.zeros(self.c.n_cohorts))

    def _combined(self, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``scale @ rows`` as (cells, values), the cells sorted (and merged)."""
        idx = np.concatenate(self.cells)
        values = np.concatenate([v * f for v, f in zip(self.values, scale)])
        cells, where = np.unique(idx, return_inverse=True)
        return cells, np.bincount(where, weights=values, minlength=cells.size)

    def mean_of(self, which: np.ndarray) -> None:
        """The overall value as the plain mean of existing keys (R's dynamic and calendar)."""
        if which.sum() == 0:
            self._append(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(self.c.n_cohorts))
            self.undefined = True
            return
        scale = np.where(which, 1.0 / which.sum(), 0.0)
        cells, values = self._combined(scale)
        self._append(cells, values, np.mean(np.array(self.omegas)[which], axis=0))

    def cohort_weighted_overall(self, key_cohorts: np.ndarray) -> None:
        """Overall over per-cohort keys, weighted by cohort share, with estimated weights."""
        c = self.c
        blocks = np.searchsorted(c.cohorts, key_cohorts)
        pg = c.pg[blocks]
        total = pg.sum()
        key_att = np.array([v @ c.att[i] for i, v in zip(self.cells, self.values)])
        theta = pg @ key_att / total
        omega = np.zeros(c.n_cohorts)
        np.add.at(omega, blocks, (key_att - theta) / total)
        cells, values = self._combined(pg / total)
        self._append(cells, values, omega + pg @ np.array(self.omegas) / total)

    def spec(self, aggregation, keys, options, reference_event_times=()) -> AggregationSpec:
        lengths = [idx.size for idx in self.cells]
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        weights = sparse.csr_matrix(
            (np.concatenate(self.values), np.concatenate(self.cells).astype(np.int64), indptr),
            shape=(len(self.cells), self.c.size))
        weights.eliminate_zeros()  # as from a dense row: a zero weight is no entry
        return AggregationSpec(
            aggregation=aggregation,
            key_name=KEY_NAMES[aggregation],
            keys=np.asarray(keys, dtype=np.float64),
            weights=weights,
            omega=np.array(self.omegas),
            options=options,
            undefined_overall=self.undefined,
            reference_event_times=tuple(float(e) for e in reference_event_times),
        )


def build_aggregation(prepared, cells, att, aggregation, *, min_e=-np.inf, max_e=np.inf,
                      balance_e=None, time=None) -> AggregationSpec:
    """Lay out one aggregation of the cells (see :meth:`GroupTimeResult.aggregate`)."""
    aggregation = canonical_aggregation(aggregation)
    c = _Cells(prepared, cells, att)
    rows = _Rows(c)
    options = {"min_e": min_e, "max_e": max_e, "balance_e": balance_e, "time": time}
    _check_options(aggregation, options)
    in_window = c.post & (c.event <= max_e)

    if aggregation == "simple":
        rows.weighted(np.flatnonzero(in_window))
        return rows.spec(aggregation, [], options)

    if aggregation in ("group", "instantaneous", "residual"):
        keys = []
        for g in prepared.cohorts:
            mine = np.flatnonzero((c.cohort == g) & in_window)
            if aggregation == "residual":
                last = prepared.times[-1] if time is None else _checked_time(prepared, time)
                mine = np.flatnonzero((c.cohort == g) & c.post & (c.time == last))
            elif aggregation == "instantaneous" and mine.size:
                mine = mine[np.argmin(c.time[mine])][None]
            if mine.size == 0:
                continue
            keys.append(g)
            if mine.size == 1:
                rows.single(int(mine[0]))
            else:
                rows.weighted(mine, estimated_weights=False)
        if not keys:
            raise EstimationError(f"The {aggregation!r} aggregation has no post-treatment cells.")
        rows.cohort_weighted_overall(np.array(keys))
        return rows.spec(aggregation, keys, options)

    if aggregation in ("dynamic", "persistent"):
        include = np.ones(c.size, dtype=bool)
        events = np.unique(c.event)
        if balance_e is not None:
            t_min, t_max = c.time.min(), c.time.max()
            events = events[(events <= balance_e) & (events >= balance_e - (t_max - t_min))]
            include = (t_max - c.cohort) >= balance_e
        events = events[(events >= min_e) & (events <= max_e)]
        if aggregation == "persistent":
            events = events[events > 0]
        keys = [e for e in events if np.any(include & (c.event == e))]
        for e in keys:
            at_e = include & (c.event == e)
            real = at_e & ~c.ref
            # a reference cell is 0 by construction: it never enters an average of real cells
            # (on an irregular grid cohorts' reference cells sit at different event times);
            # an event time with reference cells only stays a key, 0 with no variance, as R's
            rows.weighted(np.flatnonzero(real if real.any() else at_e))
        if not keys:
            raise EstimationError(f"The {aggregation!r} aggregation has no cells in its event window.")
        rows.mean_of(np.asarray(keys) >= 0)
        reference = np.unique(c.event[c.ref & include])
        return rows.spec(aggregation, keys, options, reference[np.isin(reference, keys)])

    # calendar
    cell_times = np.unique(c.time)
    keys = [t for t in cell_times[cell_times >= c.cohort.min()]]
    for t1 in keys:
        rows.weighted(np.flatnonzero((c.time == t1) & c.post))
    rows.mean_of(np.ones(len(keys), dtype=bool))
    return rows.spec(aggregation, keys, options)


def _check_options(aggregation: str, options: dict) -> None:
    """Refuse options that an aggregation would ignore (or honour in one direction only)."""
    given = [name for name in ("min_e", "max_e") if np.isfinite(options[name])]
    given += [name for name in ("balance_e", "time") if options[name] is not None]
    if aggregation in ("instantaneous", "residual"):
        ignored = [n for n in given if n != "time" or aggregation != "residual"]
        what = ("one cell per cohort at event time 0" if aggregation == "instantaneous" else
                "one cell per cohort at the final checkpoint (choose it with time=)")
        hint = "'dynamic' or 'persistent'"
    elif aggregation in ("simple", "group"):
        ignored = [n for n in given if n in ("min_e", "balance_e", "time")]
        what = "the post-treatment cells (limited by max_e only)"
        hint = "'dynamic'"
    else:
        ignored = [n for n in given if n == "time"] + (
            [n for n in given if n in ("min_e", "max_e", "balance_e")] if aggregation == "calendar"
            else [])
        what = "its own keys" if aggregation == "calendar" else "an event-time window"
        hint = "'residual'" if ignored == ["time"] else "'dynamic'"
    if ignored:
        raise ParameterError(
            f"The {aggregation!r} aggregation takes {what}; it does not use "
            f"{', '.join(ignored)}. Leave {'it' if len(ignored) == 1 else 'them'} out, or use "
            f"the {hint} aggregation."
        )


def _checked_time(prepared, time) -> float:
    if not np.any(prepared.times == time):
        raise ParameterError(
            f"time={time!r} is not a time of the panel; the times run from "
            f"{prepared.times[0]:g} to {prepared.times[-1]:g}."
        )
    return float(time)


@dataclass(frozen=True, eq=False)
class AggregateResult(PicklableProxies):
    """An aggregation of group-time effects: one value per key, and an overall value.

    Attributes
    ----------
    aggregation : str
        The aggregation (canonical R name or memorisation name).
    key_name : str or None
        ``"cohort"``, ``"event_time"`` or ``"time"``; None for ``simple``.
    overall : Estimate
        The overall value, with a pointwise interval.
    critical_value : float
        Multiplier of the keys' standard errors (simultaneous over keys when bootstrapped).
    reference_event_times : tuple of float
        Event-time aggregations of a fit with the universal base period: the event times of
        the cohorts' reference cells (0 by construction). No key averages a reference cell
        with real ones; an event time holding reference cells only is a key with estimate 0
        and no variance, as in R ``did``. On a regular grid this is ``(-1,)`` (one period
        before treatment); on an irregular grid (a missing checkpoint) cohorts can have their
        reference at different event times, and then there are several.
    std_error_note : str
        Which standard error ``std_errors`` holds (small-sample corrected analytic, R's
        bootstrap IQR, or analytic), as the fitted result's summary says; shown in
        :meth:`summary`. Empty for results saved before it was kept.

    Notes
    -----
    Event time is ``time - cohort`` in the panel's own time units (training steps), as R
    ``did``'s ``aggte`` computes it from the original time values, also on an irregular
    checkpoint grid. Where R averages a cohort's reference cell (0) into an event time at
    which other cohorts have real cells, didmem leaves it out (R's estimate there is pulled
    towards 0 and its standard error shrinks).
    """

    aggregation: str
    key_name: str | None
    keys: np.ndarray = field(repr=False)
    estimates: np.ndarray = field(repr=False)
    std_errors: np.ndarray = field(repr=False)
    overall: Estimate = None
    critical_value: float = float("nan")  # always given by the inference that made it
    band: str = "pointwise"
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    draws: np.ndarray | None = field(default=None, repr=False)
    covariance: np.ndarray | None = field(default=None, repr=False)
    alpha: float = 0.05
    reference_event_times: tuple = ()
    std_error_note: str = field(default="", repr=False)

    _proxies = ("options",)

    @classmethod
    def _from_spec(cls, res: GroupTimeResult, spec: AggregationSpec) -> "AggregateResult":
        """The aggregation ``spec`` of a fitted result, with the result's own inference."""
        est = spec.weights @ np.asarray(res.estimates)
        inference = res.inference
        combo = inference.combination(
            spec.weights, spec.omega,
            simultaneous=res.band == "simultaneous" and spec.key_name is not None)
        se = np.array(combo.std_errors, dtype=float)
        if spec.undefined_overall:  # e.g. only pre-treatment event times: NaN as in R
            est[-1] = se[-1] = np.nan
        lo, hi = _interval(est[-1], se[-1], combo.overall_critical_value)
        return cls(aggregation=spec.aggregation, key_name=spec.key_name, keys=readonly(spec.keys),
                   estimates=readonly(est[:-1]), std_errors=readonly(se[:-1]),
                   overall=Estimate(float(est[-1]), float(se[-1]), float(lo), float(hi)),
                   critical_value=float(combo.band.critical_value), band=combo.band.rule,
                   options=MappingProxyType(dict(spec.options)),
                   draws=None if combo.draws is None else readonly(combo.draws),
                   covariance=readonly(combo.covariance[:-1, :-1]),
                   alpha=float(inference.alpha),
                   reference_event_times=spec.reference_event_times,
                   std_error_note=inference.std_error_note())

    def vcov(self) -> pd.DataFrame:
        """The analytic covariance of the keys' estimates, labelled by key on both axes.

        ``sum_i psi_i psi_i'`` of the same influence functions as the analytic standard
        errors (of cluster sums when clustered), as R did's ``honest_did`` uses
        (``IF'IF / n**2``); its diagonal is the analytic squared standard error. This is what
        :func:`didmem.sensitivity` takes.

        Raises
        ------
        EstimationError
            For ``simple`` (no keys) or a result loaded without its covariance.
        """
        if self.key_name is None:
            raise EstimationError(f"The {self.aggregation!r} aggregation has no keys, so no covariance "
                             "matrix; aggregate by event_time, cohort or time.")
        if self.covariance is None:
            raise EstimationError("This aggregation carries no covariance (it was loaded from a "
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
        head = (f"{self.aggregation} aggregation: overall {o.estimate:.4g} (SE {o.std_error:.3g}, "
                f"{level_label(self.alpha)} CI [{o.ci_lower:.4g}, {o.ci_upper:.4g}])")
        note = f"\n  {self.std_error_note}" if self.std_error_note else ""
        if self.key_name is None:
            return head + note
        return head + f"\n{self.band} band, critical value {self.critical_value:.3f}\n" + \
            self.to_frame().to_string(index=False, float_format=lambda v: f"{v:.4g}") + note

    def __repr__(self) -> str:
        return f"<AggregateResult {self.aggregation}: {self.keys.size} keys, overall={self.overall.estimate:.4g}>"
