"""Read a balanced panel from a parquet dataset in bounded memory, as unit paths.

A folder of parquet files, in any order of files and rows (as scoring on Ray writes it:
each part holds some checkpoints of some instances), is read without building the long
panel. Opening it reads each file's footer; the units' index (the units, the times, and
which files share units) is read from every file's unit and time columns. The files that
share units (directly or through others) form a *component*; its units are cut into hash
buckets small enough that their paths (units x times) fit the memory budget. A *work item*
(a component's files, a bucket's units) is read chunk by chunk (groups of row groups), each
chunk's rows scattered into the bucket's paths, and leaves as one :class:`PathBlock` of
complete paths. Items are independent: they run one after the other here, or as tasks on
Ray (:func:`didmem.runners.ray_tasks.ray_map`). A bucket re-reads its component's files, so
the folder is read twice (the index, then the items) when every component's paths fit the
budget. Where the units are integers whose range fits the budget,
:mod:`didmem.panel.scan_dense` reads the folder once, without the index.

The checks :class:`~didmem.Panel` makes are made on the way and name the file and rows:
missing columns (another schema), non-numeric columns, units of another type, duplicated
(unit, time) rows (within a file or across files), a cohort that changes within a unit
(across files too), holes, NaN or infinite outcomes, and a file that is not parquet or is
cut short. Nothing is written.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
from numba import njit

from .._messages import listing, python_scalar
from .._validation import Integral, Satisfies, check_all
from ..errors import MissingFileError, PanelError

__all__ = ["ParquetPaths", "PathBlock", "ScanItem", "read_item", "scatter_rows",
           "reference_scatter"]

CHUNK_ROWS = 2**20  # rows read at once (about 32 MB with four columns)
MEMORY_BYTES = 2 * 2**30  # paths held at once: 9 bytes per (unit, time)


@dataclass(frozen=True)
class PathBlock:
    """Complete outcome paths of some units.

    Attributes
    ----------
    units : ndarray (n,)
        Unit identifiers.
    cohorts : ndarray (n,)
        Each unit's cohort (``inf`` for never-treated).
    y : ndarray (n, T)
        Outcome paths over the dataset's times.
    """

    units: np.ndarray
    cohorts: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class ScanItem:
    """One work item: the files of a component and the units of one of its buckets.

    It holds only names and values (it pickles small), so it can travel to a Ray task.
    """

    files: tuple
    units: np.ndarray
    times: np.ndarray
    columns: tuple  # unit, time, cohort, outcome
    never_treated: float | None = None
    chunk_rows: int = CHUNK_ROWS


# ------------------------------------------------------------------ the scatter kernel
@njit(cache=True)
def scatter_rows(codes, tcodes, cohort, y, paths, filled, unit_cohort, unit_file, unit_row,
                 file_index, row0):
    """Scatter a chunk's rows into the paths of a bucket, checking as it goes.

    ``codes`` is each row's unit in the bucket (``-1``: another bucket's, skipped). A unit's
    cohort is its first row's (``unit_file``/``unit_row`` say where it was read; a unit not
    yet seen has ``unit_file`` -1). Returns the chunk row of the first duplicated (unit,
    time), of the first cohort that differs from its unit's, and of the first non-finite
    outcome (``-1`` when none), stopping at the first offence.
    """
    for r in range(codes.size):
        u = codes[r]
        if u < 0:
            continue
        t = tcodes[r]
        v = y[r]
        if not np.isfinite(v):
            return -1, -1, r
        if unit_file[u] < 0:
            unit_file[u] = file_index
            unit_row[u] = row0 + r
            unit_cohort[u] = cohort[r]
        elif cohort[r] != unit_cohort[u]:
            return -1, r, -1
        if filled[u, t]:
            return r, -1, -1
        filled[u, t] = 1
        paths[u, t] = v
    return -1, -1, -1


def reference_scatter(codes, tcodes, cohort, y, n_units, n_times):
    """A chunk scattered into fresh paths row by row in plain Python (the tests' oracle of
    :func:`scatter_rows`): ``(paths, filled, unit_cohort, (dup, change, bad))``."""
    paths = np.zeros((n_units, n_times))
    filled = np.zeros((n_units, n_times), dtype=np.uint8)
    unit_cohort = np.full(n_units, np.nan)
    seen = set()
    for r, (u, t, g, v) in enumerate(zip(codes, tcodes, cohort, y)):
        if u < 0:
            continue
        if not np.isfinite(v):
            return paths, filled, unit_cohort, (-1, -1, r)
        if u not in seen:
            seen.add(u)
            unit_cohort[u] = g
        elif g != unit_cohort[u]:
            return paths, filled, unit_cohort, (-1, r, -1)
        if filled[u, t]:
            return paths, filled, unit_cohort, (r, -1, -1)
        filled[u, t] = 1
        paths[u, t] = v
    return paths, filled, unit_cohort, (-1, -1, -1)


# ------------------------------------------------------------------ files
def _data_files(path: Path) -> list[Path]:
    """The files of a dataset folder (names starting with '.' or '_' are not data, as for
    pyarrow and Spark), sorted; a file is a dataset of one file."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise MissingFileError(f"No parquet file or folder at {str(path)!r}.")
    files = sorted(p for p in path.rglob("*") if p.is_file()
                   and not any(part.startswith((".", "_"))
                               for part in p.relative_to(path).parts))
    if not files:
        raise PanelError(f"The folder {str(path)!r} holds no data file.")
    return files


def _is_numeric(arrow_type) -> bool:
    import pyarrow as pa

    return (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
            or pa.types.is_boolean(arrow_type) or pa.types.is_decimal(arrow_type)
            or (pa.types.is_dictionary(arrow_type) and _is_numeric(arrow_type.value_type)))


def _open(file):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(file)
    except (pa.ArrowException, OSError) as exc:
        reason = str(exc).rstrip(".")  # pyarrow's ends in '.': not '..' before ours
        raise PanelError(
            f"File {str(file)!r} is not a readable parquet file (cut short, or another "
            f"format): {reason}. Remove it from the folder or write it again.") from None


def _read(pf, file, columns, row_groups=None, use_threads=True):
    import pyarrow as pa

    try:
        if row_groups is None:
            return pf.read(columns=columns, use_threads=use_threads)
        return pf.read_row_groups(row_groups, columns=columns, use_threads=use_threads)
    except (pa.ArrowException, OSError) as exc:
        raise PanelError(
            f"File {str(file)!r} cannot be read (cut short or damaged): {exc}. "
            "Write it again.") from None


def _null_row(column) -> int:
    return int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])


def _float(column, copy: bool = False) -> np.ndarray:
    """A numeric arrow column as float64 (nulls as NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not pa.types.is_float64(column.type):
        column = pc.cast(column, pa.float64())
    out = column.to_numpy(zero_copy_only=False)
    return np.array(out, dtype=np.float64) if copy or not out.flags.writeable else out


def _values(column, kind: str = "i") -> np.ndarray:
    """Unit identifiers as numpy values: integers as int64, strings as objects; numbers that
    are not integers (floats, decimals) as float64, or as int64 where the dataset's ids are
    integers (``kind`` ``"i"``: identifiers equal as numbers are one unit, 3.0 is unit 3;
    :meth:`ParquetPaths._index` has checked that they are whole)."""
    import pyarrow as pa

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not _is_numeric(column.type):
        return column.to_numpy(zero_copy_only=False)
    if _is_integer(column.type):
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)
    values = _float(column)
    return values.astype(np.int64) if kind == "i" else values


def _is_integer(arrow_type) -> bool:
    """Integer (or boolean) identifiers, as opposed to floats and decimals."""
    import pyarrow as pa

    return pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type)


def _fractional_row(values: np.ndarray) -> int:
    """The first position of a value that is not a whole number within int64 (or -1)."""
    bad = ~(np.isfinite(values) & (values == np.round(values)) & (np.abs(values) < 2.0**62))
    return int(np.argmax(bad)) if bad.any() else -1


def _distinct_values(column) -> np.ndarray:
    """The distinct unit identifiers of an arrow column, as :func:`_values` gives them (in no
    promised order).

    Integer identifiers in a range not much wider than the rows (the usual 0..N ids) are
    marked in a boolean table, one vectorised pass; others go through arrow's hash."""
    import pyarrow as pa
    import pyarrow.compute as pc

    numeric = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if _is_integer(numeric) and len(column):
        values = _values(column)
        lo, hi = int(values.min()), int(values.max())
        if hi - lo <= 4 * values.size + 1024:
            seen = np.zeros(hi - lo + 1, dtype=bool)
            seen[values - lo] = True
            return np.flatnonzero(seen).astype(np.int64) + lo
    return _values(pc.unique(column), kind="f")  # floats as they are: the caller checks them


class _Lookup:
    """Unit values -> their index in ``units`` (-1 for others): a table for dense integer
    identifiers, a hash index otherwise."""

    def __init__(self, units: np.ndarray) -> None:
        self.table = None
        if units.dtype.kind == "i" and units.size:
            lo, hi = int(units.min()), int(units.max())
            if hi - lo + 1 <= 4 * units.size + 1024:
                self.lo = lo
                self.table = np.full(hi - lo + 1, -1, dtype=np.int64)
                self.table[units - lo] = np.arange(units.size)
        if self.table is None:
            import pandas as pd

            self.index = pd.Index(units)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        if self.table is None:
            return np.asarray(self.index.get_indexer(values), dtype=np.int64)
        if values.dtype.kind != "i":
            return np.full(values.size, -1, dtype=np.int64)
        pos = values - self.lo
        if pos.size and pos.min() >= 0 and pos.max() < self.table.size:
            return self.table[pos]  # every value in range: one gather
        inside = (pos >= 0) & (pos < self.table.size)
        out = np.full(values.size, -1, dtype=np.int64)
        out[inside] = self.table[pos[inside]]
        return out


# ------------------------------------------------------------------ a work item
def read_item(item: ScanItem) -> PathBlock:
    """Read a work item's rows from its files into complete paths, with every check.

    Raises :class:`~didmem.errors.PanelError` naming the file and rows of the first
    offence.
    """
    unit, time, cohort_name, outcome = item.columns
    n_units, n_t = item.units.size, item.times.size
    paths = np.empty((n_units, n_t))
    filled = np.zeros((n_units, n_t), dtype=np.uint8)
    unit_cohort = np.full(n_units, np.nan)
    unit_file = np.full(n_units, -1, dtype=np.int64)
    unit_row = np.full(n_units, -1, dtype=np.int64)
    lookup = _Lookup(item.units)
    for f, file in enumerate(item.files):
        pf = _open(file)
        for row0, groups in chunk_plan(pf.metadata, item.chunk_rows):
            table = _read(pf, file, list(item.columns), groups)
            codes = lookup(_values(table.column(unit), item.units.dtype.kind))
            tcodes = np.searchsorted(item.times, _float(table.column(time)))
            cohort = _float(table.column(cohort_name), copy=True)
            never = np.isnan(cohort)
            if item.never_treated is not None:
                never |= cohort == item.never_treated
            cohort[never] = np.inf
            if np.isneginf(cohort).any():
                r = int(np.flatnonzero(np.isneginf(cohort))[0])
                raise PanelError(
                    f"Column {cohort_name!r} (cohort) has -inf at row {row0 + r} of file "
                    f"{str(file)!r}; never-treated is NaN or inf.")
            y = _float(table.column(outcome))
            dup, change, bad = scatter_rows(codes, tcodes, cohort, y, paths, filled,
                                            unit_cohort, unit_file, unit_row, f, row0)
            if bad >= 0:
                raise non_finite_error(outcome, row0 + bad, file)
            if change >= 0:
                u = codes[change]
                raise cohort_change_error(cohort_name, item.units[u], unit_cohort[u],
                                          item.files[unit_file[u]], unit_row[u],
                                          cohort[change], row0 + change, file)
            if dup >= 0:
                u, t = codes[dup], tcodes[dup]
                raise duplicate_error(item.files[: f + 1], (unit, time), item.units[u],
                                      item.times[t], until=(f, row0 + dup))
    holes = filled.sum(axis=1) < n_t
    if holes.any():
        u = int(np.flatnonzero(holes)[0])
        raise hole_error(time, int(holes.sum()), item.units[u], item.times[filled[u] == 0],
                         None if unit_file[u] < 0 else item.files[unit_file[u]], unit_row[u])
    return PathBlock(item.units, unit_cohort, paths)


def chunk_plan(meta, chunk_rows: int) -> list[tuple[int, list]]:
    """A file's row groups in chunks of at least ``chunk_rows`` rows (row groups are not
    split): ``(first row, row groups)`` of each, from its footer ``meta``."""
    plan, groups, rows, row0 = [], [], 0, 0
    for g in range(meta.num_row_groups):
        groups.append(g)
        rows += meta.row_group(g).num_rows
        if rows < chunk_rows and g < meta.num_row_groups - 1:
            continue
        plan.append((row0, groups))
        row0 += rows
        groups, rows = [], 0
    return plan


def read_chunk(file, groups, columns, row0=0, not_null=(), use_threads=True):
    """The row groups ``groups`` of ``file`` (its ``columns``; their first row is row ``row0``
    of the file), refusing missing values in the columns ``not_null`` (the unit and time)
    with the file and row named; ``use_threads``: arrow decodes the columns in parallel."""
    table = _read(_open(file), file, list(columns), groups, use_threads)
    for name in not_null:
        col = table.column(name)
        if col.null_count:
            role = "unit" if name == columns[0] else "time"
            raise PanelError(
                f"Column {name!r} ({role}) has missing values in file {str(file)!r}, first "
                f"at row {row0 + _null_row(col)}.")
    return table


# ------------------------------------------------------------------ the messages
def non_finite_error(outcome, row, file) -> PanelError:
    return PanelError(
        f"Outcome column {outcome!r} has a NaN or infinite value at row {row} of file "
        f"{str(file)!r}. Remove or impute it first.")


def cohort_change_error(cohort, unit_value, first_cohort, first_file, first_row, other,
                        row, file) -> PanelError:
    return PanelError(
        f"Column {cohort!r} (cohort) must be constant within a unit; unit "
        f"{python_scalar(unit_value)!r} has cohort {_cohort(first_cohort)} at row {first_row} "
        f"of file {str(first_file)!r} and {_cohort(other)} at row {row} of file "
        f"{str(file)!r}.")


def duplicate_error(files, names, unit_value, time_value, until) -> PanelError:
    where = _find_rows(files, names, unit_value, time_value, until)
    return PanelError(
        f"Duplicate (unit, time) rows: ({names[0]!r}, {names[1]!r}) = "
        f"({python_scalar(unit_value)!r}, {python_scalar(time_value)!r}) at "
        + " and at ".join(where) + ".")


def hole_error(time, n_units, unit_value, missing, first_file, first_row) -> PanelError:
    where = ("it has no row at all" if first_file is None else
             f"its first row is row {first_row} of file {str(first_file)!r}")
    return PanelError(
        f"The panel is unbalanced: {n_units} units lack rows at some times, e.g. "
        f"unit {python_scalar(unit_value)!r} has no row at {time!r} = "
        f"{listing(missing)} ({where}). A dataset read in bounded memory must be balanced; "
        "load a panel with holes in memory (didmem.Panel(..., balance='keep')).")


def _find_rows(files, names, unit_value, time_value, until) -> list[str]:
    """Where the rows of one (unit, time) are in ``files``, up to the row ``until`` (error
    path only)."""
    import pyarrow.compute as pc

    unit, time = names
    found = []
    for f, file in enumerate(files[: until[0] + 1]):
        table = _read(_open(file), file, [unit, time])
        hit = pc.and_(pc.equal(table.column(unit), unit_value),
                      pc.equal(pc.cast(table.column(time), "float64"), float(time_value)))
        rows = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
        if f == until[0]:
            rows = rows[rows <= until[1]]
        found += [f"row {r} of file {str(file)!r}" for r in rows]
    return found[:5]


def _cohort(value) -> str:
    return "never-treated" if np.isinf(value) else repr(python_scalar(value))


# ------------------------------------------------------------------ the dataset
_SCAN_CONSTRAINTS = {
    "never_treated": Satisfies(lambda v: v is None or (isinstance(v, numbers.Real)
                                                       and not isinstance(v, bool)),
                               "None or a number (the cohort code of never-treated units)"),
    # a budget of 0 or False was read as "the default" (``or``); 1 byte is one path at a time
    "memory_bytes": Integral(1, allow_none=True),
    "chunk_rows": Integral(1, allow_none=True),
}


class ParquetPaths:
    """A parquet dataset read as unit paths, in work items (see the module notes).

    Parameters
    ----------
    path : str or path-like
        A parquet file or a folder of them (searched recursively).
    unit, time, cohort, outcome : str
        Column names, as for :class:`~didmem.Panel`; ``outcome`` is one column.
    never_treated : float, optional
        A cohort code that marks never-treated units (NaN and ``inf`` always do).
    memory_bytes : int, optional
        Budget of the paths held at once (9 bytes per unit and time; 2 GiB by default).
    chunk_rows : int, optional
        Rows read at once (row groups are not split).
    map_items : callable, optional
        A ``map(function, items)`` that runs the work items of a fit (such as
        :func:`didmem.runners.ray_tasks.ray_map` on Ray); by default they are read here.

    Opening reads each file's footer, so that a file that is not parquet, a missing or
    non-numeric column, or units of another type are refused before any row is read. The
    units' index (:attr:`units`, :attr:`times`, :meth:`items`) is read from every file's unit
    and time columns when first asked for; a fit reads the folder once without it where the
    units are integers whose range fits the budget (:func:`didmem.panel.scan_dense.read_dense`).
    """

    def __init__(self, path, *, unit: str, time: str, cohort: str, outcome: str,
                 never_treated: float | None = None, memory_bytes: int | None = None,
                 chunk_rows: int | None = None, map_items=None) -> None:
        check_all("Panel.scan", {"never_treated": never_treated, "memory_bytes": memory_bytes,
                                 "chunk_rows": chunk_rows}, _SCAN_CONSTRAINTS)
        self.path = Path(path)
        self.map_items = map_items
        self.unit, self.time, self.cohort, self.outcome = unit, time, cohort, outcome
        self.never_treated = never_treated
        self.memory_bytes = int(memory_bytes or MEMORY_BYTES)
        self.chunk_rows = int(chunk_rows or CHUNK_ROWS)
        self.files = _data_files(self.path)
        footers = [_open(f) for f in self.files]
        self._check_schemas(footers)
        self.footers = [pf.metadata for pf in footers]  # the files themselves are closed
        self.n_rows = sum(meta.num_rows for meta in self.footers)
        self._indexed = None

    @property
    def columns(self) -> tuple:
        return (self.unit, self.time, self.cohort, self.outcome)

    @property
    def times(self) -> np.ndarray:
        """The dataset's times, ascending (read with the units' index)."""
        return self._index()[0]

    @property
    def units(self) -> np.ndarray:
        """The dataset's units, sorted (read with the units' index)."""
        return self._index()[1]

    # ------------------------------------------------------------------ opening
    def _check_schemas(self, footers) -> None:
        import pyarrow as pa

        roles = {"unit": self.unit, "time": self.time, "cohort": self.cohort,
                 "outcome": self.outcome}
        unit_type = None
        self._integer_file = None
        for file, pf in zip(self.files, footers):
            schema = pf.schema_arrow
            missing = [f"{role} column {col!r}" for role, col in roles.items()
                       if col not in schema.names]
            if missing:
                raise PanelError(
                    f"File {str(file)!r} has another schema: missing " + "; ".join(missing)
                    + f". It has columns {schema.names}.")
            for role in ("time", "cohort", "outcome"):
                arrow_type = schema.field(roles[role]).type
                if not _is_numeric(arrow_type):
                    raise PanelError(
                        f"Column {roles[role]!r} ({role}) must be numeric; in file "
                        f"{str(file)!r} it has type {arrow_type}.")
            arrow_type = schema.field(self.unit).type
            if pa.types.is_dictionary(arrow_type):  # dictionary-encoded: its values count
                arrow_type = arrow_type.value_type
            family = "number" if _is_numeric(arrow_type) else str(arrow_type).replace("large_", "")
            if family == "number" and _is_integer(arrow_type) and self._integer_file is None:
                self._integer_file = file
            if unit_type is None:
                unit_type = (family, file)
            elif family != unit_type[0]:
                raise PanelError(
                    f"Column {self.unit!r} (unit) has type {arrow_type} in file {str(file)!r} but "
                    f"{unit_type[0]} in file {str(unit_type[1])!r}: one unit type for the "
                    "whole dataset.")
        # numbers are matched as numbers: with integer ids in some file, whole floats
        # elsewhere are those integers (3.0 is unit 3); with floats alone they stay floats
        self.unit_kind = ("O" if unit_type[0] != "number"
                          else "i" if self._integer_file is not None else "f")

    def _index(self):
        """The times, the units (sorted), each unit's component of files and each file's
        component, read once.

        The units' index grows file by file (a merge only when a file brings new units), so
        the memory is that of the distinct units, not of every file's list of them.
        """
        import pyarrow.compute as pc

        if self._indexed is not None:
            return self._indexed
        times = []
        units, lookup = None, None
        first = np.zeros(0, dtype=np.int64)  # the first file of each unit
        parent = list(range(len(self.files)))

        def root(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for f, file in enumerate(self.files):
            table = _read(_open(file), file, [self.unit, self.time])
            for name, role in ((self.unit, "unit"), (self.time, "time")):
                col = table.column(name)
                if col.null_count:
                    raise PanelError(
                        f"Column {name!r} ({role}) has {col.null_count} missing values in "
                        f"file {str(file)!r}, first at row {_null_row(col)}.")
            times.append(_float(pc.unique(table.column(self.time))))
            values = _distinct_values(table.column(self.unit))
            if values.dtype.kind == "f" and self.unit_kind == "i":
                self._check_whole(values, table.column(self.unit), file)
                values = values.astype(np.int64)
            del table
            if units is None:
                units = _unique(values)
                first, lookup = np.full(units.size, f, dtype=np.int64), _Lookup(units)
                continue
            codes = lookup(values)
            found = codes >= 0
            shared = np.bincount(first[codes[found]], minlength=len(self.files))
            for other in np.flatnonzero(shared):  # files (few) that share units with this one
                parent[root(int(other))] = root(f)
            if not found.all():  # merge the new units in, keeping the index sorted
                new = _unique(values[~found])
                merged = np.concatenate([units, new])
                order = np.argsort(merged, kind="stable")
                units = merged[order]
                first = np.concatenate([first, np.full(new.size, f, dtype=np.int64)])[order]
                lookup = _Lookup(units)
        times = np.unique(np.concatenate(times))
        if times.size == 0 or units is None or units.size == 0:
            raise PanelError(f"The dataset {str(self.path)!r} has no rows.")
        if not np.all(np.isfinite(times)):
            raise PanelError(f"Column {self.time!r} (time) has infinite values.")
        component = np.array([root(f) for f in range(len(self.files))])
        self._indexed = (times, units, component[first], component)
        return self._indexed

    def _check_whole(self, values, column, file) -> None:
        """Floats among integer ids must be whole: 3.0 is unit 3, but 3.5 is no integer."""
        if _fractional_row(values) < 0:
            return
        values = _float(column)
        row = _fractional_row(values)
        raise PanelError(
            f"Column {self.unit!r} (unit) holds {float(values[row])!r} at row {row} of file "
            f"{str(file)!r}, not a whole number, while file {str(self._integer_file)!r} "
            "holds integer ids: ids are matched as numbers (3.0 is unit 3), and this one "
            "matches no integer. Write the ids with one type.")

    # ------------------------------------------------------------------ work items
    def items(self) -> list[ScanItem]:
        """The work items: per component of files, its units in buckets that fit the
        memory budget (a bucket's units are every ``n``-th of the component's)."""
        per_unit = 9 * self.times.size
        out = []
        times, all_units, unit_component, file_component = self._index()
        for comp in np.unique(unit_component):
            units = all_units[unit_component == comp]
            files = tuple(str(self.files[f]) for f in np.flatnonzero(file_component == comp))
            per_bucket = max(1, self.memory_bytes // per_unit)
            n_buckets = max(1, -(-units.size // per_bucket))
            for b in range(n_buckets):
                out.append(ScanItem(files=files, units=units[b::n_buckets], times=times,
                                    columns=self.columns, never_treated=self.never_treated,
                                    chunk_rows=self.chunk_rows))
        return out

    def blocks(self) -> Iterator[PathBlock]:
        """Every unit's complete path once, a block per work item, read here."""
        for item in self.items():
            if item.units.size:
                yield read_item(item)


def _unique(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in "iuf":
        return np.unique(values)
    import pandas as pd

    return np.sort(pd.unique(values)).astype(object)
