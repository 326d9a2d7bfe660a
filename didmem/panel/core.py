"""The validated long-format panel and its dense views.

A :class:`Panel` holds one row per (unit, time): the unit's cohort (the first period in
which it is treated; never-treated units have ``inf``), one or more outcomes, and optional
sampling weights and a cluster label. It checks everything once, at construction, and
exposes dense views (units x times per outcome, a cohort per unit) that the estimators use.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._arrays import readonly
from .._messages import MAX_LISTED as _MAX_LISTED
from .._messages import listing as _listing
from .._messages import python_scalar
from .._validation import OneOf, Satisfies, check_all
from ..cohorts import PYTHIA_BATCH_SIZE, PYTHIA_STEPS_PER_CHECKPOINT, cohort_from_sequence_index
from ..errors import DataDroppedWarning, PanelError, ParameterError
from .checks import (check_columns, check_distinct_columns, check_unique_cells,
                           check_unit_ids, cluster_codes, cohort_values, cohorts_on_time_grid,
                           column_roles, constant_within_unit, finite_covariate, finite_outcome,
                           numeric_column, numeric_times, positive_weights)
from .exposures import check_exposure_order, exposure_columns

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
class _RowIndex:
    """Every row's unit and time codes while a panel is built: the sorted units and times
    they index, the unit column (row numbers for cross-sections) and, in a panel, the rows
    per (unit, time) cell (None for cross-sections)."""

    unit_series: pd.Series
    unit_codes: np.ndarray
    units: pd.Index
    time_codes: np.ndarray
    times: pd.Index
    counts: np.ndarray | None

    @property
    def n_units(self) -> int:
        return len(self.units)


@dataclass(frozen=True)
class _ObservedRows:
    """The observed rows of a panel with holes or of cross-sections, sorted by unit and
    time: unit and time codes, and each outcome's and covariate's values."""

    unit: np.ndarray
    time: np.ndarray
    outcomes: dict
    covariates: dict


def _per_run_attributes():
    from .runs import PER_RUN_ATTRIBUTES

    return PER_RUN_ATTRIBUTES


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
    run : str, optional
        Column of the training run (a seed of PolyPythias, a lab run): the same instances at
        the same checkpoints in every run, each run with its own cohorts (its data order)
        and outcomes. Each run's rows are checked as a panel of their own
        (:meth:`run_panel`); a run missing a checkpoint or an instance that another has is a
        :class:`~didmem.errors.PanelError`, never filled in or dropped. Fit such a panel with
        :class:`~didmem.RunsEstimator` (see :doc:`/runs`).
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
    layout : {"balanced", "unbalanced", "cross_sections"}
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
    (100, 5)
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
        run: str | None = None,
    ) -> None:
        import pandas as pd

        if not isinstance(data, pd.DataFrame):
            raise PanelError(f"Panel needs a pandas DataFrame; got {type(data).__name__}.")
        check_all("Panel", {"balance": balance, "never_treated": never_treated},
                  self._constraints)
        cohort_columns = exposure_columns(cohort)
        outcomes = (outcome,) if isinstance(outcome, str) else tuple(outcome)
        covariates = () if covariates is None else (
            (covariates,) if isinstance(covariates, str) else tuple(covariates))
        self._check_arguments(unit, outcomes, balance)
        check_columns(data, column_roles(unit, time, cohort_columns, outcomes, weights, cluster,
                                         covariates))
        check_distinct_columns(unit, time, cohort_columns, outcomes, covariates)
        if len(data) == 0:
            raise PanelError("The panel is empty: the DataFrame has 0 rows.")

        self.unit_column, self.time_column, self.cohort_column = unit, time, cohort_columns[0]
        self.cohort_columns = cohort_columns
        self.weights_column, self.cluster_column = weights, cluster
        self.never_treated_code = never_treated
        self.outcomes = outcomes
        self.covariates = covariates
        self.run_column = run
        if run is not None:
            self._init_runs(data, run, dict(
                unit=unit, time=time, cohort=cohort, outcome=outcome,
                never_treated=never_treated, weights=weights, cluster=cluster,
                covariates=covariates, balance=balance))
            return

        time_values = numeric_times(data[time], time)
        first_cohorts = cohort_values(data[self.cohort_column], self.cohort_column, never_treated)
        rows = self._index_rows(data, time_values)
        unit_cohort, self._unit_exposures = self._unit_cohorts(data, rows, first_cohorts)
        unit_weights, unit_cluster, cluster_labels = self._unit_weights_and_clusters(data, rows)
        outcome_rows, covariate_rows = self._row_values(data, rows)

        self.has_weights = weights is not None
        self.times = np.asarray(rows.times)
        self.times.flags.writeable = False
        kept = self._lay_out(rows, outcome_rows, covariate_rows, balance)
        self._set_units(rows.units, unit_cohort, unit_weights, unit_cluster, cluster_labels, kept)

    # ------------------------------------------------------------ several runs
    def _init_runs(self, data, run, arguments) -> None:
        """A panel of several runs: one single-run panel per run, sharing units and times."""
        from .runs import split_runs

        unit = arguments["unit"]
        if unit is None:
            raise PanelError("A panel of several runs (run=...) follows each instance across "
                             "runs, so it needs unit=...; repeated cross-sections have no "
                             "instances to follow.")
        check_columns(data, {"run": run})
        taken = [c for c in (unit, arguments["time"], *exposure_columns(arguments["cohort"]),
                             *self.outcomes, *self.covariates,
                             arguments["weights"], arguments["cluster"]) if c is not None]
        if run in taken:
            raise PanelError(f"The run column {run!r} is also used for another role; name a "
                             "column that holds the run alone.")
        self.runs, self._run_panels = split_runs(
            data, run, lambda frame: Panel(frame, **arguments))
        first = self._run_panels[self.runs[0]]
        self.unit_column, self.time_column = first.unit_column, first.time_column
        self.cohort_column, self.cohort_columns = first.cohort_column, first.cohort_columns
        self.weights_column, self.cluster_column = first.weights_column, first.cluster_column
        self.never_treated_code = first.never_treated_code
        self.units, self.times = first.units, first.times

    @property
    def n_runs(self) -> int:
        """Number of training runs (1 for a panel without a run column)."""
        return 1 if self.run_column is None else len(self.runs)

    def run_panel(self, run) -> "Panel":
        """The single-run panel of one run (its cohorts, outcomes and dense views).

        Raises
        ------
        ParameterError
            For a panel without a run column, or a run it does not have.
        """
        if self.run_column is None:
            raise ParameterError("This panel has no run column; build it with "
                                 "Panel(..., run=...) to select a run.")
        if run not in self._run_panels:
            raise ParameterError(f"Unknown run {run!r}; the panel's runs are "
                                 f"{_listing([python_scalar(r) for r in self.runs])}.")
        return self._run_panels[run]

    def __getattr__(self, name):
        # only reached for attributes a panel does not have: a panel of several runs has no
        # single cohort, outcome matrix or layout, each of its runs has its own
        if name in _per_run_attributes() and self.__dict__.get("run_column") is not None:
            from .runs import PerRunAttributeError

            raise PerRunAttributeError(
                f"Panel.{name.lstrip('_')}: this panel holds {len(self.runs)} runs (column "
                f"{self.run_column!r}), each with its own cohorts and outcomes. Read one run "
                "with panel.run_panel(run), or fit all with didmem.RunsEstimator.")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ------------------------------------------------------------ construction steps
    @staticmethod
    def _check_arguments(unit, outcomes, balance) -> None:
        """What the arguments alone get wrong: no outcome; units to drop without units."""
        if not outcomes:
            raise PanelError("Panel needs at least one outcome column; got none.")
        if unit is None and balance == "drop_incomplete_units":
            raise PanelError(
                "balance='drop_incomplete_units' needs units to drop, but unit=None reads the "
                "table as repeated cross-sections (every row its own unit). Pass unit=... for "
                "a panel, or leave balance at 'error' or 'keep'."
            )

    def _index_rows(self, data: pd.DataFrame, time_values: np.ndarray) -> _RowIndex:
        """Code every row's unit and time (sorted), checking the unit identifiers and, in a
        panel, that no (unit, time) cell has two rows; cross-sections number the rows."""
        import pandas as pd

        time_codes, times = pd.factorize(time_values, sort=True)
        if self.unit_column is None:
            return _RowIndex(
                unit_series=pd.Series(np.arange(len(data)), index=data.index, name="row"),
                unit_codes=np.arange(len(data), dtype=np.int64),
                units=pd.RangeIndex(len(data), name="row"), time_codes=time_codes, times=times,
                counts=None)
        unit_series = data[self.unit_column]
        check_unit_ids(unit_series, self.unit_column)
        unit_codes, units = pd.factorize(unit_series, sort=True)
        counts = check_unique_cells(unit_codes, time_codes, units, times, self.unit_column,
                                    self.time_column)
        return _RowIndex(unit_series=unit_series, unit_codes=unit_codes, units=units,
                         time_codes=time_codes, times=times, counts=counts)

    def _unit_cohorts(self, data: pd.DataFrame, rows: _RowIndex, first_cohorts: np.ndarray):
        """Each unit's cohort (constant within the unit, on the time grid) and its units x
        exposures matrix of cohorts, in exposure order (``first_cohorts``: the first cohort
        column's values per row, read already)."""
        times = np.asarray(rows.times, dtype=float)
        exposures = []
        for k, name in enumerate(self.cohort_columns):
            values = first_cohorts if k == 0 else cohort_values(
                data[name], name, self.never_treated_code)
            per_unit = constant_within_unit(values, rows.unit_codes, rows.n_units, rows.units,
                                            name, "cohort")
            exposures.append(cohorts_on_time_grid(per_unit, times, name, self.time_column))
        matrix = np.column_stack(exposures)
        check_exposure_order(matrix, self.cohort_columns, rows.units)
        return exposures[0], matrix  # the kept units' rows are taken in _set_units

    def _unit_weights_and_clusters(self, data: pd.DataFrame, rows: _RowIndex):
        """Each unit's weight (ones without a weights column) and cluster code and labels
        (None without a cluster column)."""
        unit_weights = np.ones(rows.n_units)
        if self.weights_column is not None:
            w_rows = numeric_column(data[self.weights_column], self.weights_column, "weights")
            positive_weights(w_rows, self.weights_column, rows.unit_series)
            unit_weights = constant_within_unit(w_rows, rows.unit_codes, rows.n_units,
                                                rows.units, self.weights_column, "weights")
        if self.cluster_column is None:
            return unit_weights, None, None
        codes, labels = cluster_codes(data[self.cluster_column], self.cluster_column,
                                      rows.unit_series)
        unit_cluster = constant_within_unit(codes.astype(np.float64), rows.unit_codes,
                                            rows.n_units, rows.units, self.cluster_column,
                                            "cluster").astype(np.int64)
        return unit_weights, unit_cluster, labels

    def _row_values(self, data: pd.DataFrame, rows: _RowIndex):
        """Each outcome's and covariate's values per row, numeric and finite."""
        outcome_rows = {}
        for name in self.outcomes:
            values = numeric_column(data[name], name, "outcome")
            finite_outcome(values, name, rows.unit_codes, rows.time_codes, rows.units, rows.times,
                           self.unit_column, self.time_column)
            outcome_rows[name] = values
        covariate_rows = {}
        for name in self.covariates:
            values = numeric_column(data[name], name, "covariate")
            finite_covariate(values, name, rows.unit_codes, rows.units)
            covariate_rows[name] = values
        return outcome_rows, covariate_rows

    def _lay_out(self, rows: _RowIndex, outcome_rows, covariate_rows, balance) -> np.ndarray:
        """Store the rows as the panel's layout wants them and return the kept units' codes:
        cross-sections and panels kept with holes in long form, a balanced panel (after
        ``balance``'s treatment of missing cells) as units x times matrices."""
        n_units, n_times = rows.n_units, len(rows.times)
        if rows.counts is None:
            self.layout = "cross_sections"
            self._store_rows(rows.unit_codes, rows.time_codes, outcome_rows, covariate_rows,
                             np.ones(n_units, dtype=bool))
            return np.arange(n_units)
        present = (rows.counts == 1).reshape(n_units, n_times)
        keep = present.all(axis=1)
        if not keep.all():
            if self._handle_missing_cells(rows, present, keep, balance) == "keep":
                self.layout = "unbalanced"
                self._store_rows(rows.unit_codes, rows.time_codes, outcome_rows, covariate_rows,
                                 None)
                return np.arange(n_units)
        self.layout = "balanced"
        kept = np.flatnonzero(keep)
        self._store_dense(rows, keep, kept, outcome_rows, covariate_rows)
        return kept

    def _handle_missing_cells(self, rows: _RowIndex, present, keep, balance) -> str:
        """Missing (unit, time) cells under ``balance``: raise ("error"), keep them, or warn
        that the incomplete units are dropped (refusing a panel left empty)."""
        n_units, n_times = rows.n_units, len(rows.times)
        units, times = rows.units, rows.times
        missing = np.argwhere(~present)
        n_missing = int(missing.shape[0])
        incomplete = int((~keep).sum())
        first = [(python_scalar(units[u]), python_scalar(times[t]))
                 for u, t in missing[:_MAX_LISTED]]
        if balance == "error":
            raise PanelError(
                f"The panel is unbalanced: {n_missing} (unit, time) cells are missing across "
                f"{incomplete} of {n_units} units, first ({self.unit_column!r}, "
                f"{self.time_column!r}) = {_listing(first)}. Pass balance='keep' to estimate "
                "with every observed row (as R did's allow_unbalanced_panel=TRUE), or "
                "balance='drop_incomplete_units' to drop those units."
            )
        if balance == "keep":
            return balance
        warnings.warn(
            f"Dropped {incomplete} of {n_units} units that are not observed at every one of "
            f"the {n_times} times ({n_missing} missing cells), e.g. units "
            f"{_listing([python_scalar(units[u]) for u in np.flatnonzero(~keep)])}.",
            DataDroppedWarning,
            stacklevel=4,
        )
        if not keep.any():
            raise PanelError("No unit is observed at every time: the balanced panel is empty.")
        return balance

    def _store_dense(self, rows: _RowIndex, keep, kept, outcome_rows, covariate_rows) -> None:
        """The kept units' outcomes and covariates as read-only units x times matrices."""
        n_units, n_times = rows.n_units, len(rows.times)
        if kept.size == n_units:  # balanced: every row lands in its own cell
            taken = slice(None)
            dense_index = rows.unit_codes.astype(np.int64) * n_times + rows.time_codes
        else:
            remap = np.full(n_units, -1, dtype=np.int64)
            remap[kept] = np.arange(kept.size)
            taken = keep[rows.unit_codes]
            dense_index = remap[rows.unit_codes[taken]] * n_times + rows.time_codes[taken]
        in_order = bool(np.all(dense_index[1:] > dense_index[:-1]))

        def dense(values, copy_in_order):
            if copy_in_order and in_order and kept.size == n_units:
                matrix = values.copy()
            else:
                matrix = np.empty(kept.size * n_times)
                matrix[dense_index] = values[taken]
            matrix = matrix.reshape(kept.size, n_times)
            matrix.flags.writeable = False
            return matrix

        self._outcomes = {name: dense(v, True) for name, v in outcome_rows.items()}
        self._covariates = {name: dense(v, False) for name, v in covariate_rows.items()}
        self._rows = None

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
        return self.layout != "balanced"

    @property
    def n_rows(self) -> int:
        """Number of observed (unit, time) rows."""
        if self._rows is None:
            return self.n_units * self.n_times
        return int(self._rows.unit.size)

    def _refuse_holes(self, what: str) -> None:
        if self.has_holes:
            noun = ("repeated cross-sections" if self.layout == "cross_sections"
                    else f"a panel with holes ({self.n_units * self.n_times - self.n_rows} "
                         "missing (unit, time) cells)")
            remedy = ("for the others a panel of the same units at every time is needed "
                      "(Panel(..., unit=...) with balance='drop_incomplete_units'); repeated "
                      "cross-sections have no units to drop"
                      if self.layout == "cross_sections" else
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
        if self.layout == "cross_sections":
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

    @staticmethod
    def scan(path, *, unit: str, time: str, cohort: str, outcome: str,
             never_treated: float | None = None, memory_bytes: int | None = None,
             map_items=None):
        """A parquet file or folder read lazily, as unit paths in bounded memory.

        Returns a :class:`~didmem.panel.scan.ParquetPaths` (its footers read and checked now,
        its rows when fitted): the group-time estimators' ``fit``
        (:class:`~didmem.DiDEstimator`, :class:`~didmem.DifferenceEstimator`) takes it and
        fits from per-cohort moments. Columns as for :class:`Panel`; ``outcome`` is one
        column; ``memory_bytes`` bounds the paths held at once (2 GiB by default);
        ``map_items``, a ``map(function, items)``, runs the fit's work items elsewhere
        (:func:`didmem.runners.ray_tasks.ray_map` on Ray; by default they are read here).
        """
        from .scan import ParquetPaths

        return ParquetPaths(path, unit=unit, time=time, cohort=cohort, outcome=outcome,
                            never_treated=never_treated, memory_bytes=memory_bytes,
                            map_items=map_items)

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
        the unit column is the row number); a panel of several runs, every run's rows with
        the run column."""
        import pandas as pd

        if self.run_column is not None:
            return pd.concat([self._run_panels[r].to_frame().assign(**{self.run_column: r})
                              for r in self.runs], ignore_index=True)
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
        if self.run_column is not None:
            return (f"Panel({len(self.runs)} runs (column {self.run_column!r}) x "
                    f"{self.n_units} units x {self.n_times} times; outcomes="
                    f"{list(self.outcomes)})")
        n_never = int(self.never_treated.sum())
        n_cohorts = np.unique(self.cohorts[~self.never_treated]).size
        if self.layout == "cross_sections":
            head = f"Panel(repeated cross-sections: {self.n_units} rows, {self.n_times} times; "
        elif self.layout == "unbalanced":
            head = (f"Panel({self.n_units} units x {self.n_times} times with "
                    f"{self.n_units * self.n_times - self.n_rows} missing cells; ")
        else:
            head = f"Panel({self.n_units} units x {self.n_times} times; "
        return (
            head + f"{n_cohorts} cohorts, "
            f"{n_never} never-treated units; outcomes={list(self.outcomes)}"
            + (f"; covariates={list(self.covariates)})" if self.covariates else ")")
        )
