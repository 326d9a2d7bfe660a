"""The compiled passes over GPT-NeoX index maps against their plain-numpy oracles."""

import numpy as np
import pytest

from didmem.orders.neox import build_index_maps
from didmem.orders.neox_kernels import (gather_sizes, in_filter, lookup_filter, map_bounds,
                                        positions_of_samples, sample_rows_bounds,
                                        sample_starts_chunk, sample_starts_chunk_numpy,
                                        span_hits, span_hits_numpy)


def _maps(seed, seq_length=7, n_docs=30):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 4 * seq_length, n_docs).astype(np.int32)  # empty ones too
    doc_idx, rows, shuffle = build_index_maps(sizes, 40, seq_length, seed)
    return sizes, doc_idx, rows, shuffle, rng


def _random_spans(sizes, rng, n=50):
    out = []
    while len(out) < n:
        d = int(rng.integers(sizes.size))
        if sizes[d] < 2:
            continue
        start = int(rng.integers(0, sizes[d] - 1))
        out.append((d, start, int(rng.integers(start + 2, sizes[d] + 1))))
    return out


def _kernel_hits(sizes, doc_idx, rows, spans, chunk, capacity):
    documents = np.array([d for d, _, _ in spans], dtype=np.int64)
    units = np.argsort(documents, kind="stable").astype(np.int64)
    wanted, first = np.unique(documents[units], return_index=True)
    first = np.append(first, units.size).astype(np.int64)
    table, mask = lookup_filter(wanted, sizes.size)
    starts = np.array([s for _, s, _ in spans], dtype=np.int64)
    ends = np.array([e for _, _, e in spans], dtype=np.int64)
    out_u, out_s = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
    n, row, stream, lo, regrown = 0, 0, 0, 0, 0
    while lo < doc_idx.size:
        hi = min(lo + chunk, doc_idx.size)
        lengths = np.empty(hi - lo, np.int64)
        gather_sizes(doc_idx[lo:hi], sizes, lengths)
        np.testing.assert_array_equal(lengths, sizes[doc_idx[lo:hi]])
        done, r, st = span_hits(doc_idx[lo:hi], lo, lengths, rows, row, stream, table, mask,
                                wanted, first, units, starts, ends, out_u, out_s, n)
        if done < 0:
            assert (r, st) == (row, stream)  # the state as before the chunk
            out_u, out_s = np.resize(out_u, 2 * out_u.size), np.resize(out_s, 2 * out_s.size)
            regrown += 1
            continue
        n, row, stream, lo = done, r, st, hi
    order = np.lexsort((out_s[:n], out_u[:n]))
    return out_u[:n][order], out_s[:n][order], regrown


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("chunk, capacity", [(1000, 500), (3, 500), (5, 1)])
def test_span_hits_match_the_oracle(seed, chunk, capacity):
    sizes, doc_idx, rows, _, rng = _maps(seed)
    spans = _random_spans(sizes, rng)
    unit, sample, regrown = _kernel_hits(sizes, doc_idx, rows, spans, chunk, capacity)
    want_unit, want_sample = span_hits_numpy(doc_idx, sizes, rows, spans)
    order = np.lexsort((want_sample, want_unit))
    assert unit.size > 10  # many spans are trained whole somewhere
    np.testing.assert_array_equal(unit, want_unit[order])
    np.testing.assert_array_equal(sample, want_sample[order])
    assert (regrown > 0) == (capacity == 1)


@pytest.mark.parametrize("chunk", [1, 4, 1000])
def test_sample_starts_match_the_oracle_and_gpt_neox(chunk):
    sizes, doc_idx, rows, _, _ = _maps(3, seq_length=5)
    got, position, stream = [], 0, 0
    for i0 in range(0, rows.shape[0] - 1, chunk):
        block = rows[i0:i0 + chunk + 1]
        want = sample_starts_chunk_numpy(doc_idx, sizes, block, position, stream)
        out = np.empty(block.shape[0], np.int64)
        lengths = sizes[doc_idx[position:max(int(block[-1, 0]), position)]].astype(np.int64)
        position, stream = sample_starts_chunk(lengths, block, position, stream, out)
        np.testing.assert_array_equal(out, want)
        got.append(out[:-1])
    np.testing.assert_array_equal(np.concatenate(got), np.arange(rows.shape[0] - 1) * 5)


def test_positions_of_samples_inverts_the_shuffle():
    _, _, _, shuffle, rng = _maps(4)
    samples = np.unique(rng.choice(shuffle.size, 25))
    table, mask = lookup_filter(samples, shuffle.size)
    out = np.full(samples.size, -1, np.int64)
    for lo in range(0, shuffle.size, 6):
        positions_of_samples(shuffle[lo:lo + 6], lo, table, mask, samples, out)
    np.testing.assert_array_equal(shuffle[out], samples)


def test_bounds():
    rng = np.random.default_rng(5)
    for dtype in (np.int32, np.uint32, np.int64):
        values = rng.integers(0, 1000, 77).astype(dtype)
        assert map_bounds(values) == (values.min(), values.max())
    assert map_bounds(np.array([-3, 9, -8], np.int64)) == (-8, 9)
    rows = np.array([[2, 5], [2, 0], [4, 1], [3, 7], [6, -1]], dtype=np.int32)
    assert sample_rows_bounds(rows, 0) == (2, 6, -1, 3)
    assert sample_rows_bounds(rows[:3], 0) == (2, 4, 0, -1)
    assert sample_rows_bounds(rows[:3], 3) == (2, 4, 0, 0)  # back from the chunk before


def test_lookup_filter_keeps_every_value():
    rng = np.random.default_rng(6)
    values = np.concatenate([[0, 5, 1 << 30, 123_456_789], rng.integers(0, 1 << 31, 500)])
    table, mask = lookup_filter(values, 1 << 31)
    assert (mask + 1) & mask == 0 and 1 << 12 <= mask + 1 <= 1 << 26
    assert all(in_filter(table, mask, int(v)) for v in values)
    others = rng.integers(0, 1 << 31, 2000)
    shared = np.mean([in_filter(table, mask, int(v)) for v in others])
    assert shared < 0.05  # about 64 bits a value: few others pass
    small, small_mask = lookup_filter(np.array([3]), 8)
    assert small_mask + 1 <= 64 and in_filter(small, small_mask, 3)
