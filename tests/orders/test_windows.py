"""The windowed search finds a sampled instance's content re-packed at another offset."""

from __future__ import annotations

import numpy as np
import pytest

from didmem.orders.indexed import write_indexed_dataset
from didmem.orders.pythia import pack_sequences
from didmem.orders.pythia_repeats import find_repeats
from didmem.orders.windows import (_windows_numpy, find_windows, window_exposures,
                                     window_hashes)
from didmem.errors import ParameterError

LENGTH, WINDOW = 120, 10


@pytest.fixture(autouse=True)
def _wrapping_hashes():
    """The hashes wrap modulo 2^64 by design; without JIT (NUMBA_DISABLE_JIT=1, for
    coverage) numpy would warn at each wrap."""
    with np.errstate(over="ignore"):
        yield


def test_rolling_hash_matches_numpy():
    seq = np.random.default_rng(0).integers(0, 50_000, 300)
    for k in (1, 7, 50):
        np.testing.assert_array_equal(window_hashes(seq, k), _windows_numpy(seq, k))
    assert window_hashes(seq[:5], 6).size == 0


@pytest.fixture
def repacked(tmp_path):
    """Documents packed into rows of 120 tokens (GPT-NeoX style), then packed again in
    another order, as a second epoch re-packs them: a document's copy sits at another offset
    of another row, or is split across two rows."""
    rng = np.random.default_rng(7)
    docs = [rng.integers(0, 50_000, int(n)) for n in rng.integers(30, 200, 60)]
    first = pack_sequences(docs, LENGTH)
    second = pack_sequences([docs[i] for i in rng.permutation(len(docs))], LENGTH)
    rows = np.concatenate([first, second])
    data = write_indexed_dataset(tmp_path / "document", list(rows), dtype=np.uint16)
    return data, rows, docs, len(first)


def _where(doc, rows, lo):
    """Rows from ``lo`` on that hold a run of at least WINDOW tokens of ``doc``, by brute force."""
    out = {}
    for r in range(lo, len(rows)):
        for a in range(LENGTH - WINDOW + 1):
            for b in range(doc.size - WINDOW + 1):
                if np.array_equal(rows[r][a:a + WINDOW], doc[b:b + WINDOW]):
                    out[r] = out.get(r, 0)
    return set(out)


def test_finds_repacked_copies_that_row_hashing_misses(repacked):
    data, rows, docs, n_first = repacked
    sampled = [3, 10, 25]
    tokens = [rows[i] for i in sampled]
    whole = find_repeats(data, sampled, tokens, batch_size=4)
    assert sorted(whole["position"]) == sampled  # only the rows themselves: nothing re-packed
    runs = find_windows(data, sampled, tokens, batch_size=4, window=WINDOW, stride=1)
    for unit in sampled:
        mine = runs[runs["unit"] == unit]
        own = mine[mine["position"] == unit]
        assert own[["offset", "instance_offset", "tokens"]].values.tolist() == [[0, 0, LENGTH]]
        # every second-pass row holding >= WINDOW tokens of the row, found by brute force
        brute = _where(rows[unit], rows, n_first)
        assert set(mine.loc[mine["position"] >= n_first, "position"]) == brute
        assert brute  # the content is there again, re-packed
        for r in mine.itertuples():  # each run is real and maximal
            a, b, n = r.offset, r.instance_offset, r.tokens
            np.testing.assert_array_equal(rows[r.position][a:a + n], rows[unit][b:b + n])
            assert a == 0 or b == 0 or rows[r.position][a - 1] != rows[unit][b - 1]
            assert (a + n == LENGTH or b + n == LENGTH
                    or rows[r.position][a + n] != rows[unit][b + n])
        np.testing.assert_array_equal(mine["step"], mine["position"] // 4 + 1)
    # the second pass holds the row's content again, split over the re-packed rows; only
    # the pieces of documents cut by the row's two edges can be shorter than a window
    held = runs[runs["position"] >= n_first].groupby("unit")["tokens"].sum()
    assert ((held >= LENGTH - 2 * (WINDOW - 1)) & (held <= LENGTH)).all(), held


def test_stride_finds_every_run_of_window_plus_stride(repacked):
    data, rows, docs, n_first = repacked
    exact = find_windows(data, [10], [rows[10]], batch_size=4, window=WINDOW, stride=1)
    fast = find_windows(data, [10], [rows[10]], batch_size=4, window=WINDOW, stride=WINDOW)
    long_runs = exact[exact["tokens"] >= 2 * WINDOW - 1]
    merged = long_runs.merge(fast, on=list(exact.columns), how="left", indicator=True)
    assert (merged["_merge"] == "both").all()
    assert set(map(tuple, fast.values.tolist())) <= set(map(tuple, exact.values.tolist()))


def test_exposures_and_range(repacked):
    data, rows, docs, n_first = repacked
    runs = find_windows(data, [10], [rows[10]], batch_size=4, window=WINDOW, stride=1)
    exp = window_exposures(runs, min_tokens=LENGTH // 4)
    held = runs.groupby("position")["tokens"].sum()
    assert exp["position"].tolist() == sorted(held[held >= LENGTH // 4].index)
    part = find_windows(data, [10], [rows[10]], batch_size=4, window=WINDOW, stride=1,
                        start=n_first)
    assert part["position"].min() >= n_first
    with pytest.raises(ParameterError, match="search range 0 .. 999 is not within"):
        find_windows(data, [10], [rows[10]], batch_size=4, stop=999)
    with pytest.raises(ParameterError, match="window must be a positive integer; got 0"):
        find_windows(data, [10], [rows[10]], batch_size=4, window=0)
    empty = find_windows(data, [10], [np.arange(5)], batch_size=4, window=WINDOW)
    assert empty.empty and list(empty.columns) == ["unit", "position", "step", "offset",
                                                   "instance_offset", "tokens"]
