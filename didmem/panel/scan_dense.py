"""Read a parquet dataset in one pass where its units are integers in a range that fits.

:class:`~didmem.panel.scan.ParquetPaths` reads a folder in work items: an index pass over every
file's unit and time columns, then each item's rows again. When the unit identifiers are
integers and the files' footers (each row group's minimum and maximum) bound them to a range
whose paths fit the memory budget, that first pass is not needed: every row goes at once into
a table of paths with one column per identifier of the range and one row per time
(time-major, so that files that each hold some checkpoints of every unit are written in
order), and the times are found as they come. The pages of identifiers that no row names are
never touched, so a range with gaps costs only what its units use; a unit is an identifier
with at least one row.

The next chunks of rows are read on other threads (pyarrow releases the GIL) while
:func:`scatter_dense` (numba, without the GIL) places the current one, so they share the
cores. The checks are those of :func:`~didmem.panel.scan.read_item`, with the same messages:
duplicated (unit, time) rows within a file or across files, a cohort that changes within a
unit, holes, NaN or infinite outcomes, missing units or times, and files that cannot be read.

:func:`read_dense` returns ``None`` where this does not apply (units that are not integers,
footers without statistics, a range or a number of times that outgrows the budget, a row
outside its footer's range): the work items serve those datasets.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..errors import PanelError
from .scan import (chunk_plan, cohort_change_error, duplicate_error, hole_error,
                         non_finite_error, read_chunk)

__all__ = ["DensePaths", "read_dense", "scatter_dense"]

PER_ID_BYTES = 24  # each identifier of the range: its cohort, first file and first row
READERS = 2  # chunks read ahead, each on its own thread
DONE, NEW_TIME, OUTSIDE, BAD_OUTCOME, MINUS_INF, CHANGE, DUPLICATE = range(7)


@dataclass(frozen=True)
class DensePaths:
    """Complete outcome paths of every unit of a dataset, read in one pass.

    Attributes
    ----------
    times : ndarray (T,)
        The dataset's times, ascending.
    slots : ndarray (T,)
        The row of ``paths`` that holds each time (rows are in the order times were found).
    units : ndarray (n,)
        Unit identifiers, ascending.
    cohorts : ndarray (n,)
        Each unit's cohort (``inf`` for never-treated).
    columns : ndarray (n,)
        Each unit's column in ``paths``.
    paths : ndarray (T, m)
        Outcomes by time (row ``slots[k]`` for ``times[k]``) and identifier (a column per
        identifier of the range; columns of identifiers without rows hold garbage).
    """

    times: np.ndarray
    slots: np.ndarray
    units: np.ndarray
    cohorts: np.ndarray
    columns: np.ndarray
    paths: np.ndarray


# ------------------------------------------------------------------ the kernels
@njit(cache=True, nogil=True)
def scatter_dense(ids, times, cohort, y, lo, known, slots, never, paths, filled, unit_cohort,
                  unit_file, unit_row, file_index, row0, start):
    """Place rows ``start:`` of a chunk into time-major paths, checking as it goes.

    ``ids - lo`` is each row's column; ``known`` (ascending) are the times found so far and
    ``slots`` their rows of ``paths``; a cohort that is NaN or ``never`` is never-treated
    (``inf``). A unit's cohort is its first row's (``unit_file``/``unit_row`` say where it was
    read; ``unit_file`` is -1 for an identifier not yet seen). Returns ``(status, row)``:
    ``DONE`` after the last row, or the first row that needs the caller: a time not in
    ``known`` (``NEW_TIME``), an identifier outside the range (``OUTSIDE``), a NaN or infinite
    outcome, a cohort of ``-inf``, a cohort that differs from its unit's (``CHANGE``), or a
    (unit, time) already filled (``DUPLICATE``).
    """
    span = unit_cohort.size
    last = np.nan
    slot = -1
    for r in range(start, ids.size):
        u = ids[r] - lo
        if u < 0 or u >= span:
            return OUTSIDE, r
        t = np.float64(times[r])
        if t != last:
            k = np.searchsorted(known, t)
            if k == known.size or known[k] != t:
                return NEW_TIME, r
            last = t
            slot = slots[k]
        v = y[r]
        if not np.isfinite(v):
            return BAD_OUTCOME, r
        g = cohort[r]
        if np.isnan(g) or g == never:
            g = np.inf
        elif g == -np.inf:
            return MINUS_INF, r
        if unit_file[u] < 0:
            unit_file[u] = file_index
            unit_row[u] = row0 + r
            unit_cohort[u] = g
        elif g != unit_cohort[u]:
            return CHANGE, r
        if filled[slot, u]:
            return DUPLICATE, r
        filled[slot, u] = 1
        paths[slot, u] = v
    return DONE, ids.size


@njit(cache=True, nogil=True)
def _rows_filled(filled, n_slots, unit_file):
    """How many units lack a time, and the first of them (-1 if none)."""
    span = unit_file.size
    count = np.zeros(span, dtype=np.int64)
    for s in range(n_slots):
        for u in range(span):
            count[u] += filled[s, u]
    holes, first = 0, -1
    for u in range(span):
        if unit_file[u] >= 0 and count[u] < n_slots:
            holes += 1
            if first < 0:
                first = u
    return holes, first


# ------------------------------------------------------------------ the pass
def unit_range(dataset) -> tuple[int, int] | None:
    """The smallest and largest unit identifier by the footers' statistics, or ``None`` where
    the units are not integers or a row group has no statistics."""
    import pyarrow as pa

    lo = hi = None
    for meta in dataset.footers:
        kind = meta.schema.to_arrow_schema().field(dataset.unit).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if not pa.types.is_integer(kind):
            return None
        names = [meta.schema.column(j).path for j in range(meta.num_columns)]
        j = names.index(dataset.unit)
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if group.num_rows == 0:
                continue
            stats = group.column(j).statistics
            if stats is None or not stats.has_min_max:
                return None
            if not isinstance(stats.min, int) or not isinstance(stats.max, int):
                return None
            lo = stats.min if lo is None else min(lo, stats.min)
            hi = stats.max if hi is None else max(hi, stats.max)
    if lo is None or lo < -(2**62) or hi >= 2**62:
        return None
    return int(lo), int(hi)


def read_dense(dataset) -> DensePaths | None:
    """Every unit's path of a :class:`~didmem.panel.scan.ParquetPaths`, read in one pass, or
    ``None`` where the pass does not apply (see the module notes).

    Raises :class:`~didmem.errors.PanelError` naming the file and rows of the first offence.
    """
    bounds = unit_range(dataset)
    if bounds is None:
        return None
    lo, span = bounds[0], bounds[1] - bounds[0] + 1
    capacity = min((dataset.memory_bytes // span - PER_ID_BYTES) // 9, dataset.n_rows)
    if capacity < 1:
        return None
    # the rows of times not yet found are never touched, so they cost no memory
    paths = np.empty((capacity, span))
    filled = np.zeros((capacity, span), dtype=np.uint8)
    unit_cohort = np.full(span, np.nan)
    unit_file = np.full(span, -1, dtype=np.int64)
    unit_row = np.full(span, -1, dtype=np.int64)
    known, slots = np.zeros(0), np.zeros(0, dtype=np.int64)
    never = np.nan if dataset.never_treated is None else float(dataset.never_treated)
    with contextlib.closing(_prefetched(dataset)) as chunks:
        for f, file, row0, table in chunks:
            for batch in table.to_batches():
                ids, times, cohort, y = _arrays(batch, dataset.columns)
                start = 0
                while True:
                    status, r = scatter_dense(ids, times, cohort, y, lo, known, slots, never,
                                              paths, filled, unit_cohort, unit_file,
                                              unit_row, f, row0, start)
                    if status == DONE:
                        break
                    if status == OUTSIDE:
                        return None  # the footers' statistics do not bound the units
                    if status != NEW_TIME:
                        raise _offence(dataset, status, f, file, row0 + r, ids[r] - lo,
                                       times[r], cohort[r], unit_cohort, unit_file, unit_row, lo,
                                       known, slots, filled)
                    t = float(times[r])
                    if not np.isfinite(t):
                        raise PanelError(
                            f"Column {dataset.time!r} (time) has a NaN or infinite value at "
                            f"row {row0 + r} of file {str(file)!r}.")
                    if known.size == capacity:
                        return None  # more times than the budget holds: work items
                    k = int(np.searchsorted(known, t))
                    known = np.insert(known, k, t)
                    slots = np.insert(slots, k, known.size - 1)
                    start = r
                row0 += batch.num_rows
    if known.size == 0:
        raise PanelError(f"The dataset {str(dataset.path)!r} has no rows.")
    n_holes, first = _rows_filled(filled, known.size, unit_file)
    if n_holes:
        missing = known[filled[slots, first] == 0]
        raise hole_error(dataset.time, n_holes, lo + first, missing,
                         dataset.files[unit_file[first]], unit_row[first])
    columns = np.flatnonzero(unit_file >= 0)
    return DensePaths(times=known, slots=slots, units=lo + columns,
                      cohorts=unit_cohort[columns], columns=columns,
                      paths=paths[:known.size])


def _offence(dataset, status, f, file, row, u, time_value, cohort_value, unit_cohort,
             unit_file, unit_row, lo, known, slots, filled):
    if status == BAD_OUTCOME:
        return non_finite_error(dataset.outcome, row, file)
    if status == MINUS_INF:
        return PanelError(
            f"Column {dataset.cohort!r} (cohort) has -inf at row {row} of file {str(file)!r}; "
            "never-treated is NaN or inf.")
    unit_value = lo + int(u)
    if status == CHANGE:
        never = dataset.never_treated
        g = np.inf if np.isnan(cohort_value) or cohort_value == never else float(cohort_value)
        return cohort_change_error(dataset.cohort, unit_value, unit_cohort[u],
                                   dataset.files[unit_file[u]], unit_row[u], g, row, file)
    return duplicate_error(dataset.files[: f + 1], dataset.columns[:2], unit_value,
                           float(time_value), until=(f, row))


def _arrays(batch, columns):
    """A record batch's unit identifiers (int64), times (int64 or float64), cohorts and
    outcomes (float64, nulls as NaN), without a copy where arrow holds them so."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = []
    for name, kinds in zip(columns, ((pa.int64(),), (pa.int64(), pa.float64()),
                                     (pa.float64(),), (pa.float64(),))):
        column = batch.column(batch.schema.get_field_index(name))
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if column.type not in kinds:
            column = pc.cast(column, kinds[-1])
        out.append(column.to_numpy(zero_copy_only=False))
    return tuple(out)


def _prefetched(dataset):
    """``(file index, file, first row, table)`` of every chunk of the dataset in order, the
    next :data:`READERS` chunks read on other threads (one core each) while this one is
    used."""
    plan = [(f, file, row0, groups) for f, file in enumerate(dataset.files)
            for row0, groups in chunk_plan(dataset.footers[f], dataset.chunk_rows)]

    def read(step):
        return read_chunk(step[1], step[3], dataset.columns, step[2],
                          (dataset.unit, dataset.time), use_threads=False)

    pool = ThreadPoolExecutor(max_workers=READERS)
    try:
        pending = [pool.submit(read, step) for step in plan[:READERS]]
        for i, step in enumerate(plan):
            table = pending.pop(0).result()
            if i + READERS < len(plan):
                pending.append(pool.submit(read, plan[i + READERS]))
            yield step[0], step[1], step[2], table
            del table
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
