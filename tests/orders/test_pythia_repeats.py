"""Later exposures in Pythia's order: the hash search, the offset route and its check."""

from __future__ import annotations

import numpy as np
import pytest

from didmem.orders.indexed import write_indexed_dataset
from didmem.orders.pythia_repeats import (_row_hashes_numpy, find_repeats, offset_repeats,
                                            row_hashes)
from didmem.errors import ParameterError


@pytest.fixture
def order(tmp_path):
    """40 rows of 9 tokens, batch 4; rows 3 and 21 repeat row 30 is a copy of row 5."""
    rng = np.random.default_rng(1)
    rows = [rng.integers(0, 50_000, 9) for _ in range(40)]
    rows[21] = rows[3].copy()
    rows[33] = rows[3].copy()
    rows[30] = rows[5].copy()
    rows[12] = rows[5][:8].copy()  # a prefix, not a repeat
    return write_indexed_dataset(tmp_path / "document", rows), rows


def test_hash_kernel_matches_numpy(order):
    data, rows = order
    got = row_hashes(data)
    raw = np.asarray(data._bin)
    want = _row_hashes_numpy(raw, data.pointers.astype(np.int64),
                             data.sizes.astype(np.int64) * 2)
    np.testing.assert_array_equal(got, want)
    assert len(set(got.tolist())) == 37  # 40 rows, three of them copies


def _reordered(data, tmp_path, order, pointer_change=None):
    """The same .bin with its rows listed in another order (the .idx rewritten): the
    format does not ask that pointers rise."""
    from didmem.orders.indexed import _HEADER, _MAGIC, MMapIndexedDataset

    sizes = np.asarray(data.sizes)[order]
    pointers = np.asarray(data.pointers)[order].copy()
    if pointer_change is not None:
        pointers[pointer_change[0]] = pointer_change[1]
    prefix = tmp_path / "reordered"
    (tmp_path / "reordered.bin").write_bytes(np.asarray(data._bin).tobytes())
    with open(prefix.with_suffix(".idx"), "wb") as stream:
        stream.write(_MAGIC)
        stream.write(_HEADER.pack(1, 8, sizes.size, sizes.size + 1))
        stream.write(sizes.astype(np.int32).tobytes())
        stream.write(pointers.astype(np.int64).tobytes())
        stream.write(np.arange(sizes.size + 1, dtype=np.int64).tobytes())
    return MMapIndexedDataset(prefix)


def test_rows_stored_out_of_order_hash_as_their_tokens(order, tmp_path):
    """The kernels took the chunk's first pointer as its start: a later row stored before
    it got a negative start, which the compiled loop read from the buffer's far end
    (a wrong hash, so a repeat missed), issue 50."""
    data, rows = order
    swap = np.r_[[7, 0], np.arange(1, 7), np.arange(8, 40)]
    moved = _reordered(data, tmp_path, swap)
    np.testing.assert_array_equal(row_hashes(moved), row_hashes(data)[swap])
    found = find_repeats(moved, [5], [rows[5]], batch_size=4)
    assert sorted(swap[found["position"]].tolist()) == [5, 30]
    from didmem.orders.windows import find_windows

    runs = find_windows(moved, [5], [rows[5]], batch_size=4, window=5, stride=1)
    whole = runs[runs["tokens"] == 9]
    assert sorted(swap[whole["position"]].tolist()) == [5, 30]
    with pytest.raises(ParameterError, match="the search range -3 .. 40 is not within"):
        row_hashes(data, start=-3)


def test_a_negative_pointer_is_refused_at_opening(order, tmp_path):
    data, _ = order
    with pytest.raises(ParameterError, match="sequence 4 has a negative pointer, -18"):
        _reordered(data, tmp_path, np.arange(40), pointer_change=(4, -18))


def test_find_repeats(order):
    data, rows = order
    found = find_repeats(data, [3, 5, 7], [rows[3], rows[5], rows[7]], batch_size=4)
    by_unit = found.groupby("unit")["position"].apply(list).to_dict()
    assert by_unit == {3: [3, 21, 33], 5: [5, 30], 7: [7]}
    np.testing.assert_array_equal(found["step"], found["position"] // 4 + 1)
    part = find_repeats(data, [3], [rows[3]], batch_size=4, start=10, stop=30)
    assert part["position"].tolist() == [21]  # the search covers only its range
    with pytest.raises(ParameterError, match="search range 0 .. 41 is not within the 40"):
        find_repeats(data, [3], [rows[3]], batch_size=4, stop=41)


def test_offset_route_is_checked(tmp_path):
    rng = np.random.default_rng(2)
    first = [rng.integers(0, 1000, 5) for _ in range(10)]
    replay = write_indexed_dataset(tmp_path / "replay", first + first[:6])
    out = offset_repeats(replay, [2, 8, 13], epoch_sequences=10, batch_size=2)
    assert out.groupby("unit")["position"].apply(list).to_dict() == {
        2: [2, 12], 8: [8], 13: [3, 13]}
    reshuffled = write_indexed_dataset(tmp_path / "reshuffled", first + first[:6][::-1])
    with pytest.raises(ParameterError, match=r"2 of 2 sampled rows differ from the row "
                                             r"epoch_sequences = 10 later .*use second_epoch = 'search'"):
        offset_repeats(reshuffled, [1, 4], epoch_sequences=10, batch_size=2)
