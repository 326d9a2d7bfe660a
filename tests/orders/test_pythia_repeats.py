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
