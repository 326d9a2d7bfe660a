"""The validated long-format panel and its dense views.

A :class:`Panel` holds one row per (unit, time): the unit's cohort (the first period in
which it is treated; never-treated units have ``inf``), one or more outcomes, and optional
sampling weights and a cluster label. It checks everything once, at construction, and
exposes dense views (units x times per outcome, a cohort per unit) that the estimators use.
"""

from __future__ import annotations

import difflib
import numbers
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ._arrays import readonly
from ._messages import MAX_LISTED as _MAX_LISTED
from ._messages import listing as _listing
from ._messages import python_scalar
from ._validation import OneOf, Satisfies, check_all
from .cohorts import PYTHIA_BATCH_SIZE, PYTHIA_STEPS_PER_CHECKPOINT, cohort_from_sequence_index
from .errors import DataDroppedWarning, PanelError, ParameterError
from .panel_exposures import check_exposure_order, exposure_columns

if TYPE_CHECKING:  # pandas is imported where a panel is built, not to read its declarations
    import pandas as pd

__all__ = ["Panel", "cohort_from_sequence_index", "PYTHIA_BATCH_SIZE", "PYTHIA_STEPS_PER_CHECKPOINT"]


_BALANCE_OPTIONS = ("error", "drop_incomplete_units", "keep")
_CONSTRAINTS = {
    "balance": OneOf(*_BALANCE_OPTIONS),
    # cohort columns are numeric: a code of another type would match no row, silently
    "never_treated": Satisfies(lambda v: v is None or (isinstance(v, numbers.Real)
                                                       and not isinstance(v, bool)),
                               "None or a number (the cohort code of never-treated units)"),
}


@dataclass(frozen=True)
class _ObservedRows:
    """The observed rows of a panel with holes or of cross-sections, sorted by unit and
    time: unit and time codes, and each outcome's and covariate's values."""

    unit: np.ndarray
    time: np.ndarray
    outcomes: dict
    covariates: dict


class Panel:
    """A balanced panel of units observed at several times, with cohorts and outcomes.

    Parameters
    ----------
    data : pandas.DataFrame
        Long table, one row per (unit, time).
    unit : str or None
        Column of the unit identifier. ``None`` reads the table as repeated cross-sections
        (R ``did``'s ``panel = FALSE``): every row is its own unit, drawn at its time, and
        the estimators compare cohort means across periods without following any unit.
    time : str
        Column name of the (numeric) time.
    cohort : str or sequence of str
        Column name of the cohort, or, with repeated exposure, the cohort columns of the
        first, second, ... exposure (``["cohort", "cohort_2"]``: the ``k``-th holds the
        checkpoint of the unit's ``k``-th exposure, empty when it has fewer; see
        :doc:`/repeated_exposure`). The (first) cohort is
        the first time at which the unit is treated; for memorisation, the first checkpoint
        after the instance's batch was trained on. Between the first and the last time it
        must be one of the times; a value that differs from a time by rounding noise only
        (``0.1 + 0.2`` for ``0.3``: within ``1e-9`` of the smallest gap between times) is
        taken as that time.
    outcome : str or sequence of str
        One or more outcome columns, each numeric and finite.
    never_treated : float, optional
        A cohort code that marks never-treated units, such as R's ``0``. ``NaN`` and ``inf``
        always mark never-treated units.
    weights : str, optional
        Column of sampling weights: positive, finite and constant within a unit.
    cluster : str, optional
        Column of cluster labels, constant within a unit.
    covariates : sequence of str, optional
        Numeric, finite covariate columns for conditional parallel trends (used by
        :class:`~didmem.DiDEstimator` with ``est_method`` "reg", "ipw" or "dr"). They may vary
        over time; each (cohort, time) cell uses their values at its base period, as R ``did``
        does.
    balance : {"error", "drop_incomplete_units", "keep"}
        What to do when some (unit, time) rows are missing: raise an error naming the first
        missing cells, drop the incomplete units with a warning that gives the count, or
        keep every observed row (R ``did``'s ``allow_unbalanced_panel = TRUE``; see
        :meth:`describe_holes`). A panel kept with holes is estimated as R does: each cell
        compares the cohort's and the controls' means of the rows observed at its two
        periods, and influence functions are summed within units. A balanced table gives
        the balanced panel whatever this says. Repeated cross-sections (``unit=None``)
        take ``"error"`` or ``"keep"`` alike.

    Attributes
    ----------
    units : pandas.Index
        Unit identifiers, sorted.
    times : numpy.ndarray
        Distinct times, ascending.
    cohorts : numpy.ndarray
        Cohort of each unit (aligned with ``units``); ``inf`` for never-treated units.
    outcomes : tuple of str
        Names of the outcome columns.
    covariates : tuple of str
        Names of the covariate columns (empty without covariates).
    cohort_columns : tuple of str
        Names of the cohort columns, first exposure first.
    exposure_cohorts : numpy.ndarray
        Units x exposures: the cohort of each exposure (``inf`` where a unit has fewer);
        its first column is ``cohorts``.
    kind : {"balanced", "unbalanced", "cross_sections"}
        A balanced panel, a panel kept with holes, or repeated cross-sections.

    Raises
    ------
    PanelError
        Missing columns, duplicate (unit, time) rows, non-finite outcomes, a cohort or weight
        or cluster that changes within a unit, non-numeric times, an empty panel, or an
        unbalanced panel under ``balance="error"``.

    Examples
    --------
    >>> import didmem
    >>> df, truth = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20,
    ...                                            n_never_treated=40, seed=0)
    >>> panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    >>> panel.n_units, panel.n_times
    (100, 6)
    """

    _constraints = _CONSTRAINTS

    def __init__(
        self,
        data: pd.DataFrame,
        *,
        unit: str | None,
        time: str,
        cohort: str | Sequence[str],
        outcome: str | Sequence[str],
        never_treated: float | None = None,
        weights: str | None = None,
        cluster: str | None = None,
        covariates: Sequence[str] | None = None,
        balance: str = "error",
    ) -> None:
        import pandas as pd

        if not isinstance(data, pd.DataFrame):
            raise PanelError(f"Panel needs a pandas DataFrame; got {type(data).__name__}.")
        check_all("Panel", {"balance": balance, "never_treated": never_treated},
                  self._constraints)
        cohort_columns = exposure_columns(cohort)
        cohort = cohort_columns[0]
        outcomes = (outcome,) if isinstance(outcome, str) else tuple(outcome)
        if not outcomes:
            raise PanelError("Panel needs at least one outcome column; got none.")
        cross_sections = unit is None
        if cross_sections and balance == "drop_incomplete_units":
            raise PanelError(
                "balance='drop_incomplete_units' needs units to drop, but unit=None reads the "
                "table as repeated cross-sections (every row its own unit). Pass unit=... for "
                "a panel, or leave balance at 'error' or 'keep'."
            )
        roles = {"time": time, "cohort": cohort} if cross_sections else {
            "unit": unit, "time": time, "cohort": cohort}
        roles.update({f"cohort of exposure {k + 1}": c for k, c in enumerate(cohort_columns)
                      if k})
        if len(outcomes) == 1:
            roles["outcome"] = outcomes[0]
        else:
            roles.update({f"outcome #{i + 1}": o for i, o in enumerate(outcomes)})
        if weights is not None:
            roles["weights"] = weights
        if cluster is not None:
            roles["cluster"] = cluster
        covariates = () if covariates is None else (
            (covariates,) if isinstance(covariates, str) else tuple(covariates))
        roles.update({f"covariate #{i + 1}": c for i, c in enumerate(covariates)})
        self._check_columns(data, roles)
        if len(set(covariates)) != len(covariates) or set(covariates) & {unit, time, *cohort_columns}:
            raise PanelError(
                f"Covariate columns must be distinct and differ from unit, time and cohort; "
                f"got covariates={list(covariates)!r}."
            )
        if len(set(outcomes)) != len(outcomes) or set(outcomes) & {unit, time, *cohort_columns}:
            raise PanelError(
                f"Outcome columns must be distinct and differ from unit, time and cohort; "
                f"got outcome={list(outcomes)!r} with unit={unit!r}, time={time!r}, "
                f"cohort={cohort!r}."
            )
        if len(data) == 0:
            raise PanelError("The panel is empty: the DataFrame has 0 rows.")

        self.unit_column, self.time_column, self.cohort_column = unit, time, cohort
        self.cohort_columns = cohort_columns
        self.weights_column, self.cluster_column = weights, cluster
        self.never_treated_code = never_treated
        self.outcomes = outcomes
        self.covariates = covariates

        time_values = self._numeric_times(data[time], time)
        cohort_rows = self._cohort_rows(data[cohort], cohort, never_treated)
        if cross_sections:
            unit_series = pd.Series(np.arange(len(data)), index=data.index, name="row")
            unit_codes = np.arange(len(data), dtype=np.int64)
            units = pd.RangeIndex(len(data), name="row")
            time_codes, times = pd.factorize(time_values, sort=True)
            n_units, n_times = len(units), len(times)
            counts = None
        else:
            unit_series = data[unit]
            if unit_series.isna().any():
                raise PanelError(
                    f"Column {unit!r} (unit) has {int(unit_series.isna().sum())} missing values."
                )
            unit_codes, units = pd.factorize(unit_series, sort=True)
            time_codes, times = pd.factorize(time_values, sort=True)
            n_units, n_times = len(units), len(times)

            cell = unit_codes.astype(np.int64) * n_times + time_codes
            counts = np.bincount(cell, minlength=n_units * n_times)
            if counts.max() > 1:
                dup = np.flatnonzero(counts > 1)
                pairs = [(python_scalar(units[c // n_times]), python_scalar(times[c % n_times]))
                         for c in dup]
                n_rows = int(counts[dup].sum() - dup.size)
                raise PanelError(
                    f"Duplicate (unit, time) rows: {dup.size} (unit, time) pairs appear more "
                    f"than once ({n_rows} extra rows), e.g. ({unit!r}, {time!r}) = "
                    f"{_listing(pairs)}."
                )

        unit_cohort = self._constant_within_unit(
            cohort_rows, unit_codes, n_units, units, cohort, "cohort"
        )
        unit_cohort = self._cohorts_on_time_grid(unit_cohort, np.asarray(times, dtype=float),
                                                 cohort, time)
        exposures = [unit_cohort]
        for name in cohort_columns[1:]:
            later = self._constant_within_unit(self._cohort_rows(data[name], name, never_treated),
                                               unit_codes, n_units, units, name, "cohort")
            exposures.append(self._cohorts_on_time_grid(
                later, np.asarray(times, dtype=float), name, time))
        exposures = np.column_stack(exposures)
        check_exposure_order(exposures, cohort_columns, units)
        self._unit_exposures = exposures  # kept rows are taken in _set_units
        unit_weights = np.ones(n_units)
        if weights is not None:
            w_rows = self._numeric_column(data[weights], weights, "weights")
            bad = ~np.isfinite(w_rows) | (w_rows <= 0)
            if bad.any():
                raise PanelError(
                    f"Column {weights!r} (weights) must be positive and finite; {int(bad.sum())} "
                    f"rows are not, e.g. units {_listing(pd.unique(unit_series[bad]))}."
                )
            unit_weights = self._constant_within_unit(
                w_rows, unit_codes, n_units, units, weights, "weights"
            )
        unit_cluster = None
        cluster_labels = None
        if cluster is not None:
            cl = data[cluster]
            if cl.isna().any():
                raise PanelError(
                    f"Column {cluster!r} (cluster) has {int(cl.isna().sum())} missing values, "
                    f"e.g. units {_listing(pd.unique(unit_series[cl.isna().to_numpy()]))}."
                )
            cl_codes, cluster_labels = pd.factorize(cl, sort=True)
            unit_cluster = self._constant_within_unit(
                cl_codes.astype(np.float64), unit_codes, n_units, units, cluster, "cluster"
            ).astype(np.int64)

        outcome_rows = {}
        for name in outcomes:
            values = self._numeric_column(data[name], name, "outcome")
            bad = ~np.isfinite(values)
            if bad.any():
                where = [
                    (python_scalar(units[u]), python_scalar(times[t]))
                    for u, t in zip(unit_codes[bad][:_MAX_LISTED], time_codes[bad][:_MAX_LISTED])
                ]
                raise PanelError(
                    f"Outcome column {name!r} has {int(bad.sum())} NaN or infinite values, e.g. "
                    f"at ({unit!r}, {time!r}) = {_listing(where)}. Remove or impute them first."
                )
            outcome_rows[name] = values
        covariate_rows = {}
        for name in covariates:
            values = self._numeric_column(data[name], name, "covariate")
            bad = ~np.isfinite(values)
            if bad.any():
                bad_units = pd.unique(unit_codes[bad])
                raise PanelError(
                    f"Covariate column {name!r} has {int(bad.sum())} missing or infinite values "
                    f"in {bad_units.size} units, e.g. units "
                    f"{_listing([python_scalar(units[u]) for u in bad_units])}. Remove or impute them "
                    "first."
                )
            covariate_rows[name] = values

        self.has_weights = weights is not None
        self.times = np.asarray(times)
        self.times.flags.writeable = False
        if cross_sections:
            self.kind = "cross_sections"
            self._store_rows(unit_codes, time_codes, outcome_rows, covariate_rows,
                             np.ones(n_units, dtype=bool))
            self._set_units(units, unit_cohort, unit_weights, unit_cluster, cluster_labels,
                            np.arange(n_units))
            return

        present = (counts == 1).reshape(n_units, n_times)
        keep = present.all(axis=1)
        if not keep.all():
            missing = np.argwhere(~present)
            n_missing = int(missing.shape[0])
            incomplete = int((~keep).sum())
            first = [(python_scalar(units[u]), python_scalar(times[t])) for u, t in missing[:_MAX_LISTED]]
            if balance == "error":
                raise PanelError(
                    f"The panel is unbalanced: {n_missing} (unit, time) cells are missing across "
                    f"{incomplete} of {n_units} units, first ({unit!r}, {time!r}) = "
                    f"{_listing(first)}. Pass balance='keep' to estimate with every observed "
                    "row (as R did's allow_unbalanced_panel=TRUE), or "
                    "balance='drop_incomplete_units' to drop those units."
                )
            if balance == "keep":
                self.kind = "unbalanced"
                self._store_rows(unit_codes, time_codes, outcome_rows, covariate_rows, None)
                self._set_units(units, unit_cohort, unit_weights, unit_cluster,
                                cluster_labels, np.arange(n_units))
                return
            warnings.warn(
                f"Dropped {incomplete} of {n_units} units that are not observed at every one of "
                f"the {n_times} times ({n_missing} missing cells), e.g. units "
                f"{_listing([python_scalar(units[u]) for u in np.flatnonzero(~keep)])}.",
                DataDroppedWarning,
                stacklevel=2,
            )
            if not keep.any():
                raise PanelError("No unit is observed at every time: the balanced panel is empty.")

        self.kind = "balanced"
        kept = np.flatnonzero(keep)
        if kept.size == n_units:  # balanced: every row lands in its own cell
            rows = slice(None)
            dense_index = cell
        else:
            remap = np.full(n_units, -1, dtype=np.int64)
            remap[kept] = np.arange(kept.size)
            rows = keep[unit_codes]
            dense_index = remap[unit_codes[rows]] * n_times + time_codes[rows]
        in_order = bool(np.all(dense_index[1:] > dense_index[:-1]))
        self._outcomes = {}
        for name, values in outcome_rows.items():
            if in_order and kept.size == n_units:
                matrix = values.copy()
            else:
                matrix = np.empty(kept.size * n_times)
                matrix[dense_index] = values[rows]
            matrix = matrix.reshape(kept.size, n_times)
            matrix.flags.writeable = False
            self._outcomes[name] = matrix
        self._covariates = {}
        for name, values in covariate_rows.items():
            matrix = np.empty(kept.size * n_times)
            matrix[dense_index] = values[rows]
            matrix = matrix.reshape(kept.size, n_times)
            matrix.flags.writeable = False
            self._covariates[name] = matrix
        self._rows = None
        self._set_units(units, unit_cohort, unit_weights, unit_cluster, cluster_labels, kept)

    def _set_units(self, units, unit_cohort, unit_weights, unit_cluster, cluster_labels,
                   kept) -> None:
        self.units = units[kept]
        self.cohorts = readonly(unit_cohort[kept], copy=False)
        self.exposure_cohorts = readonly(self._unit_exposures[kept])
        self.weights = readonly(unit_weights[kept], copy=False)
        if unit_cluster is not None:
            self.clusters = readonly(unit_cluster[kept], copy=False)
            self.cluster_labels = cluster_labels
        else:
            self.clusters = None
            self.cluster_labels = None

    def _store_rows(self, unit_codes, time_codes, outcome_rows, covariate_rows, order) -> None:
        """Keep the observed rows in long form, sorted by unit and time (panels with holes
        and cross-sections: no dense units x times matrix)."""
        if order is None:
            order = np.lexsort((time_codes, unit_codes))
        else:
            order = np.flatnonzero(order)
        self._rows = _ObservedRows(
            unit=readonly(np.asarray(unit_codes, dtype=np.int64)[order], copy=False),
            time=readonly(np.asarray(time_codes, dtype=np.int64)[order], copy=False),
            outcomes={n: readonly(v[order], copy=False) for n, v in outcome_rows.items()},
            covariates={n: readonly(v[order], copy=False) for n, v in covariate_rows.items()},
        )
        self._outcomes = {name: None for name in outcome_rows}
        self._covariates = {}

    # ----------------------------------------------------------------- checks
    @staticmethod
    def _check_columns(data: pd.DataFrame, roles: dict) -> None:
        available = [str(c) for c in data.columns]
        for role, col in roles.items():
            try:
                hash(col)
            except TypeError:
                raise PanelError(f"The {role} column must be one column's name; got {col!r}. "
                                 f"The DataFrame has columns {available}.") from None
        missing = [(role, col) for role, col in roles.items() if col not in data.columns]
        if missing:
            parts = []
            for role, col in missing:
                lowered = {c.lower(): c for c in available}
                close = difflib.get_close_matches(str(col).lower(), list(lowered), n=1)
                hint = f" (did you mean {lowered[close[0]]!r}?)" if close else ""
                parts.append(f"{role} column {col!r}{hint}")
            raise PanelError(
                "Missing columns: " + "; ".join(parts) + f". The DataFrame has columns {available}."
            )

    @staticmethod
    def _numeric_column(series: pd.Series, name: str, role: str) -> np.ndarray:
        import pandas as pd

        if pd.api.types.is_bool_dtype(series.dtype):
            return series.to_numpy(dtype=np.float64)
        if not pd.api.types.is_numeric_dtype(series.dtype):
            examples = _listing(pd.unique(series.dropna())[:3], 3)
            raise PanelError(
                f"Column {name!r} ({role}) must be numeric; it has dtype {series.dtype} "
                f"(values such as {examples})."
            )
        return series.to_numpy(dtype=np.float64, na_value=np.nan)

    def _numeric_times(self, series: pd.Series, name: str) -> np.ndarray:
        values = self._numeric_column(series, name, "time")
        bad = ~np.isfinite(values)
        if bad.any():
            raise PanelError(f"Column {name!r} (time) has {int(bad.sum())} missing or infinite values.")
        return values

    def _cohort_rows(self, series: pd.Series, name: str, code) -> np.ndarray:
        values = self._numeric_column(series, name, "cohort")
        if np.isneginf(values).any():
            raise PanelError(f"Column {name!r} (cohort) has -inf values; never-treated is NaN or inf.")
        never = np.isnan(values)
        if code is not None:
            never |= values == code
        values = values.copy()
        values[never] = np.inf
        return values

    @staticmethod
    def _cohorts_on_time_grid(cohorts, times, cohort_name, time_name) -> np.ndarray:
        """Put cohorts on the time grid: snap rounding noise, refuse cohorts between times.

        A cohort within ``1e-9`` of the smallest gap between times from a time (for example
        ``0.1 + 0.2`` against the time ``0.3``) is that time. A cohort inside the span of the
        times that is no time at all is refused: the cohort is the first period of treatment,
        so it must be one of the observed times. Cohorts before the first or after the last
        time are left to the estimators (dropped, or never treated within the panel).
        """
        finite = np.isfinite(cohorts)
        if not finite.any():
            return cohorts
        gaps = np.diff(times)
        scale = gaps.min() if gaps.size else max(1.0, abs(float(times[0])))
        tol = 1e-9 * scale
        values = cohorts[finite]
        idx = np.clip(np.searchsorted(times, values), 1, max(times.size - 1, 1))
        lower = times[np.maximum(idx - 1, 0)]
        upper = times[np.minimum(idx, times.size - 1)]
        nearest = np.where(np.abs(values - lower) <= np.abs(upper - values), lower, upper)
        close = np.abs(values - nearest) <= tol
        inside = (values > times[0]) & (values < times[-1])
        off = inside & ~close
        if off.any():
            bad = np.unique(values[off])
            raise PanelError(
                f"Column {cohort_name!r} (cohort) has {bad.size} values that are not times of "
                f"column {time_name!r}: {_listing(bad)}. The cohort is the first period of "
                "treatment, so it must be one of the observed times (for memorisation: the "
                "first checkpoint after the instance's batch); round or map it to the grid."
            )
        out = cohorts.copy()
        out[finite] = np.where(close, nearest, values)
        return out

    @staticmethod
    def _constant_within_unit(rows, unit_codes, n_units, units, column, role) -> np.ndarray:
        import pandas as pd

        if rows.size == n_units and isinstance(units, pd.RangeIndex) and units.name == "row":
            return np.array(rows, dtype=np.float64)  # cross-sections: a row is a unit
        low = np.full(n_units, np.inf)
        high = np.full(n_units, -np.inf)
        np.minimum.at(low, unit_codes, rows)
        np.maximum.at(high, unit_codes, rows)
        differs = low != high
        if differs.any():
            bad_units = np.flatnonzero(differs)
            raise PanelError(
                f"Column {column!r} ({role}) must be constant within a unit; it changes over time "
                f"for {bad_units.size} units: {_listing([python_scalar(units[u]) for u in bad_units])}."
            )
        return low

    # ------------------------------------------------------------ dense views
    @property
    def n_units(self) -> int:
        """Number of units."""
        return len(self.units)

    @property
    def n_times(self) -> int:
        """Number of distinct times."""
        return len(self.times)

    @property
    def never_treated(self) -> np.ndarray:
        """Boolean mask of never-treated units."""
        return np.isinf(self.cohorts)

    @property
    def has_holes(self) -> bool:
        """True for a panel kept with holes and for repeated cross-sections: the estimators
        then read :meth:`observed_rows`, not the dense views."""
        return self.kind != "balanced"

    @property
    def n_rows(self) -> int:
        """Number of observed (unit, time) rows."""
        if self._rows is None:
            return self.n_units * self.n_times
        return int(self._rows.unit.size)

    def _refuse_holes(self, what: str) -> None:
        if self.has_holes:
            noun = ("repeated cross-sections" if self.kind == "cross_sections"
                    else f"a panel with holes ({self.n_units * self.n_times - self.n_rows} "
                         "missing (unit, time) cells)")
            remedy = ("for the others a panel of the same units at every time is needed "
                      "(Panel(..., unit=...) with balance='drop_incomplete_units'); repeated "
                      "cross-sections have no units to drop"
                      if self.kind == "cross_sections" else
                      "for the others build the Panel with balance='drop_incomplete_units'")
            raise PanelError(
                f"{what} needs a balanced panel, but this is {noun}. The group-time "
                "estimators (DiDEstimator, DifferenceEstimator) read such panels through "
                f"observed_rows(); {remedy}."
            )

    def observed_rows(self, name: str | None = None):
        """The observed rows in long form, sorted by unit and time.

        Parameters
        ----------
        name : str, optional
            The outcome; may be omitted when the panel has exactly one.

        Returns
        -------
        unit, time : ndarray of int
            Index of each row's unit (into :attr:`units`) and time (into :attr:`times`).
        values : ndarray
            The outcome's value in each row.
        """
        name = self.resolve_outcome(name)
        if self._rows is None:
            n, t = self.n_units, self.n_times
            return (np.repeat(np.arange(n), t), np.tile(np.arange(t), n),
                    self._outcomes[name].ravel())
        return self._rows.unit, self._rows.time, self._rows.outcomes[name]

    def observed_covariates(self) -> np.ndarray:
        """Rows x covariates array of the covariates, aligned with :meth:`observed_rows`."""
        if self._rows is None:
            return self.covariate_array().reshape(self.n_units * self.n_times, -1)
        out = np.empty((self.n_rows, len(self.covariates)))
        for j, name in enumerate(self.covariates):
            out[:, j] = self._rows.covariates[name]
        return out

    def describe_holes(self) -> pd.DataFrame:
        """How many rows each (cohort, time) cell has, and how many are missing.

        Returns
        -------
        pandas.DataFrame
            One row per (cohort, time): ``n_units`` (units of the cohort; for
            cross-sections, rows of the cohort at any time), ``n_observed`` (rows observed
            at that time) and ``n_missing`` (units of the cohort without a row at that
            time; for cross-sections, NaN: nothing is missing, each time has its own
            draw). Never-treated units have cohort ``inf``. ``attrs`` holds the totals:
            ``n_missing`` and ``n_incomplete_units``.

        Examples
        --------
        >>> import didmem
        >>> df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=10,
        ...                                        n_never_treated=10, n_times=4, seed=0)
        >>> holes = didmem.Panel(df.iloc[1:], unit="unit", time="time", cohort="cohort",
        ...                      outcome="y", balance="keep").describe_holes()
        >>> int(holes["n_missing"].sum()), holes.attrs["n_incomplete_units"]
        (1, 1)
        """
        import pandas as pd

        unit, time, _ = self.observed_rows(self.outcomes[0])
        cohort_values, block = np.unique(self.cohorts, return_inverse=True)
        n_t = self.n_times
        observed = np.bincount(block[unit] * n_t + time,
                               minlength=cohort_values.size * n_t).reshape(-1, n_t)
        sizes = np.bincount(block, minlength=cohort_values.size)
        frame = pd.DataFrame({
            "cohort": np.repeat(cohort_values, n_t),
            "time": np.tile(self.times, cohort_values.size),
            "n_units": np.repeat(sizes, n_t),
            "n_observed": observed.ravel(),
        })
        if self.kind == "cross_sections":
            frame["n_missing"] = np.nan
            frame.attrs.update(n_missing=0, n_incomplete_units=0)
        else:
            frame["n_missing"] = frame["n_units"] - frame["n_observed"]
            per_unit = np.bincount(unit, minlength=self.n_units)
            frame.attrs.update(n_missing=int(frame["n_missing"].sum()),
                               n_incomplete_units=int((per_unit < n_t).sum()))
        return frame

    def outcome_matrix(self, name: str | None = None) -> np.ndarray:
        """Units x times matrix of one outcome (read-only).

        Parameters
        ----------
        name : str, optional
            The outcome; may be omitted when the panel has exactly one.

        Raises
        ------
        PanelError
            For a panel with holes or cross-sections (use :meth:`observed_rows`).
        """
        name = self.resolve_outcome(name)
        self._refuse_holes("The dense outcome matrix")
        return self._outcomes[name]

    def covariate_array(self) -> np.ndarray:
        """Units x times x covariates array of the covariates (a new array; empty last axis
        without covariates)."""
        self._refuse_holes("The dense covariate array")
        out = np.empty((self.n_units, self.n_times, len(self.covariates)))
        for j, name in enumerate(self.covariates):
            out[:, :, j] = self._covariates[name]
        return out

    def resolve_outcome(self, name: str | None) -> str:
        """Return the outcome name to use, checking that it exists."""
        if name is None:
            if len(self.outcomes) > 1:
                raise ParameterError(
                    f"The panel has {len(self.outcomes)} outcomes {list(self.outcomes)}; "
                    "name the one to use with outcome=..."
                )
            return self.outcomes[0]
        if name not in self._outcomes:
            raise ParameterError(
                f"Unknown outcome {name!r}; the panel's outcomes are {list(self.outcomes)}."
            )
        return name

    def cohort_sizes(self) -> pd.Series:
        """Number of units per cohort (``inf`` for never-treated)."""
        import pandas as pd

        values, counts = np.unique(self.cohorts, return_counts=True)
        return pd.Series(counts, index=pd.Index(values, name="cohort"), name="n_units")

    def to_frame(self) -> pd.DataFrame:
        """The panel as a long DataFrame with columns unit, time, cohort, outcomes, ...

        A panel with holes or cross-sections gives its observed rows (for cross-sections
        the unit column is the row number)."""
        import pandas as pd

        if self._rows is not None:
            rows = self._rows
            frame = pd.DataFrame({
                "unit": np.asarray(self.units)[rows.unit],
                "time": self.times[rows.time],
                "cohort": self.cohorts[rows.unit],
            })
            for k in range(1, self.exposure_cohorts.shape[1]):
                frame[f"cohort_{k + 1}"] = self.exposure_cohorts[rows.unit, k]
            for name in self.outcomes:
                frame[name] = rows.outcomes[name]
            for name in self.covariates:
                frame[name] = rows.covariates[name]
            if self.has_weights:
                frame["weights"] = self.weights[rows.unit]
            if self.clusters is not None:
                frame["cluster"] = np.asarray(self.cluster_labels)[self.clusters[rows.unit]]
            return frame
        n, t = self.n_units, self.n_times
        frame = pd.DataFrame(
            {
                "unit": np.repeat(np.asarray(self.units), t),
                "time": np.tile(self.times, n),
                "cohort": np.repeat(self.cohorts, t),
            }
        )
        for k in range(1, self.exposure_cohorts.shape[1]):
            frame[f"cohort_{k + 1}"] = np.repeat(self.exposure_cohorts[:, k], t)
        for name in self.outcomes:
            frame[name] = self._outcomes[name].ravel()
        for name in self.covariates:
            frame[name] = self._covariates[name].ravel()
        if self.has_weights:
            frame["weights"] = np.repeat(self.weights, t)
        if self.clusters is not None:
            frame["cluster"] = np.repeat(np.asarray(self.cluster_labels)[self.clusters], t)
        return frame

    def __repr__(self) -> str:
        n_never = int(self.never_treated.sum())
        n_cohorts = np.unique(self.cohorts[~self.never_treated]).size
        if self.kind == "cross_sections":
            head = f"Panel(repeated cross-sections: {self.n_units} rows, {self.n_times} times; "
        elif self.kind == "unbalanced":
            head = (f"Panel({self.n_units} units x {self.n_times} times with "
                    f"{self.n_units * self.n_times - self.n_rows} missing cells; ")
        else:
            head = f"Panel({self.n_units} units x {self.n_times} times; "
        return (
            head + f"{n_cohorts} cohorts, "
            f"{n_never} never-treated units; outcomes={list(self.outcomes)}"
            + (f"; covariates={list(self.covariates)})" if self.covariates else ")")
        )
