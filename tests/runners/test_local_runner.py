"""LocalRunner and the scoring plan: same frame as backend.score, resumable, retries, failures."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from didmem.backends import BackendSpec, PartStore
from didmem.backends import _weight_records
from didmem.errors import CheckpointError, ParameterError
from didmem.runners import LocalRunner, ScoringError, ScoringPlan

from .conftest import METRICS, assert_same_scores, make_backend, scores_with

pytest.importorskip("torch")
pytest.importorskip("pyarrow")


def test_plan_lists_every_item_and_saves_as_json(two_checkpoints, instances, tmp_path):
    tokens, ids = instances
    runner = LocalRunner(shard_size=4, model="tiny-neox")
    plan = runner.plan(make_backend(two_checkpoints), tokens, unit_ids=ids, metrics=METRICS)
    assert isinstance(plan, ScoringPlan)
    assert [(it.checkpoint, it.shard, it.start, it.stop) for it in plan.items] == [
        (0, 0, 0, 4), (0, 1, 4, 8), (0, 2, 8, 10),
        (1000, 0, 0, 4), (1000, 1, 4, 8), (1000, 2, 8, 10),
    ]
    text = str(plan)
    assert "tiny-neox: 6 work items = 2 checkpoints x 3 shards of 10 instances" in text
    assert str(two_checkpoints[1000]) in text
    saved = json.loads(plan.save(tmp_path / "plan.json").read_text())
    assert saved["items"][4] == {
        "model": "tiny-neox", "checkpoint": "1000", "source": str(two_checkpoints[1000]),
        "shard": 1, "start": 4, "stop": 8, "part": "part-t1000-s000001.parquet",
    }
    assert saved["metrics"] == METRICS


def test_local_runner_equals_backend_score(two_checkpoints, instances, tmp_path):
    tokens, ids = instances
    backend = make_backend(two_checkpoints)
    expected = backend.score(tokens, unit_ids=ids, metrics=METRICS, progress=False)
    # the same work items in the same process: the same batches, bitwise equal
    in_memory = LocalRunner(progress=False).run(backend, tokens, unit_ids=ids, metrics=METRICS)
    assert_same_scores(in_memory, expected, exact=True)
    out = tmp_path / "run"
    on_disk = LocalRunner(out_dir=out, shard_size=4, progress=False).run(
        backend, tokens, unit_ids=ids, metrics=METRICS
    )
    assert_same_scores(on_disk, scores_with(two_checkpoints, tokens, ids, shard_size=4),
                       exact=True)
    # shards of 4 cut batches of 3, 1, 3, 1, 2 where one shard cuts 3, 3, 3, 1: other matrix
    # shapes, so only the float32 tolerance is promised
    assert_same_scores(on_disk, expected, exact=False)
    assert len(list(out.glob("part-*.parquet"))) == 6
    assert json.loads((out / "plan.json").read_text())["n_instances"] == 10
    # backend.score resumes a runner's run: same manifest, every part already there
    again = backend.score(tokens, unit_ids=ids, metrics=METRICS, out_dir=out, shard_size=4,
                          progress=False)
    assert_same_scores(again, on_disk, exact=True)


def test_spec_rebuilds_an_equal_backend(two_checkpoints, instances):
    tokens, ids = instances
    backend = make_backend(two_checkpoints, eos_token_id=5)
    spec = backend.spec()
    assert json.loads(json.dumps(spec.to_dict())) == spec.to_dict()
    rebuilt = spec.build()
    assert rebuilt.checkpoints == backend.checkpoints
    assert rebuilt.spec() == spec
    pd.testing.assert_frame_equal(
        rebuilt.score(tokens, unit_ids=ids, metrics=METRICS, progress=False),
        backend.score(tokens, unit_ids=ids, metrics=METRICS, progress=False),
    )
    with pytest.raises(ParameterError, match="must be one of"):
        BackendSpec("vllm", {})
    with pytest.raises(ParameterError, match="needs 'checkpoints'"):
        BackendSpec("transformers", {"batch_size": 2}).build()


class _Interrupted(BaseException):
    """Stands for the run being killed: not an Exception, so nothing retries it."""


def interrupt_after(monkeypatch, n_parts: int, written: list):
    """Make PartStore.write record each part, and kill the run after ``n_parts`` parts."""
    original = PartStore.write

    def write(self, item, frame):
        original(self, item, frame)
        written.append(item.part_name)
        if len(written) == n_parts:
            raise _Interrupted

    monkeypatch.setattr(PartStore, "write", write)


def test_killed_local_run_resumes_and_writes_each_part_once(two_checkpoints, instances,
                                                            tmp_path, monkeypatch):
    tokens, ids = instances
    backend = make_backend(two_checkpoints)
    expected = backend.score(tokens, unit_ids=ids, metrics=METRICS, progress=False)
    runner = LocalRunner(out_dir=tmp_path, shard_size=4, progress=False)
    written: list = []
    interrupt_after(monkeypatch, 4, written)
    with pytest.raises(_Interrupted):
        runner.run(backend, tokens, unit_ids=ids, metrics=METRICS)
    assert len(list(tmp_path.glob("part-*.parquet"))) == 4
    frame = runner.run(backend, tokens, unit_ids=ids, metrics=METRICS)
    assert_same_scores(frame, scores_with(two_checkpoints, tokens, ids, shard_size=4),
                       exact=True)
    assert_same_scores(frame, expected, exact=False)
    assert sorted(written) == sorted(p.name for p in tmp_path.glob("part-*.parquet"))
    assert len(written) == len(set(written)) == 6


def test_failed_items_are_retried_then_reported(two_checkpoints, instances, tmp_path,
                                                monkeypatch):
    tokens, ids = instances
    paths = dict(two_checkpoints)
    broken = tmp_path / "broken1000"
    shutil.copytree(paths[1000], broken)
    weights = next(broken.glob("*.safetensors"))
    weights.write_bytes(b"not safetensors")
    backend = make_backend({0: paths[0], 1000: broken})
    runner = LocalRunner(out_dir=tmp_path / "out", shard_size=5, max_retries=1, progress=False)
    # a broken weight file is refused before any item is scored (its header is checked)
    with pytest.raises(CheckpointError, match="broken1000"):
        runner.run(backend, tokens, unit_ids=ids, metrics=METRICS)
    assert not list((tmp_path / "out").glob("part-*.parquet"))
    # a checkpoint that breaks after that check (a file replaced mid-run): its items are
    # retried, then reported with their error
    with monkeypatch.context() as patched:
        patched.setattr(_weight_records, "check_weight_files", lambda *args: None)
        with pytest.raises(ScoringError, match=r"2 work items failed after 2 attempts each: "
                                               r"checkpoint 1000 shard 0: SafetensorError") as err:
            runner.run(backend, tokens, unit_ids=ids, metrics=METRICS)
    assert [(it.checkpoint, it.shard) for it, _ in err.value.failures] == [(1000, 0), (1000, 1)]
    assert sorted(p.name for p in (tmp_path / "out").glob("part-*.parquet")) == [
        "part-t0-s000000.parquet", "part-t0-s000001.parquet"
    ]
    # an item that fails once succeeds on its retry
    calls = []
    original = type(backend).open_checkpoint

    def flaky(self, checkpoint):
        calls.append(checkpoint)
        if len(calls) == 1:
            raise RuntimeError("transient")
        original(self, checkpoint)

    good = make_backend(two_checkpoints)
    good.open_checkpoint = flaky.__get__(good)
    frame = LocalRunner(max_retries=1, progress=False).run(good, tokens, unit_ids=ids,
                                                           metrics=METRICS)
    pd.testing.assert_frame_equal(
        frame, make_backend(two_checkpoints).score(tokens, unit_ids=ids, metrics=METRICS,
                                                   progress=False)
    )
    with pytest.raises(ParameterError, match="'max_retries' parameter"):
        LocalRunner(max_retries=-1)


_KILLED_RUN = """
import sys, time
import numpy as np
import torch
torch.set_num_threads({threads})  # the parent's, so that both compute the same bits
sys.path.insert(0, {helpers!r})
from tests.runners.conftest import METRICS, assert_same_scores, make_backend, scores_with
from didmem.backends import PartStore
from didmem.runners import LocalRunner

write = PartStore.write
def slow_write(self, item, frame):  # leaves time to kill the process between parts
    write(self, item, frame)
    time.sleep(1)
PartStore.write = slow_write
tokens = np.load({tokens!r})
ids = [f"seq{{i:02d}}" for i in range(len(tokens))]
LocalRunner(out_dir={out!r}, shard_size=4, progress=False).run(
    make_backend({{0: {c0!r}, 1000: {c1!r}}}), tokens, unit_ids=ids, metrics=METRICS)
"""


def test_sigkilled_run_resumes(two_checkpoints, instances, tmp_path, monkeypatch):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import numpy as np

    tokens, ids = instances
    np.save(tmp_path / "tokens.npy", tokens)
    out = tmp_path / "out"
    import torch

    script = _KILLED_RUN.format(
        threads=torch.get_num_threads(), helpers=str(Path(__file__).resolve().parents[2]), tokens=str(tmp_path / "tokens.npy"), out=str(out),
        c0=str(two_checkpoints[0]), c1=str(two_checkpoints[1000]),
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parents[2])
    deadline = time.monotonic() + 120
    while len(list(out.glob("part-*.parquet"))) < 2 and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = {p.name: p.stat().st_ino for p in out.glob("part-*.parquet")}
    assert 2 <= len(before) < 6

    written: list = []
    interrupt_after(monkeypatch, 99, written)
    backend = make_backend(two_checkpoints)
    frame = LocalRunner(out_dir=out, shard_size=4, progress=False).run(
        backend, tokens, unit_ids=ids, metrics=METRICS)
    # parts of the killed process and of this one, each as an uninterrupted run computes it
    assert_same_scores(frame, scores_with(two_checkpoints, tokens, ids, shard_size=4),
                       exact=True)
    assert_same_scores(
        frame, backend.score(tokens, unit_ids=ids, metrics=METRICS, progress=False),
        exact=False)
    after = {p.name: p.stat().st_ino for p in out.glob("part-*.parquet")}
    assert len(after) == 6 and sorted(written) == sorted(set(after) - set(before))
    assert all(after[name] == ino for name, ino in before.items())  # not rewritten
