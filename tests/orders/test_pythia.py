"""Pythia data: the mmap reader, the step mapping, the sampler and validation packing."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from didmem import cohort_from_sequence_index
from didmem.orders.indexed import MMapIndexedDataset, write_indexed_dataset
from didmem.orders.pythia import (
    DEDUPED_FIRST_EPOCH_END,
    PYTHIA_REVISIONS,
    PYTHIA_STEPS,
    PythiaSample,
    first_epoch_checkpoints,
    pack_sequences,
    pythia_model_name,
    sample_paper_design,
    training_step,
    treatment_checkpoint,
)
from didmem.errors import ParameterError


def _hand_written(tmp_path):
    """An index written byte by byte from the format's description, not by our writer."""
    seqs = [np.array([5, 6, 7]), np.array([65535, 0]), np.array([], dtype=int), np.array([9])]
    data = b"".join(s.astype("<u2").tobytes() for s in seqs)
    sizes = np.array([s.size for s in seqs], dtype="<i4")
    pointers = np.concatenate([[0], np.cumsum(sizes[:-1]) * 2]).astype("<i8")
    doc_idx = np.array([0, 2, 4], dtype="<i8")
    header = b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 8)
    header += struct.pack("<Q", len(seqs)) + struct.pack("<Q", doc_idx.size)
    (tmp_path / "d.idx").write_bytes(
        header + sizes.tobytes() + pointers.tobytes() + doc_idx.tobytes()
    )
    (tmp_path / "d.bin").write_bytes(data)
    return seqs


def test_reader_on_a_hand_written_file(tmp_path):
    seqs = _hand_written(tmp_path)
    ds = MMapIndexedDataset(tmp_path / "d.idx")
    assert len(ds) == 4 and ds.dtype == np.uint16
    assert ds.doc_idx.tolist() == [0, 2, 4]
    for i, s in enumerate(seqs):
        np.testing.assert_array_equal(ds[i], s)
        np.testing.assert_array_equal(ds[np.int64(i)], s)  # numpy integers work
        np.testing.assert_array_equal(ds[np.uint32(i)], s)
    assert ds[1].dtype == np.int64 and ds[1].tolist() == [65535, 0]
    assert [a.tolist() for a in ds[np.array([3, 0])]] == [[9], [5, 6, 7]]
    assert [a.tolist() for a in ds[1:3]] == [[65535, 0], []]
    with pytest.raises(IndexError, match="Sequence 4 is out of range"):
        ds[4]


def test_writer_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 50_000, size=n) for n in (2049, 2049, 17)]
    ds = write_indexed_dataset(tmp_path / "w", seqs)
    assert ds.pointers.tolist() == [0, 2049 * 2, 2 * 2049 * 2]
    for got, want in zip(ds[:], seqs):
        np.testing.assert_array_equal(got, want)
    ds32 = write_indexed_dataset(tmp_path / "w32", [[1, 2**20]], dtype=np.int32)
    assert ds32[0].tolist() == [1, 2**20]
    with pytest.raises(ParameterError, match="do not fit in uint16"):
        write_indexed_dataset(tmp_path / "x", [[70_000]])


def test_reader_errors(tmp_path):
    _hand_written(tmp_path)
    raw = (tmp_path / "d.idx").read_bytes()
    (tmp_path / "bad.bin").write_bytes(b"")
    (tmp_path / "bad.idx").write_bytes(b"NOTANIDX\x00" + raw[9:])
    with pytest.raises(ParameterError, match="is not an MMapIndexedDataset index"):
        MMapIndexedDataset(tmp_path / "bad")
    (tmp_path / "bad.idx").write_bytes(raw[:9] + struct.pack("<Q", 1) + b"\x06" + raw[18:])
    with pytest.raises(ParameterError, match="dtype code 6; token ids need an integer code"):
        MMapIndexedDataset(tmp_path / "bad")
    (tmp_path / "bad.idx").write_bytes(raw[:40])
    with pytest.raises(ParameterError, match="is truncated"):
        MMapIndexedDataset(tmp_path / "bad")
    (tmp_path / "bad.idx").write_bytes(raw)
    with pytest.raises(
        ParameterError,
        match="bad.bin' is truncated: sequence 3 ends at byte 12, the file has 0 bytes",
    ):
        MMapIndexedDataset(tmp_path / "bad")
    with pytest.raises(ParameterError, match="does not exist"):
        MMapIndexedDataset(tmp_path / "nothing")


def test_revisions_and_names():
    assert PYTHIA_STEPS[:12] == (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)
    assert len(PYTHIA_STEPS) == 154 and PYTHIA_STEPS[-1] == 143_000
    assert PYTHIA_REVISIONS[0] == "step0" and PYTHIA_REVISIONS[-1] == "step143000"
    assert pythia_model_name("1.4b") == "EleutherAI/pythia-1.4b-deduped"
    assert pythia_model_name("160m", deduped=False) == "EleutherAI/pythia-160m"
    with pytest.raises(ParameterError, match="Unknown Pythia size '1.3b'"):
        pythia_model_name("1.3b")
    first = first_epoch_checkpoints()
    assert first[-1] == DEDUPED_FIRST_EPOCH_END == 95_000 and 96_000 not in first


def test_step_mapping():
    # batch b = seq_idx // 1024 is trained at step b + 1; stepN has seen batches 0 .. N-1
    seq = np.array([0, 1023, 1024, 1_023_999, 1_024_000])
    assert training_step(seq).tolist() == [1, 1, 2, 1000, 1001]
    grid = list(range(0, 3001, 1000))
    np.testing.assert_array_equal(treatment_checkpoint(seq, grid), [1000, 1000, 1000, 1000, 2000])
    # on the 1000-step grid it agrees with the panel's helper, validation included
    many = np.r_[np.arange(0, 3_072_000, 997), -1, -5]
    np.testing.assert_array_equal(
        treatment_checkpoint(many, grid), cohort_from_sequence_index(many)
    )
    # on Pythia's own grid the log-spaced early checkpoints become cohorts
    assert treatment_checkpoint([0, 1024 * 3, 1024 * 600], PYTHIA_STEPS).tolist() == [1, 4, 1000]
    with pytest.raises(ParameterError, match="trained after the last checkpoint 3000"):
        treatment_checkpoint([3_072_000], grid)


def test_a_uint64_seq_idx_beyond_int64_is_named_with_its_value():
    """2**64 - 1 was cast to -1 and refused as a validation sequence."""
    seq = np.array([5, np.iinfo(np.uint64).max], dtype=np.uint64)
    for call in (training_step, treatment_checkpoint):
        with pytest.raises(ParameterError, match="holds 18446744073709551615 at position 1"):
            call(seq)
    assert training_step(np.array([0, 1024], dtype=np.uint64)).tolist() == [1, 2]


def test_sampler_is_seeded_and_follows_the_design(tmp_path):
    pytest.importorskip("pyarrow")
    sample = sample_paper_design(7, cohorts=[1000, 5000, 95000], validation_pool=50_000)
    frame = sample.frame
    train = frame[frame["split"] == "train"]
    assert len(train) == 300 and (frame["split"] == "validation").sum() == 2000
    assert train["seq_idx"].is_unique and frame["seq_idx"].is_unique
    np.testing.assert_array_equal(train["cohort"], cohort_from_sequence_index(train["seq_idx"]))
    for g, part in train.groupby("cohort"):
        assert part["batch"].nunique() == 10 and part.groupby("batch").size().eq(10).all()
        assert part["batch"].between(g - 1000, g - 1).all()
    np.testing.assert_array_equal(train["batch"], train["seq_idx"] // 1024)
    validation = frame[frame["split"] == "validation"]
    assert validation["seq_idx"].lt(0).all() and np.isinf(validation["cohort"]).all()
    assert validation["seq_idx"].ge(-50_000).all()

    again = sample_paper_design(7, cohorts=[1000, 5000, 95000], validation_pool=50_000)
    assert again.frame.equals(frame)
    other = sample_paper_design(8, cohorts=[1000, 5000, 95000], validation_pool=50_000)
    assert not other.frame["seq_idx"].equals(frame["seq_idx"])
    # a cohort's draw does not depend on which other cohorts are drawn
    alone = sample_paper_design(7, cohorts=[5000], n_validation=0).frame
    np.testing.assert_array_equal(alone["seq_idx"], train[train["cohort"] == 5000]["seq_idx"])

    sample.save(tmp_path / "sample.parquet")
    loaded = PythiaSample.load(tmp_path / "sample.parquet")
    assert loaded.design["seed"] == 7 and loaded.design["cohorts"] == [1000, 5000, 95000]
    assert loaded.frame.equals(frame)
    default = sample_paper_design(0, n_validation=0)
    assert default.frame["cohort"].max() == 95_000 and len(default.frame) == 95 * 100


def test_sampler_errors():
    with pytest.raises(ParameterError, match="needs validation_pool >= 2000"):
        sample_paper_design(0, cohorts=[1000])
    with pytest.raises(ParameterError, match="positive multiples of 1000"):
        sample_paper_design(0, cohorts=[1500], n_validation=0)
    with pytest.raises(ParameterError, match="seed must be a non-negative integer"):
        sample_paper_design(-1)


def test_packing_has_no_separator_and_drops_the_tail():
    docs = [np.arange(5), np.arange(100, 103), np.arange(200, 210)]
    packed = pack_sequences(docs, length=4)
    flat = np.concatenate(docs)
    assert packed.shape == (4, 4)
    np.testing.assert_array_equal(packed.ravel(), flat[:16])
    assert pack_sequences(iter([np.arange(3)]), length=4).shape == (0, 4)
    big = pack_sequences(np.arange(1000) for _ in range(10))
    assert big.shape == (4, 2049) and big[1, 0] == 2049 % 1000
