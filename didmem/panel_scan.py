"""Read a balanced panel from a parquet dataset in bounded memory, as unit paths.

A folder of parquet files, in any order of files and rows (as scoring on Ray writes it), is
read chunk by chunk (groups of row groups) without building the long panel: each chunk's rows
are scattered into the paths (units x times) of the units it holds, and the units whose whole
path is in the chunk leave as a :class:`PathBlock` at once. Rows of units spread over chunks
or files are set aside on disk (a temporary folder, removed at the end) and joined after the
last file, by hash buckets of the unit that each fit the memory budget. The checks
:class:`~didmem.Panel` makes are made on the way and name the file and rows: missing
columns, non-numeric columns, units of another type, duplicated (unit, time) rows (within a
file or across files), a cohort that changes within a unit, holes, NaN or infinite
outcomes, and a file that is not parquet or is cut short.

The consumer adds up the blocks (:meth:`didmem.inference.moments.CohortMoments.from_paths`),
so a unit's path is never held longer than its block.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
from numba import njit

from ._messages import listing, python_scalar
from .errors import MissingFileError, PanelError

__all__ = ["ParquetPaths", "PathBlock", "scatter_paths", "reference_scatter"]

CHUNK_ROWS = 4_000_000  # rows read at once (about 100 MB with four columns)
SPILL_ROWS = 2_000_000  # set-aside rows buffered in memory before they go to disk
BUCKET_ROWS = 8_000_000  # set-aside rows joined at once after the last file


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


# ------------------------------------------------------------------ the scatter kernel
@njit(cache=True)
def scatter_paths(codes, tcodes, cohort, y, n_units, n_times):
    """Scatter long rows into paths, finding the first duplicate, cohort change and bad value.

    Returns ``(paths, count, unit_cohort, dup, cohort_change, bad)``: ``paths`` units x
    times (NaN where no row), rows per unit, each unit's cohort (its first row's), and for
    each check the pair ``(row, earlier row)`` of its first offence (``-1`` when none;
    ``bad`` is a non-finite outcome, its earlier row ``-1``).
    """
    paths = np.full((n_units, n_times), np.nan)
    first = np.full((n_units, n_times), -1, dtype=np.int64)
    count = np.zeros(n_units, dtype=np.int64)
    unit_cohort = np.empty(n_units)
    unit_row = np.full(n_units, -1, dtype=np.int64)
    dup = np.full(2, -1, dtype=np.int64)
    change = np.full(2, -1, dtype=np.int64)
    bad = np.full(2, -1, dtype=np.int64)
    for r in range(codes.size):
        u = codes[r]
        t = tcodes[r]
        v = y[r]
        if bad[0] < 0 and not np.isfinite(v):
            bad[0] = r
        if unit_row[u] < 0:
            unit_row[u] = r
            unit_cohort[u] = cohort[r]
        elif change[0] < 0 and cohort[r] != unit_cohort[u]:
            change[0] = r
            change[1] = unit_row[u]
        if first[u, t] >= 0:
            if dup[0] < 0:
                dup[0] = r
                dup[1] = first[u, t]
            continue
        first[u, t] = r
        paths[u, t] = v
        count[u] += 1
    return paths, count, unit_cohort, dup, change, bad


def reference_scatter(codes, tcodes, cohort, y, n_units, n_times):
    """:func:`scatter_paths` row by row in plain numpy (the tests' oracle)."""
    paths = np.full((n_units, n_times), np.nan)
    seen = {}
    unit_first = {}
    count = np.zeros(n_units, dtype=np.int64)
    unit_cohort = np.empty(n_units)
    dup, change, bad = [-1, -1], [-1, -1], [-1, -1]
    for r, (u, t, g, v) in enumerate(zip(codes, tcodes, cohort, y)):
        if bad[0] < 0 and not np.isfinite(v):
            bad[0] = r
        if u not in unit_first:
            unit_first[u] = r
            unit_cohort[u] = g
        elif change[0] < 0 and g != unit_cohort[u]:
            change = [r, unit_first[u]]
        if (u, t) in seen:
            if dup[0] < 0:
                dup = [r, seen[(u, t)]]
            continue
        seen[(u, t)] = r
        paths[u, t] = v
        count[u] += 1
    return paths, count, unit_cohort, np.array(dup), np.array(change), np.array(bad)


# ------------------------------------------------------------------ the dataset
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


def _is_numeric(kind) -> bool:
    import pyarrow as pa

    return (pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_boolean(kind) or pa.types.is_decimal(kind)
            or (pa.types.is_dictionary(kind) and _is_numeric(kind.value_type)))


class ParquetPaths:
    """A parquet dataset read as unit paths (see the module notes).

    Parameters
    ----------
    path : str or path-like
        A parquet file or a folder of them (searched recursively).
    unit, time, cohort, outcome : str
        Column names, as for :class:`~didmem.Panel`; ``outcome`` is one column.
    never_treated : float, optional
        A cohort code that marks never-treated units (NaN and ``inf`` always do).
    memory_rows : int, optional
        Rows held at once (chunks read, set-aside rows joined per bucket).

    Opening the dataset reads each file's footer (schema and row groups) and its time
    column, so that a file that is no parquet, a missing or non-numeric column, or units of
    another type are refused before any outcome is read.
    """

    def __init__(self, path, *, unit: str, time: str, cohort: str, outcome: str,
                 never_treated: float | None = None, memory_rows: int | None = None) -> None:
        self.path = Path(path)
        self.unit, self.time, self.cohort, self.outcome = unit, time, cohort, outcome
        self.never_treated = never_treated
        self.chunk_rows = int(memory_rows or CHUNK_ROWS)
        self.bucket_rows = int(memory_rows or BUCKET_ROWS)
        self.files = _data_files(self.path)
        self._footers = [self._open(f) for f in self.files]
        self._check_schemas()
        self.times = self._read_times()
        self.n_rows = sum(pf.metadata.num_rows for pf in self._footers)

    # ------------------------------------------------------------------ opening
    def _name(self, index: int) -> str:
        return str(self.files[index])

    def _open(self, file: Path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(file)
        except (pa.ArrowException, OSError) as exc:
            raise PanelError(
                f"File {str(file)!r} is not a readable parquet file (cut short, or another "
                f"format): {exc}. Remove it from the folder or write it again.") from None

    def _check_schemas(self) -> None:
        roles = {"unit": self.unit, "time": self.time, "cohort": self.cohort,
                 "outcome": self.outcome}
        unit_type = None
        for i, pf in enumerate(self._footers):
            schema = pf.schema_arrow
            missing = [f"{role} column {col!r}" for role, col in roles.items()
                       if col not in schema.names]
            if missing:
                raise PanelError(
                    f"File {self._name(i)!r} has another schema: missing "
                    + "; ".join(missing) + f". It has columns {schema.names}.")
            for role in ("time", "cohort", "outcome"):
                kind = schema.field(roles[role]).type
                if not _is_numeric(kind):
                    raise PanelError(
                        f"Column {roles[role]!r} ({role}) must be numeric; in file "
                        f"{self._name(i)!r} it has type {kind}.")
            kind = schema.field(self.unit).type
            family = "integer" if _is_numeric(kind) else str(kind).replace("large_", "")
            if unit_type is None:
                unit_type = (family, i)
            elif family != unit_type[0]:
                raise PanelError(
                    f"Column {self.unit!r} (unit) has type {kind} in file {self._name(i)!r} "
                    f"but {unit_type[0]} in file {self._name(unit_type[1])!r}: one unit type "
                    "for the whole dataset.")

    def _read(self, index: int, columns, row_groups=None):
        import pyarrow as pa

        pf = self._footers[index]
        try:
            if row_groups is None:
                return pf.read(columns=columns)
            return pf.read_row_groups(row_groups, columns=columns)
        except (pa.ArrowException, OSError) as exc:
            raise PanelError(
                f"File {self._name(index)!r} cannot be read (cut short or damaged): {exc}. "
                "Write it again.") from None

    def _read_times(self) -> np.ndarray:
        import pyarrow.compute as pc

        found = []
        for i in range(len(self.files)):
            col = self._read(i, [self.time]).column(0)
            if col.null_count:
                row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                raise PanelError(
                    f"Column {self.time!r} (time) has {col.null_count} missing values in file "
                    f"{self._name(i)!r}, first at row {row}.")
            found.append(pc.unique(col).to_numpy(zero_copy_only=False).astype(np.float64))
        times = np.unique(np.concatenate(found)) if found else np.zeros(0)
        if not np.all(np.isfinite(times)):
            raise PanelError(f"Column {self.time!r} (time) has infinite values.")
        if times.size == 0:
            raise PanelError(f"The dataset {str(self.path)!r} has no rows.")
        return times

    # ------------------------------------------------------------------ reading
    def _chunks(self) -> Iterator[tuple[int, int, object]]:
        """``(file index, first row, table)`` of groups of row groups of every file."""
        columns = [self.unit, self.time, self.cohort, self.outcome]
        for i, pf in enumerate(self._footers):
            meta = pf.metadata
            group, rows, row0 = [], 0, 0
            for g in range(meta.num_row_groups):
                group.append(g)
                rows += meta.row_group(g).num_rows
                if rows >= self.chunk_rows or g == meta.num_row_groups - 1:
                    yield i, row0, self._read(i, columns, group)
                    row0 += rows
                    group, rows = [], 0

    def _arrays(self, table, file_index: int, row0: int):
        """Numpy columns of a chunk: units, time codes, cohorts (never-treated: inf), y."""
        units_col = table.column(self.unit)
        if units_col.null_count:
            row = int(np.flatnonzero(units_col.is_null().to_numpy(zero_copy_only=False))[0])
            raise PanelError(
                f"Column {self.unit!r} (unit) has {units_col.null_count} missing values in "
                f"file {self._name(file_index)!r}, first at row {row0 + row}.")
        units = units_col.to_numpy(zero_copy_only=False)
        tvals = _float(table.column(self.time))
        tcodes = np.searchsorted(self.times, tvals)
        cohort = _float(table.column(self.cohort))
        if np.isneginf(cohort).any():
            row = int(np.flatnonzero(np.isneginf(cohort))[0])
            raise PanelError(
                f"Column {self.cohort!r} (cohort) has -inf values in file "
                f"{self._name(file_index)!r}, first at row {row0 + row}; never-treated is NaN "
                "or inf.")
        never = np.isnan(cohort)
        if self.never_treated is not None:
            never |= cohort == self.never_treated
        cohort[never] = np.inf
        return units, tcodes, cohort, _float(table.column(self.outcome))

    def blocks(self) -> Iterator[PathBlock]:
        """Every unit's complete path once, in blocks (see the module notes).

        Raises :class:`~didmem.errors.PanelError` naming the file and rows of the first
        offence; the temporary folder of set-aside rows is removed however it ends.
        """
        spill = tempfile.mkdtemp(prefix="didmem-scan-")
        try:
            yield from self._blocks(spill)
        finally:
            shutil.rmtree(spill, ignore_errors=True)

    def _blocks(self, spill: str) -> Iterator[PathBlock]:
        n_t = self.times.size
        done_units, done_files = [], []
        pending, n_pending, spilled = [], 0, []
        for file_index, row0, table in self._chunks():
            units, tcodes, cohort, y = self._arrays(table, file_index, row0)
            codes, uniq = _factorize(units)
            rows = np.arange(row0, row0 + len(units), dtype=np.int64)
            where = (np.full(len(units), file_index, dtype=np.int64), rows)
            paths, count, unit_cohort = self._scatter(codes, uniq, tcodes, cohort, y, where)
            complete = count == n_t
            if complete.any():
                done_units.append(uniq[complete])
                done_files.append(np.full(int(complete.sum()), file_index, dtype=np.int64))
                yield PathBlock(uniq[complete], unit_cohort[complete], paths[complete])
            del paths
            rest = ~complete[codes]
            if rest.any():
                pending.append((units[rest], tcodes[rest], cohort[rest], y[rest],
                                where[0][rest], rows[rest]))
                n_pending += int(rest.sum())
                if n_pending >= SPILL_ROWS:
                    spilled.append(_write_spill(spill, len(spilled), pending))
                    pending, n_pending = [], 0
        if pending:
            spilled.append(_write_spill(spill, len(spilled), pending))
        yield from self._join_set_aside(spilled, done_units, done_files)

    def _scatter(self, codes, uniq, tcodes, cohort, y, where):
        paths, count, unit_cohort, dup, change, bad = scatter_paths(
            codes, tcodes, cohort, y, uniq.size, self.times.size)
        files, rows = where
        if bad[0] >= 0:
            r = bad[0]
            raise PanelError(
                f"Outcome column {self.outcome!r} has a NaN or infinite value at row "
                f"{rows[r]} of file {self._name(files[r])!r}. Remove or impute it first.")
        if dup[0] >= 0:
            r, q = dup
            raise PanelError(
                f"Duplicate (unit, time) rows: ({self.unit!r}, {self.time!r}) = "
                f"({python_scalar(uniq[codes[r]])!r}, "
                f"{python_scalar(self.times[tcodes[r]])!r}) at {self._where(files, rows, q)} "
                f"and at {self._where(files, rows, r)}.")
        if change[0] >= 0:
            r, q = change
            raise PanelError(
                f"Column {self.cohort!r} (cohort) must be constant within a unit; unit "
                f"{python_scalar(uniq[codes[r]])!r} has cohort {_cohort(cohort[q])} "
                f"at {self._where(files, rows, q)} and {_cohort(cohort[r])} at "
                f"{self._where(files, rows, r)}.")
        return paths, count, unit_cohort

    def _where(self, files, rows, r) -> str:
        return f"row {rows[r]} of file {self._name(files[r])!r}"

    def _join_set_aside(self, spilled, done_units, done_files) -> Iterator[PathBlock]:
        """Join the rows of units spread over chunks, bucket by bucket, after checking that
        no unit already complete has rows elsewhere."""
        import pyarrow.parquet as pq

        done = np.concatenate(done_units) if done_units else np.zeros(0)
        where = np.concatenate(done_files) if done_files else np.zeros(0, dtype=np.int64)
        self._check_once(done, where)
        if not spilled:
            return
        n_rows = sum(n for _, n in spilled)
        n_buckets = max(1, -(-n_rows // self.bucket_rows))
        aside = np.concatenate([pq.read_table(f, columns=["unit"]).column(0).to_numpy(
            zero_copy_only=False) for f, _ in spilled])
        again = np.isin(aside, done) if done.size else np.zeros(aside.size, dtype=bool)
        if again.any():
            unit = aside[np.flatnonzero(again)[0]]
            self._refuse_twice(unit, done, where, spilled)
        del aside, again
        n_t = self.times.size
        for b in range(n_buckets):
            parts = [pq.read_table(f) for f, _ in spilled]
            table = _concat(parts)
            units = table.column("unit").to_numpy(zero_copy_only=False)
            keep = _bucket(units, n_buckets) == b
            units = units[keep]
            cols = {name: table.column(name).to_numpy()[keep]
                    for name in ("time", "cohort", "y", "file", "row")}
            del table, parts
            codes, uniq = _factorize(units)
            paths, count, unit_cohort = self._scatter(
                codes, uniq, cols["time"], cols["cohort"], cols["y"], (cols["file"], cols["row"]))
            holes = count < n_t
            if holes.any():
                u = int(np.flatnonzero(holes)[0])
                mine = codes == u
                missing = self.times[np.isnan(paths[u])]
                files = sorted({self._name(f) for f in cols["file"][mine]})
                raise PanelError(
                    f"The panel is unbalanced: {int(holes.sum())} units lack rows at some "
                    f"times, e.g. unit {python_scalar(uniq[u])!r} has no row at {self.time!r} "
                    f"= {listing(missing)} (its rows are in {listing(files)}). A dataset read "
                    "in bounded memory must be balanced; load a panel with holes in memory "
                    "(didmem.Panel(..., balance='keep')).")
            if uniq.size:
                yield PathBlock(uniq, unit_cohort, paths)

    def _check_once(self, done, where) -> None:
        """A unit complete in two chunks: its rows are duplicated across files or chunks."""
        if done.size < 2:
            return
        order = np.argsort(done, kind="stable")
        sorted_units = done[order]
        twice = np.flatnonzero(sorted_units[1:] == sorted_units[:-1])
        if twice.size:
            a, b = order[twice[0]], order[twice[0] + 1]
            raise PanelError(
                f"Duplicate (unit, time) rows: unit {python_scalar(done[a])!r} has a complete "
                f"path in file {self._name(where[a])!r} and again in file "
                f"{self._name(where[b])!r}" + (" (another part of it)" if where[a] == where[b]
                                               else "") + ".")

    def _refuse_twice(self, unit, done, where, spilled) -> None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        first = self._name(where[np.flatnonzero(done == unit)[0]])
        for f, _ in spilled:
            t = pq.read_table(f)
            hit = t.filter(pc.equal(t.column("unit"), unit))
            if hit.num_rows:
                rows = hit.column("row").to_numpy()[:5]
                other = self._name(int(hit.column("file")[0].as_py()))
                raise PanelError(
                    f"Duplicate (unit, time) rows: unit {python_scalar(unit)!r} has a complete "
                    f"path in file {first!r} and more rows in file {other!r} (rows "
                    f"{listing(rows)}).")


def _float(column) -> np.ndarray:
    """A numeric arrow column as float64 (nulls as NaN), always a fresh writable array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not pa.types.is_floating(column.type):
        column = pc.cast(column, pa.float64())
    return np.array(column.to_numpy(zero_copy_only=False), dtype=np.float64)


def _cohort(value) -> str:
    return "never-treated" if np.isinf(value) else repr(python_scalar(value))


def _factorize(units):
    import pandas as pd

    codes, uniq = pd.factorize(units, sort=False)
    return codes.astype(np.int64), np.asarray(uniq)


def _bucket(units, n_buckets: int) -> np.ndarray:
    import pandas as pd

    if n_buckets == 1:
        return np.zeros(len(units), dtype=np.int64)
    return (pd.util.hash_array(np.asarray(units)) % np.uint64(n_buckets)).astype(np.int64)


def _concat(tables):
    import pyarrow as pa

    return pa.concat_tables(tables)


def _write_spill(folder: str, index: int, pending) -> tuple[str, int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = ("unit", "time", "cohort", "y", "file", "row")
    cols = [np.concatenate([p[k] for p in pending]) for k in range(len(names))]
    path = os.path.join(folder, f"set-aside-{index:05d}.parquet")
    pq.write_table(pa.table(dict(zip(names, cols))), path)
    return path, int(cols[0].size)
