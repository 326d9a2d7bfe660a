"""The checks of a panel's columns and rows, one function each, with their messages.

:class:`~didmem.Panel` runs them in order on the whole table; a reader that sees the table in
chunks (a lazy panel that streams a parquet folder) runs the same functions on each chunk,
so a bad row gets the same message wherever it is found. Each takes plain arrays or one
column and raises :class:`~didmem.errors.PanelError` naming the column, the rows' units
and times; none keeps state.

- columns: :func:`column_roles`, :func:`check_columns`, :func:`check_distinct_columns`;
- values: :func:`numeric_column`, :func:`numeric_times`, :func:`cohort_values`,
  :func:`finite_outcome`, :func:`finite_covariate`, :func:`positive_weights`,
  :func:`cluster_codes`, :func:`check_unit_ids`;
- rows: :func:`check_unique_cells` (duplicated ``(unit, time)`` rows),
  :func:`constant_within_unit` (a cohort, weight or cluster that changes within a unit),
  :func:`cohorts_on_time_grid` (a cohort between two times).
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

import numpy as np

from .._messages import MAX_LISTED as _MAX_LISTED
from .._messages import listing as _listing
from .._messages import python_scalar
from ..errors import PanelError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["column_roles", "check_columns", "check_distinct_columns", "numeric_column",
           "numeric_times", "cohort_values", "check_unit_ids", "check_unique_cells",
           "constant_within_unit", "cohorts_on_time_grid", "finite_outcome", "finite_covariate",
           "positive_weights", "cluster_codes"]


# ------------------------------------------------------------------------------ columns
def column_roles(unit, time, cohort_columns, outcomes, weights, cluster, covariates) -> dict:
    """Each column's role in the messages (``"unit"``, ``"outcome #2"``, ...) -> its name, in
    the order the messages list them; ``unit=None`` (cross-sections) has no unit column."""
    roles = {"time": time, "cohort": cohort_columns[0]} if unit is None else {
        "unit": unit, "time": time, "cohort": cohort_columns[0]}
    roles.update({f"cohort of exposure {k + 1}": c for k, c in enumerate(cohort_columns) if k})
    if len(outcomes) == 1:
        roles["outcome"] = outcomes[0]
    else:
        roles.update({f"outcome #{i + 1}": o for i, o in enumerate(outcomes)})
    if weights is not None:
        roles["weights"] = weights
    if cluster is not None:
        roles["cluster"] = cluster
    roles.update({f"covariate #{i + 1}": c for i, c in enumerate(covariates)})
    return roles


def check_columns(data: pd.DataFrame, roles: dict) -> None:
    """Every role names one column that ``data`` has (with a close match as a hint)."""
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


def check_distinct_columns(unit, time, cohort_columns, outcomes, covariates) -> None:
    """Outcomes and covariates are distinct columns, none of them a unit, time or cohort."""
    keys = {unit, time, *cohort_columns}
    if len(set(covariates)) != len(covariates) or set(covariates) & keys:
        raise PanelError(
            f"Covariate columns must be distinct and differ from unit, time and cohort; "
            f"got covariates={list(covariates)!r}."
        )
    if len(set(outcomes)) != len(outcomes) or set(outcomes) & keys:
        raise PanelError(
            f"Outcome columns must be distinct and differ from unit, time and cohort; "
            f"got outcome={list(outcomes)!r} with unit={unit!r}, time={time!r}, "
            f"cohort={cohort_columns[0]!r}."
        )


# ------------------------------------------------------------------------------- values
def numeric_column(series: pd.Series, name: str, role: str) -> np.ndarray:
    """The column as float64 (booleans as 0/1, missing values as NaN); refuses other dtypes."""
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


def numeric_times(series: pd.Series, name: str) -> np.ndarray:
    """The time column as float64, every value finite."""
    values = numeric_column(series, name, "time")
    bad = ~np.isfinite(values)
    if bad.any():
        raise PanelError(f"Column {name!r} (time) has {int(bad.sum())} missing or infinite values.")
    return values


def cohort_values(series: pd.Series, name: str, never_treated) -> np.ndarray:
    """A cohort column as float64 with every never-treated row ``inf`` (NaN, ``inf`` and the
    ``never_treated`` code); refuses ``-inf``."""
    values = numeric_column(series, name, "cohort")
    if np.isneginf(values).any():
        raise PanelError(f"Column {name!r} (cohort) has -inf values; never-treated is NaN or inf.")
    never = np.isnan(values)
    if never_treated is not None:
        never |= values == never_treated
    values = values.copy()
    values[never] = np.inf
    return values


def check_unit_ids(unit_series: pd.Series, unit: str) -> None:
    """No unit identifier is missing."""
    if unit_series.isna().any():
        raise PanelError(
            f"Column {unit!r} (unit) has {int(unit_series.isna().sum())} missing values."
        )


def finite_outcome(values, name, unit_codes, time_codes, units, times, unit, time) -> None:
    """Every value of an outcome is finite; the message names the first (unit, time) cells."""
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


def finite_covariate(values, name, unit_codes, units) -> None:
    """Every value of a covariate is finite; the message names the units."""
    import pandas as pd

    bad = ~np.isfinite(values)
    if bad.any():
        bad_units = pd.unique(unit_codes[bad])
        raise PanelError(
            f"Covariate column {name!r} has {int(bad.sum())} missing or infinite values "
            f"in {bad_units.size} units, e.g. units "
            f"{_listing([python_scalar(units[u]) for u in bad_units])}. Remove or impute them "
            "first."
        )


def positive_weights(values, name, unit_series) -> None:
    """Every weight is positive and finite; the message names the units."""
    import pandas as pd

    bad = ~np.isfinite(values) | (values <= 0)
    if bad.any():
        raise PanelError(
            f"Column {name!r} (weights) must be positive and finite; {int(bad.sum())} "
            f"rows are not, e.g. units {_listing(pd.unique(unit_series[bad]))}."
        )


def cluster_codes(series: pd.Series, name: str, unit_series: pd.Series):
    """``(codes per row, sorted labels)`` of a cluster column with no missing label."""
    import pandas as pd

    if series.isna().any():
        raise PanelError(
            f"Column {name!r} (cluster) has {int(series.isna().sum())} missing values, "
            f"e.g. units {_listing(pd.unique(unit_series[series.isna().to_numpy()]))}."
        )
    return pd.factorize(series, sort=True)


# --------------------------------------------------------------------------------- rows
def check_unique_cells(unit_codes, time_codes, units, times, unit, time) -> np.ndarray:
    """Rows per ``(unit, time)`` cell (``units x times``, flat); refuses a cell with two rows."""
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
    return counts


def constant_within_unit(rows, unit_codes, n_units, units, column, role) -> np.ndarray:
    """The one value of each unit (its rows' values must agree: a cohort, a weight or a
    cluster does not change over time); cross-sections (``units`` a ``RangeIndex`` named
    ``"row"``) return the rows."""
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


def cohorts_on_time_grid(cohorts, times, cohort_name, time_name) -> np.ndarray:
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
