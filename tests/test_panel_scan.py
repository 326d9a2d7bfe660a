"""A parquet folder read as unit paths in bounded memory: the same moments and cells as the
panel in memory (1e-9), whatever the order of rows and files and however units are spread
over files, and bad input refused with the file and rows named, nothing left on disk."""

import os
import tempfile

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import didmem
from didmem.errors import PanelError
from didmem.inference.prepared import did_cells
from didmem.inference.moments.cells import MomentsInfluence, prepare_moments
from didmem.inference.moments.cohort import CohortMoments, dataset_moments
from didmem.panel.scan import ParquetPaths, reference_scatter, scatter_rows
from didmem.panel.scan_dense import read_dense, scatter_dense

COLUMNS = dict(unit="unit", time="time", cohort="cohort", outcome="y")


@pytest.fixture(scope="module")
def frame():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=20, n_never_treated=30,
                                           n_times=6, seed=4)
    return df


def _write(folder, df, n_files=8, *, spread=True, seed=0, row_group_size=64):
    """The rows shuffled into ``n_files`` files: each row anywhere (``spread``) or each
    unit's rows in one file."""
    rng = np.random.default_rng(seed)
    df = df.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    if spread:
        part = rng.integers(0, n_files, len(df))
    else:
        units = df["unit"].unique()
        part = df["unit"].map(dict(zip(units, rng.integers(0, n_files, units.size)))).to_numpy()
    os.makedirs(folder, exist_ok=True)
    for p in range(n_files):
        pq.write_table(pa.Table.from_pandas(df[part == p], preserve_index=False),
                       os.path.join(folder, f"part-{p:03d}.parquet"),
                       row_group_size=row_group_size)
    return folder


@pytest.fixture
def no_leftovers(tmp_path, monkeypatch):
    """Temporary files go to a folder of their own, checked empty after the test."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    yield
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("offence", [None, "duplicate", "cohort", "nan"])
def test_scatter_kernel_equals_the_oracle(offence):
    rng = np.random.default_rng(0)
    n_units, n_t = 30, 6
    codes = np.repeat(np.arange(n_units), n_t)
    tcodes = np.tile(np.arange(n_t), n_units)
    order = rng.permutation(codes.size)
    codes, tcodes = codes[order], tcodes[order]
    codes[rng.random(codes.size) < 0.1] = -1  # rows of another bucket
    cohort = np.where(codes % 3 == 0, np.inf, 2.0 + codes % 4)
    y = rng.normal(size=codes.size)
    live = np.flatnonzero(codes >= 0)
    i, j = live[20], live[150]
    if offence == "duplicate":  # row j repeats row i's (unit, time)
        codes[j], tcodes[j], cohort[j] = codes[i], tcodes[i], cohort[i]
    elif offence == "cohort":  # the last row of row i's unit says another cohort
        cohort[np.flatnonzero(codes == codes[i])[-1]] += 1.0
    elif offence == "nan":
        y[j] = np.nan
    paths, filled = np.zeros((n_units, n_t)), np.zeros((n_units, n_t), dtype=np.uint8)
    unit_cohort = np.full(n_units, np.nan)
    unit_file = np.full(n_units, -1, dtype=np.int64)
    got = scatter_rows(codes, tcodes, cohort, y, paths, filled, unit_cohort, unit_file,
                       np.full(n_units, -1, dtype=np.int64), 0, 0)
    ref_paths, ref_filled, ref_cohort, ref = reference_scatter(codes, tcodes, cohort, y,
                                                               n_units, n_t)
    assert tuple(got) == tuple(ref)
    assert (offence is None) == (max(got) < 0)
    np.testing.assert_array_equal(filled, ref_filled)
    np.testing.assert_array_equal(paths, ref_paths)
    np.testing.assert_array_equal(unit_cohort, ref_cohort)


@pytest.mark.parametrize("offence", [None, "duplicate", "cohort", "nan", "outside", "time"])
def test_one_pass_kernel_equals_the_oracle(offence):
    """:func:`scatter_dense` (time-major paths, identifiers ``lo`` + column, times found as
    they come) places the rows as the oracle does and stops at the same first offence."""
    from didmem.panel import scan_dense as dense

    rng = np.random.default_rng(1)
    n_units, n_t, lo = 30, 6, 1000
    codes = np.repeat(np.arange(n_units), n_t)
    tcodes = np.tile(np.arange(n_t), n_units)
    order = rng.permutation(codes.size)
    codes, tcodes = codes[order], tcodes[order]
    times = (10 * (tcodes + 1)).astype(np.int64)
    cohort = np.where(codes % 3 == 0, np.nan, 20.0 + 10 * (codes % 4))  # NaN: never-treated
    y = rng.normal(size=codes.size)
    i, j = 20, 150
    if offence == "duplicate":
        codes[j], tcodes[j], times[j], cohort[j] = codes[i], tcodes[i], times[i], cohort[i]
    elif offence == "cohort":
        cohort[np.flatnonzero(codes == codes[i])[-1]] += 1.0
    elif offence == "nan":
        y[j] = np.inf
    ids = codes + lo
    if offence == "outside":
        ids[j] = lo + n_units
    known = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    if offence == "time":
        known = known[:-1]  # time 60 not found yet: the caller is asked at its first row
    slots = rng.permutation(known.size)  # rows of the paths in any order
    paths, filled = np.zeros((n_t, n_units)), np.zeros((n_t, n_units), dtype=np.uint8)
    unit_cohort = np.full(n_units, np.nan)
    unit_file = np.full(n_units, -1, dtype=np.int64)
    status, row = scatter_dense(ids, times, cohort, y, lo, known, slots, np.nan, paths, filled,
                                unit_cohort, unit_file, np.full(n_units, -1, dtype=np.int64), 0,
                                0, 0)
    never_coded = np.where(np.isnan(cohort), np.inf, cohort)
    stop = {"outside": j, "time": int(np.flatnonzero(times == 60)[0])}.get(offence, codes.size)
    ref_paths, ref_filled, ref_cohort, ref = reference_scatter(codes[:stop], tcodes[:stop],
                                                               never_coded[:stop], y[:stop],
                                                               n_units, n_t)
    expect = {"outside": (dense.OUTSIDE, j), "time": (dense.NEW_TIME, stop)}.get(offence)
    if expect is None:
        dup, change, bad = ref
        expect = ((dense.DUPLICATE, dup) if dup >= 0 else (dense.CHANGE, change)
                  if change >= 0 else (dense.BAD_OUTCOME, bad) if bad >= 0
                  else (dense.DONE, codes.size))
    assert (status, row) == expect
    if offence is None or offence in ("outside", "time"):
        np.testing.assert_array_equal(filled[slots].T, ref_filled[:, :known.size])
        np.testing.assert_array_equal(np.where(filled[slots], paths[slots], 0.0).T,
                                      ref_paths[:, :known.size])
        np.testing.assert_array_equal(unit_cohort, ref_cohort)


@pytest.mark.parametrize("spread, memory_bytes", [(True, None), (True, 500), (False, None),
                                                  (False, 500)])
def test_folder_gives_the_panels_moments_and_cells(tmp_path, frame, spread, memory_bytes,
                                                   no_leftovers):
    """Units spread over all files (one component) or each in one file (a component per
    file); a budget of 500 bytes of paths (9 bytes per unit and time) cuts the 110 units
    into buckets of at most 9, each reading its component's files again."""
    folder = _write(tmp_path / "data", frame, spread=spread)
    data = ParquetPaths(folder, **COLUMNS, memory_bytes=memory_bytes, chunk_rows=100)
    assert len(data.files) == 8 and data.n_rows == len(frame)
    items = data.items()
    n_components = 1 if spread else 8
    if memory_bytes is None:
        assert len(items) == n_components
    else:
        assert all(item.units.size * 9 * 6 <= memory_bytes for item in items)
        assert len(items) >= -(-110 * 54 // memory_bytes)
    assert sum(item.units.size for item in items) == 110
    got = dataset_moments(data)
    panel = didmem.Panel(frame, **COLUMNS)
    ref = CohortMoments.from_paths(panel.times, panel.cohorts, panel.outcome_matrix("y"))
    np.testing.assert_array_equal(got.cohorts, ref.cohorts)
    np.testing.assert_array_equal(got.count, ref.count)
    for name in ("mean", "cross"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-10,
                                   atol=1e-10)
    res = didmem.DiDEstimator(n_bootstrap=0, small_sample=False).fit(panel)
    design = prepare_moments(got, need_never_treated=True, anticipation=0,
                             lower_is_better=False, owner="DiDEstimator")
    cells = did_cells(design, base_period="varying", not_yet=False, anticipation=0)
    inf = MomentsInfluence.build(design, cells)
    np.testing.assert_allclose(inf.att, res.to_frame()["estimate"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.sqrt(inf.variance()), res.analytic_std_errors, rtol=1e-9)


def _panel_moments(frame):
    panel = didmem.Panel(frame, **COLUMNS)
    return CohortMoments.from_paths(panel.times, panel.cohorts, panel.outcome_matrix("y"))


def _assert_moments_equal(got, ref):
    np.testing.assert_array_equal(got.times, ref.times)
    np.testing.assert_array_equal(got.cohorts, ref.cohorts)
    np.testing.assert_array_equal(got.count, ref.count)
    for name in ("weight", "mean", "lever", "cross"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-10,
                                   atol=1e-10, err_msg=name)


@pytest.mark.parametrize("layout", ["spread", "per-unit", "sparse-ids", "int32-ids",
                                    "float-times", "dictionary-ids", "one-row-group"])
def test_one_pass_equals_the_work_items_and_the_panel(tmp_path, frame, layout, no_leftovers):
    """Integer units whose range fits the budget are read in one pass (no index pass); its
    moments equal the work items' and the panel's (1e-10), whatever the layout: rows
    anywhere, each unit in one file, identifiers with gaps and negative ones (only the
    identifiers with rows are units), int32 identifiers, float times, dictionary-encoded
    identifiers, a file of one row group. A chunk of 100 rows makes many chunks."""
    df = frame.copy()
    if layout == "sparse-ids":
        df["unit"] = df["unit"] * 37 - 500
    elif layout == "int32-ids":
        df["unit"] = df["unit"].astype(np.int32)
    elif layout == "float-times":
        df["time"] = df["time"].astype(float) / 4
        df["cohort"] = df["cohort"] / 4
    elif layout == "dictionary-ids":
        df["unit"] = df["unit"].astype("category")
    folder = _write(tmp_path / "data", df, spread=layout != "per-unit",
                    row_group_size=10**6 if layout == "one-row-group" else 64)
    data = ParquetPaths(folder, **COLUMNS, chunk_rows=100)
    block = read_dense(data)
    assert block is not None and data._indexed is None  # one pass, no index read
    np.testing.assert_array_equal(block.units, np.unique(df["unit"].astype(np.int64)))
    ref = _panel_moments(df)
    _assert_moments_equal(dataset_moments(data), ref)
    _assert_moments_equal(dataset_moments(data, map_items=map), ref)


@pytest.mark.parametrize("threads", [1, 2])
def test_one_pass_moments_in_chunks_of_a_few_units(tmp_path, frame, threads):
    """Cohorts cut into chunks of 3 units, on one thread or two, add up to the panel's
    moments."""
    from didmem.inference.moments.cohort import dense_moments

    block = read_dense(ParquetPaths(_write(tmp_path / "data", frame), **COLUMNS))
    got = dense_moments(block, chunk_bytes=8 * block.times.size * 3, threads=threads)
    _assert_moments_equal(got, _panel_moments(frame))


def test_one_pass_gives_way_to_the_work_items(tmp_path, frame, no_leftovers):
    """Where one pass cannot hold the paths or see the units' range, it steps aside and the
    work items read the folder: string units, footers without statistics, a range wider than
    the budget, more times than the budget holds (found midway)."""
    folder = _write(tmp_path / "data", frame)
    n_t = frame["time"].nunique()
    ref = _panel_moments(frame)
    span = int(frame["unit"].max() - frame["unit"].min() + 1)
    three_times = span * (24 + 9 * 3)  # room for 3 of the 6 times
    for memory_bytes in (span * 20, three_times):
        data = ParquetPaths(folder, **COLUMNS, memory_bytes=memory_bytes)
        assert read_dense(data) is None
        _assert_moments_equal(dataset_moments(data), ref)
    data = ParquetPaths(folder, **COLUMNS, memory_bytes=span * (24 + 9 * n_t))
    assert read_dense(data) is not None  # just enough
    plain = tmp_path / "plain"
    plain.mkdir()
    frame.to_parquet(plain / "one.parquet", write_statistics=False)
    assert read_dense(ParquetPaths(plain, **COLUMNS)) is None
    _assert_moments_equal(dataset_moments(ParquetPaths(plain, **COLUMNS)), ref)
    strings = _write(tmp_path / "strings", frame.assign(unit="u" + frame["unit"].astype(str)))
    assert read_dense(ParquetPaths(strings, **COLUMNS)) is None


@pytest.mark.parametrize("column", ["unit", "time"])
def test_missing_units_or_times_are_named(tmp_path, frame, column, no_leftovers):
    folder = tmp_path / "data"
    folder.mkdir()
    df = frame.astype({column: "Int64" if column == "unit" else float})
    df.loc[17, column] = None
    df.to_parquet(folder / "one.parquet")
    _expect(folder, rf"Column '{column}' \({column}\) has .*missing values in file "
                    r".*one\.parquet.*row 17")


def test_never_treated_code_and_cohorts_snapped_to_the_grid(tmp_path, frame):
    df = frame.copy()
    df["cohort"] = df["cohort"].replace(np.inf, 0.0)
    df.loc[df["cohort"] == df["cohort"].max(), "cohort"] += 1e-12  # rounding noise
    folder = _write(tmp_path / "data", df)
    got = dataset_moments(ParquetPaths(folder, **COLUMNS, never_treated=0))
    panel = didmem.Panel(frame, **COLUMNS)
    np.testing.assert_array_equal(got.cohorts, np.unique(panel.cohorts))


# ---------------------------------------------------------------- bad input
def _expect(folder, match, **kwargs):
    """Both routes refuse the folder with the same message: the one pass (integer units
    whose range fits) and the work items (``map_items=map``)."""
    for map_items in (None, map):
        with pytest.raises(PanelError, match=match):
            dataset_moments(ParquetPaths(folder, **COLUMNS, **kwargs), map_items=map_items)


def test_a_file_with_another_schema_is_named(tmp_path, frame):
    folder = _write(tmp_path / "data", frame)
    bad = pd.read_parquet(folder / "part-003.parquet").rename(columns={"y": "loss"})
    bad.to_parquet(folder / "part-003.parquet")
    _expect(folder, r"part-003\.parquet.*another schema: missing outcome column 'y'")


def test_a_non_numeric_outcome_is_named(tmp_path, frame):
    folder = _write(tmp_path / "data", frame)
    bad = pd.read_parquet(folder / "part-005.parquet")
    bad["y"] = bad["y"].astype(str)
    bad.to_parquet(folder / "part-005.parquet")
    _expect(folder, r"Column 'y' \(outcome\) must be numeric; in file .*part-005\.parquet")


def test_units_of_another_type_are_named(tmp_path, frame):
    folder = _write(tmp_path / "data", frame)
    bad = pd.read_parquet(folder / "part-001.parquet")
    bad["unit"] = "u" + bad["unit"].astype(str)
    bad.to_parquet(folder / "part-001.parquet")
    _expect(folder, r"unit.*part-001\.parquet")


@pytest.mark.parametrize("spread", [True, False])
def test_a_unit_with_two_cohorts_in_two_files_is_named(tmp_path, frame, spread, no_leftovers):
    folder = _write(tmp_path / "data", frame, spread=spread, n_files=2)
    a = pd.read_parquet(folder / "part-000.parquet")
    b = pd.read_parquet(folder / "part-001.parquet")
    unit = frame["unit"].iloc[0]
    rows = frame[frame["unit"] == unit]
    moved = rows.iloc[:1].assign(cohort=99.0 if np.isinf(rows["cohort"].iloc[0]) else np.inf)
    pd.concat([a[a["unit"] != unit], rows.iloc[1:]]).to_parquet(folder / "part-000.parquet")
    pd.concat([b[b["unit"] != unit], moved]).to_parquet(folder / "part-001.parquet")
    _expect(folder, rf"cohort.*constant within a unit; unit {unit}.*part-00[01]\.parquet.*"
                    r"part-00[01]\.parquet")


@pytest.mark.parametrize("spread", [True, False])
def test_duplicated_rows_across_files_are_named(tmp_path, frame, spread, no_leftovers):
    folder = _write(tmp_path / "data", frame, spread=spread, n_files=3)
    a = pd.read_parquet(folder / "part-000.parquet")
    b = pd.read_parquet(folder / "part-002.parquet")
    unit = a["unit"].iloc[0]
    pd.concat([b, frame[frame["unit"] == unit]]).to_parquet(folder / "part-002.parquet")
    _expect(folder, r"Duplicate \(unit, time\) rows: .* at row \d+ of file "
                    r".*part-00[012]\.parquet.* and at row \d+ of file .*part-002\.parquet")


def test_duplicated_rows_within_a_file_name_both_rows(tmp_path, frame, no_leftovers):
    folder = tmp_path / "data"
    folder.mkdir()
    df = pd.concat([frame, frame.iloc[[7]]], ignore_index=True)
    df.to_parquet(folder / "one.parquet")
    _expect(folder, rf"Duplicate.*row 7 of file .*one\.parquet.*row {len(frame)} of file")


def test_holes_are_named_with_the_units_files(tmp_path, frame, no_leftovers):
    folder = _write(tmp_path / "data", frame.drop(index=[11]))
    unit = frame.loc[11, "unit"]
    _expect(folder, rf"unbalanced.*unit {unit} has no row at 'time' = {frame.loc[11, 'time']:g}")


def test_a_nan_outcome_is_named(tmp_path, frame, no_leftovers):
    folder = tmp_path / "data"
    folder.mkdir()
    df = frame.copy()
    df.loc[13, "y"] = np.nan
    df.to_parquet(folder / "one.parquet")
    _expect(folder, r"NaN or infinite value at row 13 of file .*one\.parquet")


@pytest.mark.parametrize("content", [b"unit,time\n1,2\n", None])
def test_a_truncated_or_foreign_file_is_named(tmp_path, frame, content):
    folder = _write(tmp_path / "data", frame)
    target = folder / "part-004.parquet"
    if content is None:  # cut short
        data = target.read_bytes()
        target.write_bytes(data[: len(data) // 2])
    else:
        (folder / "notes.csv").write_bytes(content)
    name = "part-004.parquet" if content is None else "notes.csv"
    _expect(folder, rf"{name}.*not a readable parquet file")


def test_hidden_and_marker_files_are_not_data(tmp_path, frame):
    folder = _write(tmp_path / "data", frame)
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / ".part-000.parquet.crc").write_bytes(b"xx")
    assert len(ParquetPaths(folder, **COLUMNS).files) == 8


def test_a_missing_path_is_named(tmp_path):
    with pytest.raises(didmem.errors.MissingFileError, match="nowhere"):
        ParquetPaths(tmp_path / "nowhere", **COLUMNS)


def test_string_units_spread_over_files(tmp_path, frame, no_leftovers):
    df = frame.assign(unit="instance-" + frame["unit"].astype(str))
    folder = _write(tmp_path / "data", df, n_files=5)
    data = ParquetPaths(folder, **COLUMNS, memory_bytes=1000)
    assert data.units.size == frame["unit"].nunique() and len(data.items()) > 1
    got = dataset_moments(data)
    panel = didmem.Panel(frame, **COLUMNS)
    ref = CohortMoments.from_paths(panel.times, panel.cohorts, panel.outcome_matrix("y"))
    np.testing.assert_array_equal(got.count, ref.count)
    np.testing.assert_allclose(got.cross, ref.cross, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("ids", [
    np.arange(50)[::-1].repeat(3),                      # dense 0..N ids: the boolean table
    np.array([-7, 3, -7, 12, 3]),                       # negative, dense enough
    np.array([0, 10**15, 5, 10**15]),                   # a range far wider than the rows: hash
    np.array([], dtype=np.int64),
])
def test_distinct_units_equal_numpy_unique(ids):
    """The index pass's distinct units (a boolean table for dense integer ids) are
    np.unique's, for dense, negative, sparse and dictionary-encoded identifiers."""
    import pyarrow as pa

    from didmem.panel.scan import _distinct_values

    expect = np.unique(ids.astype(np.int64))
    for column in (pa.chunked_array([pa.array(ids, type=pa.int64())]),
                   pa.chunked_array([pa.array(ids, type=pa.int64()).dictionary_encode()])):
        got = _distinct_values(column)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(np.sort(got), expect)  # the hash path keeps row order


# ------------------------------------------------------------------ issue 50: ids across files
def _moments_equal_the_panels(folder, frame):
    got = dataset_moments(ParquetPaths(folder, **COLUMNS, memory_bytes=1000))
    panel = didmem.Panel(frame, **COLUMNS)
    ref = CohortMoments.from_paths(panel.times, panel.cohorts, panel.outcome_matrix("y"))
    np.testing.assert_array_equal(got.count, ref.count)
    np.testing.assert_allclose(got.cross, ref.cross, rtol=1e-10, atol=1e-10)


def test_float_and_integer_ids_of_the_same_units_are_one_unit(tmp_path, frame, no_leftovers):
    """Before: ids 3.0 in one file and 3 in another were two units; the same rows written
    twice were counted twice (smaller standard errors) instead of refused as duplicates,
    and a unit's times split across the two files were refused as "unbalanced"."""
    early, late = frame[frame["time"] <= 2], frame[frame["time"] > 2]
    folder = tmp_path / "by_time"
    folder.mkdir()
    early.to_parquet(folder / "a.parquet", index=False)
    late.assign(unit=late["unit"].astype(float)).to_parquet(folder / "b.parquet", index=False)
    data = ParquetPaths(folder, **COLUMNS)
    assert data.units.dtype == np.int64 and data.units.size == frame["unit"].nunique()
    _moments_equal_the_panels(folder, frame)
    twice = tmp_path / "twice"
    twice.mkdir()
    frame.to_parquet(twice / "a.parquet", index=False)
    frame.assign(unit=frame["unit"].astype(float)).to_parquet(twice / "b.parquet", index=False)
    _expect(twice, r"Duplicate \(unit, time\) rows.*a\.parquet.*b\.parquet")
    # floats alone stay floats: 2.5 is a unit of its own
    floats = tmp_path / "floats"
    floats.mkdir()
    shifted = frame.assign(unit=frame["unit"] + 0.5)
    shifted[shifted["time"] <= 2].to_parquet(floats / "a.parquet", index=False)
    shifted[shifted["time"] > 2].to_parquet(floats / "b.parquet", index=False)
    assert ParquetPaths(floats, **COLUMNS).units.dtype == np.float64
    _moments_equal_the_panels(floats, shifted)


def test_fractional_ids_beside_integer_ids_are_named(tmp_path, frame, no_leftovers):
    folder = tmp_path / "data"
    folder.mkdir()
    frame[frame["time"] <= 2].to_parquet(folder / "a.parquet", index=False)
    late = frame[frame["time"] > 2].reset_index(drop=True)
    late = late.assign(unit=late["unit"].astype(float))
    late.loc[7, "unit"] += 0.25
    late.to_parquet(folder / "b.parquet", index=False)
    _expect(folder, rf"Column 'unit' \(unit\) holds {float(late.loc[7, 'unit'])!r} at row 7 of file "
                    r".*b\.parquet', not a whole number, while file .*a\.parquet' holds integer")


def test_dictionary_encoded_string_ids_are_read_as_their_strings(tmp_path, frame, no_leftovers):
    """Before: a folder whose string ids were dictionary-encoded in one file and plain in
    another was refused ("one unit type for the whole dataset")."""
    df = frame.assign(unit="instance-" + frame["unit"].astype(str))
    folder = tmp_path / "data"
    folder.mkdir()
    for name, part, encode in (("a", df[df["time"] <= 2], True),
                               ("b", df[df["time"] > 2], False)):
        table = pa.Table.from_pandas(part, preserve_index=False)
        if encode:
            index = table.schema.get_field_index("unit")
            table = table.set_column(index, "unit", table.column("unit").dictionary_encode())
        pq.write_table(table, folder / f"{name}.parquet")
    assert pa.types.is_dictionary(pq.read_schema(folder / "a.parquet").field("unit").type)
    data = ParquetPaths(folder, **COLUMNS)
    assert data.units.size == frame["unit"].nunique()
    _moments_equal_the_panels(folder, frame)
