"""Exposures per instance: from the training steps at which each instance was seen to cohorts.

Every suite reader (OLMo's global indices, Pythia's data order and its repeats, Hubble's
insertions, a table of your own) ends in a long table of ``(unit, step)`` rows, one per time
training saw the unit; :func:`exposure_cohorts` turns it into one row per unit with
``cohort`` (the checkpoint of the first exposure), ``cohort_2`` (of the second), ... and
``exposures`` (how many fall within the checkpoints).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._messages import listing, python_scalar
from ..cohorts import cohort_from_step, step_from_sequence_index
from ..errors import ParameterError

__all__ = ["cohort_column", "exposure_cohorts", "exposure_steps", "exposure_frame"]


def exposure_steps(position, batch_size: int, first_step: int = 0) -> np.ndarray:
    """The optimisation step (1-based, int) that trains each position of a data order:
    ``first_step + position // batch_size + 1``, the rule of
    :func:`didmem.cohorts.step_from_sequence_index` (``first_step``: steps of earlier epochs'
    files)."""
    position = _positions(position)
    return step_from_sequence_index(position, batch_size).astype(np.int64) + int(first_step)


def _positions(position) -> np.ndarray:
    """Positions in a data order as int64, refused where one is not a whole number >= 0 (a
    negative one has no step: it would come back as int64's minimum)."""
    values = np.asarray(position)
    if values.dtype.kind not in "iuf" and values.size:
        raise ParameterError(f"Positions in a data order must be integers; got dtype "
                             f"{values.dtype}.")
    if values.dtype.kind == "f":
        bad = ~np.isfinite(values) | (np.mod(values, 1) != 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise ParameterError(f"Positions in a data order must be whole numbers; entry {i} "
                                 f"is {float(values.flat[i])!r}.")
    if values.dtype == np.uint64 and values.size and values.max() > np.iinfo(np.int64).max:
        i = int(np.argmax(values > np.iinfo(np.int64).max))
        raise ParameterError(f"Position {int(values.flat[i])} (entry {i}) is beyond any data "
                             "order (at most 2**63 - 1).")
    values = values.astype(np.int64)
    if values.size and values.min() < 0:
        i = int(np.argmin(values))
        raise ParameterError(f"Positions in a data order are 0 or more; entry {i} is "
                             f"{int(values.flat[i])} (an instance training never sees has no "
                             "exposure row).")
    return values


def exposure_frame(unit, position, batch_size: int, first_step: int = 0) -> pd.DataFrame:
    """``unit, position, step``: one row per exposure, sorted by unit then position (every
    suite reader ends in this table; :func:`exposure_cohorts` reads it)."""
    position = _positions(position)
    frame = pd.DataFrame({"unit": unit, "position": position,
                          "step": exposure_steps(position, batch_size, first_step)})
    return frame.sort_values(["unit", "position"], kind="stable").reset_index(drop=True)


def cohort_column(k: int) -> str:
    """The panel column of the ``k``-th exposure's cohort: ``cohort``, ``cohort_2``, ..."""
    return "cohort" if k == 1 else f"cohort_{k}"


def exposure_cohorts(exposures: pd.DataFrame, units, checkpoints, *, where: str = "",
                     max_exposures: int | None = None) -> pd.DataFrame:
    """One row per unit with the cohort of each of its exposures.

    Parameters
    ----------
    exposures : pandas.DataFrame
        Columns ``unit`` and ``step``: one row per time training saw the unit (the step is
        1-based: the first optimisation step is 1). A unit with no row is never trained on
        (a validation instance); so is a row whose ``step`` is empty.
    units : array_like
        The units of the panel, in order; every one gets a row.
    checkpoints : sequence of int
        The checkpoints' steps.
    where : str
        How errors name the source.
    max_exposures : int, optional
        Keep this many cohort columns at most (later exposures are counted in
        ``exposures`` but get no column).

    Returns
    -------
    pandas.DataFrame
        ``unit``, ``cohort``, ``cohort_2``, ... (float; NaN where a unit has fewer
        exposures) and ``exposures`` (int: exposures at or before the last checkpoint).

    Raises
    ------
    ParameterError
        A unit's first exposure is after the last checkpoint (its cohort is unknown), or a
        step is not a positive integer.

    Notes
    -----
    The k-th exposure's cohort is the first checkpoint at or after its step
    (:func:`~didmem.cohorts.cohort_from_step`). A later exposure (k >= 2) after the last
    checkpoint has not happened yet within the panel: its cohort is empty and it is not
    counted. Two exposures between the same pair of checkpoints share a cohort, and both
    columns say so.

    Examples
    --------
    >>> table = pd.DataFrame({"unit": [7, 7, 8], "step": [3, 12, 25]})
    >>> exposure_cohorts(table, [7, 8, 9], [10, 20, 30])
       unit  cohort  cohort_2  exposures
    0     7    10.0      20.0          2
    1     8    30.0       NaN          1
    2     9     NaN       NaN          0
    """
    prefix = f"{where}: " if where else ""  # "config x: [design] file 'o.csv': ..."
    missing = {"unit", "step"} - set(exposures.columns)
    if missing:
        raise ParameterError(f"{prefix}the exposure table needs columns unit and step; it lacks "
                             f"{listing(sorted(missing))}.")
    units = pd.Index(pd.unique(np.asarray(units)))
    table = exposures[["unit", "step"]].copy()
    step = pd.to_numeric(table["step"], errors="coerce").astype(np.float64)
    given = table["step"].notna() & (table["step"].astype(str).str.strip() != "")
    unreadable = step.isna() & given
    if unreadable.any():
        at = int(np.argmax(unreadable.to_numpy()))
        raise ParameterError(
            f"{prefix}the exposure table's step column holds {table['step'].iloc[at]!r} for unit "
            f"{python_scalar(table['unit'].iloc[at])!r} (row {at}), which is not a number; "
            "leave it empty for an instance that training never sees.")
    table["step"] = step
    table = table[table["unit"].isin(units) & np.isfinite(table["step"])]
    grid = np.unique(np.asarray(checkpoints, dtype=np.float64))
    last = grid[-1] if grid.size else -np.inf
    table = table.sort_values(["unit", "step"], kind="stable")
    table["k"] = table.groupby("unit", sort=False).cumcount() + 1
    late_first = table[(table["k"] == 1) & (table["step"] > last)]
    if len(late_first):
        raise ParameterError(
            f"{prefix}{len(late_first)} units are first trained on after the last checkpoint "
            f"({last:g}), e.g. unit {python_scalar(late_first['unit'].iloc[0])!r} at step "
            f"{late_first['step'].iloc[0]:g}; their cohort is unknown. Drop them, or add "
            "later checkpoints."
        )
    table = table[table["step"] <= last]
    try:
        table["cohort"] = cohort_from_step(table["step"].to_numpy(), grid)
    except ParameterError as exc:
        raise ParameterError(f"{prefix}{exc}") from None
    count = table.groupby("unit", sort=False).size()
    top = int(table["k"].max()) if len(table) else 1
    if max_exposures is not None:
        top = min(top, int(max_exposures))
    wide = table[table["k"] <= top].pivot(index="unit", columns="k", values="cohort")
    out = pd.DataFrame({"unit": units})
    for k in range(1, top + 1):
        values = wide[k] if k in wide.columns else pd.Series(dtype=np.float64)
        out[cohort_column(k)] = out["unit"].map(values).astype(np.float64)
    out["exposures"] = out["unit"].map(count).fillna(0).astype(np.int64)
    return out
