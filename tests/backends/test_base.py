"""The shared machinery: instances, work items, atomic resumable parts, CallableBackend."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from didmem.backends import CallableBackend, InstanceError, Instances, OutcomeBackend, WorkItem
from didmem.errors import ParameterError


def length_metrics(checkpoint, batch):
    lengths = batch.lengths.astype(float)
    return {
        "score": checkpoint / 1000 + lengths,
        "first": np.array([t[0] for t in batch.token_ids], dtype=float),
        "long": lengths > 4,
    }


class Crash(RuntimeError):
    pass


def crashing(after: int):
    """length_metrics that raises on its ``after``-th call, as a killed job would stop."""
    calls = {"n": 0}

    def fn(checkpoint, batch):
        calls["n"] += 1
        if calls["n"] == after:
            raise Crash(f"killed at call {after}")
        return length_metrics(checkpoint, batch)

    return fn


SEQS = [np.arange(n) + 3 for n in (3, 5, 2, 7, 4, 6, 1)]
UNITS = ["u3", "u1", "u7", "u0", "u4", "u2", "u9"]


def test_instances_accept_2d_arrays_and_lists():
    inst = Instances(np.arange(12).reshape(3, 4))
    assert inst.units.tolist() == [0, 1, 2] and inst.lengths.tolist() == [4, 4, 4]
    inst = Instances([[1, 2], np.array([3])], unit_ids=np.array([10, 20], dtype=np.int32))
    assert inst.units.dtype == np.int64 and inst.lengths.tolist() == [2, 1]
    with pytest.raises(InstanceError, match="token ids must be integers"):
        Instances([np.array([1.5, 2.0])])
    with pytest.raises(InstanceError, match="Sequence 1 of token_ids is not 1-D"):
        Instances([[1, 2], [[3]]])
    assert Instances(SEQS, UNITS).fingerprint() != Instances(SEQS[::-1], UNITS).fingerprint()


def test_callable_backend_frame():
    backend = CallableBackend(length_metrics, [2000, 0], metrics=["score", "long"], batch_size=3)
    frame = backend.score(SEQS, unit_ids=UNITS, progress=False)
    assert list(frame.columns) == ["unit", "time", "score", "long"]
    assert frame["unit"].tolist() == UNITS * 2
    assert frame["time"].tolist() == [0] * 7 + [2000] * 7
    assert frame["time"].dtype == np.int64 and frame["long"].dtype == bool
    lengths = np.array([len(s) for s in SEQS], dtype=float)
    np.testing.assert_array_equal(frame["score"], np.r_[lengths, lengths + 2])
    only = backend.score(SEQS, metrics="first", checkpoints=[2000], progress=False)
    assert only["unit"].tolist() == list(range(7)) and only["first"].eq(3).all()


def test_callable_backend_bad_returns():
    with pytest.raises(ParameterError, match=r"returned no metric 'score' at checkpoint 0"):
        CallableBackend(lambda c, b: {"x": [1] * len(b)}, [0]).score(SEQS, metrics=["score"])
    with pytest.raises(ParameterError, match=r"shape \(1,\) for a batch of 7 instances"):
        CallableBackend(lambda c, b: {"score": [1]}, [0]).score(SEQS, metrics=["score"])
    with pytest.raises(ParameterError, match="needs at least one metric"):
        CallableBackend(length_metrics, [0]).score(SEQS)
    with pytest.raises(ParameterError, match="must be distinct"):
        CallableBackend(length_metrics, [0, 0.0])


def test_work_items_cover_every_instance_once():
    backend = CallableBackend(length_metrics, [0, 1000])
    items = backend.work_items(7, (0, 1000), 3)
    assert [(it.checkpoint, it.start, it.stop) for it in items] == [
        (0, 0, 3),
        (0, 3, 6),
        (0, 6, 7),
        (1000, 0, 3),
        (1000, 3, 6),
        (1000, 6, 7),
    ]
    assert items[2].part_name == "part-t0-s000002.parquet"
    assert WorkItem(0.5, 1, 0, 1).part_name == "part-t0.5-s000001.parquet"
    with pytest.raises(ParameterError, match="shard_size must be a positive integer"):
        backend.work_items(7, (0,), 0)


@pytest.mark.parametrize("crash_at", [2, 5, 8])
def test_resume_after_crash_gives_identical_frame(tmp_path, crash_at):
    pytest.importorskip("pyarrow")
    kwargs = dict(unit_ids=UNITS, metrics=["score", "first", "long"], shard_size=3, progress=False)
    times = [0, 1000, 3000]
    clean = CallableBackend(length_metrics, times, batch_size=2, name="lengths").score(
        SEQS, out_dir=tmp_path / "clean", **kwargs
    )
    in_memory = CallableBackend(length_metrics, times, batch_size=2).score(
        SEQS, **{k: v for k, v in kwargs.items() if k != "shard_size"}
    )
    pd.testing.assert_frame_equal(clean, in_memory)

    out = tmp_path / "resumed"
    with pytest.raises(Crash):
        CallableBackend(crashing(crash_at), times, batch_size=2, name="lengths").score(
            SEQS, out_dir=out, **kwargs
        )
    # batches per shard (sizes 3, 3, 1 with batch_size 2): 2, 2, 1; a part is written once
    # every batch of its shard has run, so the parts before the crashing call exist
    per_shard = [2, 2, 1] * 3
    last_call = np.cumsum(per_shard)
    done = sorted(p.name for p in out.glob("part-*.parquet"))
    assert len(done) == int((last_call < crash_at).sum())
    assert not list(out.glob(".*tmp"))  # no half-written part is left behind

    calls = []

    def counting(checkpoint, batch):
        calls.append((checkpoint, batch.units.tolist()))
        return length_metrics(checkpoint, batch)

    resumed = CallableBackend(counting, times, batch_size=2, name="lengths").score(
        SEQS, out_dir=out, **kwargs
    )
    pd.testing.assert_frame_equal(resumed, clean)
    assert len(calls) == sum(per_shard) - sum(per_shard[: len(done)])


def test_finished_checkpoints_are_not_opened_again(tmp_path):
    pytest.importorskip("pyarrow")
    opened = []

    class Recording(CallableBackend):
        def open_checkpoint(self, checkpoint):
            opened.append(checkpoint)

    Recording(length_metrics, [0, 1000], metrics=["score"]).score(
        SEQS, out_dir=tmp_path, progress=False
    )
    assert opened == [0, 1000]
    Recording(length_metrics, [0, 1000, 2000], metrics=["score"]).score(
        SEQS, out_dir=tmp_path, progress=False
    )
    assert opened == [0, 1000, 2000]  # adding a checkpoint to a run reuses the others' parts


def test_manifest_refuses_a_different_run(tmp_path):
    pytest.importorskip("pyarrow")
    backend = CallableBackend(length_metrics, [0], metrics=["score"])
    backend.score(SEQS, out_dir=tmp_path, progress=False)
    with pytest.raises(
        ParameterError, match=r"holds parts of a different run: instances, shard_size differ"
    ):
        backend.score(SEQS[:3], out_dir=tmp_path, progress=False)
    with pytest.raises(ParameterError, match=r"metrics differ"):
        backend.score(SEQS, out_dir=tmp_path, metrics=["first"], progress=False)
    other = CallableBackend(lambda c, b: length_metrics(c, b), [0], metrics=["score"])
    with pytest.raises(ParameterError, match=r"backend differ"):
        other.score(SEQS, out_dir=tmp_path, progress=False)


def test_progress_bar_runs(capsys):
    pytest.importorskip("tqdm")
    CallableBackend(length_metrics, [0, 1], metrics=["score"], batch_size=2).score(
        SEQS, progress=True
    )
    assert "checkpoint" in capsys.readouterr().err


def test_subclass_must_implement_the_contract():
    with pytest.raises(TypeError, match="abstract"):
        OutcomeBackend()


def test_import_didmem_backends_loads_no_torch():
    code = (
        "import sys, didmem, didmem.backends; "
        "print(sorted(m for m in ('torch', 'transformers', 'tqdm') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
