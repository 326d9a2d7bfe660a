"""RayRunner on a local Ray cluster started by the tests: same frame as LocalRunner, resumable."""

from __future__ import annotations

import os
import shutil
import sys
import time

import numpy as np
import pandas as pd
import pytest

from didmem.backends import CallableBackend
from didmem.errors import CheckpointError
from didmem.runners import LocalRunner, RayRunner, ScoringError
from didmem.runners.ray_runner import WorkerError

from .conftest import METRICS, assert_same_scores, make_backend, scores_with
from .test_local_runner import _Interrupted, interrupt_after

pytest.importorskip("torch")
pytest.importorskip("pyarrow")
ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'didmem[ray]'")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray instance with two CPUs, shared by the tests of this module (~5 s to start)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def actor_threads(ray_cluster):
    """The CPU threads of torch in a Ray worker with one CPU, as the runner's actors have
    (Ray sets OMP_NUM_THREADS from num_cpus unless the environment sets it)."""

    @ray.remote(num_cpus=1)
    def threads():
        import torch

        return torch.get_num_threads()

    return ray.get(threads.remote())


@pytest.fixture(scope="module")
def local_frame(two_checkpoints, instances):
    tokens, ids = instances
    return LocalRunner(progress=False).run(make_backend(two_checkpoints), tokens, unit_ids=ids,
                                           metrics=METRICS)


def test_two_actors_give_the_local_frame(ray_cluster, actor_threads, two_checkpoints, instances,
                                         local_frame, tmp_path):
    tokens, ids = instances
    runner = RayRunner(out_dir=tmp_path, num_workers=2, shard_size=5, progress=False)
    frame = runner.run(make_backend(two_checkpoints), tokens, unit_ids=ids, metrics=METRICS)
    # the same work items with the actors' threads: bitwise the local values
    assert_same_scores(frame, scores_with(two_checkpoints, tokens, ids, shard_size=5,
                                          threads=actor_threads), exact=True)
    # shards of 5 cut other batches than one shard, and the threads may differ: tolerance
    assert_same_scores(frame, local_frame, exact=False)
    # each actor held one checkpoint and took all of its items
    assert sorted(sorted(parts) for parts in runner.last_assignments.values()) == [
        ["part-t0-s000000.parquet", "part-t0-s000001.parquet"],
        ["part-t1000-s000000.parquet", "part-t1000-s000001.parquet"],
    ]
    # the local runner resumes the Ray run's parts: nothing is left to do
    again = LocalRunner(out_dir=tmp_path, shard_size=5, progress=False).run(
        make_backend(two_checkpoints), tokens, unit_ids=ids, metrics=METRICS
    )
    assert_same_scores(again, frame, exact=True)


def test_killed_ray_run_resumes_and_writes_each_part_once(ray_cluster, actor_threads,
                                                          two_checkpoints, instances,
                                                          local_frame, tmp_path, monkeypatch):
    tokens, ids = instances
    runner = RayRunner(out_dir=tmp_path, num_workers=1, shard_size=3, progress=False)
    written: list = []
    interrupt_after(monkeypatch, 3, written)
    import didmem.runners.ray_runner as ray_runner

    settled: list = []  # issue 50: the calls in flight at the error are read before shutdown

    def spy(ray_module, refs):
        read_outcomes(ray_module, refs)
        settled.append(len(ray_module.wait(list(refs), num_returns=len(refs), timeout=0)[0])
                       == len(refs))
        settled.append(len(refs))

    read_outcomes = ray_runner.read_outcomes
    monkeypatch.setattr(ray_runner, "read_outcomes", spy)
    with pytest.raises(_Interrupted):
        runner.run(make_backend(two_checkpoints), tokens, unit_ids=ids, metrics=METRICS)
    assert settled and settled[0] is True and settled[1] >= 1  # every one ended, and read
    monkeypatch.setattr(ray_runner, "read_outcomes", read_outcomes)
    assert len(list(tmp_path.glob("part-*.parquet"))) == 3
    # one actor each time: every actor start-up imports torch, and the test stays fast
    runner = RayRunner(out_dir=tmp_path, num_workers=1, shard_size=3, progress=False)
    frame = runner.run(make_backend(two_checkpoints), tokens, unit_ids=ids, metrics=METRICS)
    # parts of the killed run and of the resumed one, as an uninterrupted run computes them
    assert_same_scores(frame, scores_with(two_checkpoints, tokens, ids, shard_size=3,
                                          threads=actor_threads), exact=True)
    assert_same_scores(frame, local_frame, exact=False)
    assert sorted(written) == sorted(p.name for p in tmp_path.glob("part-*.parquet"))
    assert len(written) == len(set(written)) == 8
    assert not list(tmp_path.glob(".*tmp"))


def test_a_broken_checkpoint_is_refused_before_any_item(ray_cluster, two_checkpoints,
                                                        instances, tmp_path):
    tokens, ids = instances
    broken = tmp_path / "broken1000"
    shutil.copytree(two_checkpoints[1000], broken)
    next(broken.glob("*.safetensors")).write_bytes(b"not safetensors")
    backend = make_backend({0: two_checkpoints[0], 1000: broken})
    runner = RayRunner(out_dir=tmp_path / "out", num_workers=1, shard_size=5, max_retries=1,
                       progress=False)
    with pytest.raises(CheckpointError, match="broken1000"):  # refused before any item
        runner.run(backend, tokens, unit_ids=ids, metrics=METRICS)
    assert not list((tmp_path / "out").glob("part-*.parquet"))


class _BrokenInWorkers(CallableBackend):
    """Passes the driver's check and fails every actor's: a checkpoint broken after the check."""

    def __init__(self, *args, driver_pid, **kwargs):
        super().__init__(*args, **kwargs)
        self.driver_pid = driver_pid

    def validate(self, instances, metrics):
        if os.getpid() != self.driver_pid:
            raise CheckpointError("checkpoint 1000 at /models/step1000: not a safetensors file")


def _ones(checkpoint, batch):
    return {"n": np.ones(len(batch))}


def test_an_actor_that_fails_its_check_reports_the_check(ray_cluster, tmp_path):
    # the driver's check passes and the actors' fails: the run stops with the actor's error,
    # not Ray's "the actor died" text
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    try:
        backend = _BrokenInWorkers(_ones, [0, 1000], metrics=["n"], name="broken",
                                   driver_pid=os.getpid())
        runner = RayRunner(out_dir=tmp_path, num_workers=1, max_retries=1, progress=False)
        with pytest.raises(WorkerError, match="could not build and check the backend: "
                                              "CheckpointError: checkpoint 1000 at "
                                              "/models/step1000: not a safetensors file"):
            runner.run(backend, unit_ids=["a", "b", "c"])
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    assert not list(tmp_path.glob("part-*.parquet"))


def test_score_command_on_ray(ray_cluster, two_checkpoints, instances, local_frame, tmp_path,
                              capsys):
    from .test_score_cli import write_config

    from didmem.cli import main

    config = write_config(tmp_path, two_checkpoints, instances,
                          tables=["[runner]", 'kind = "ray"', "num_workers = 1", "num_gpus = 0"])
    assert main(["score", "--config", config, "--out", str(tmp_path / "out")]) == 0
    assert "with the ray runner" in capsys.readouterr().out
    assert_same_scores(pd.read_parquet(tmp_path / "out" / "scores.parquet"), local_frame,
                       exact=False)


def _dies_at_1000(checkpoint, batch):
    """A scoring function whose process dies at checkpoint 1000 (a crash, an OOM kill)."""
    if checkpoint == 1000:
        os._exit(3)
    return {"n": np.full(len(batch), float(checkpoint))}


def test_a_dead_actor_is_replaced_and_its_items_reported(ray_cluster, tmp_path):
    # a backend without a spec travels pickled; its function is pickled by value because
    # Ray's workers cannot import this test module
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    try:
        backend = CallableBackend(_dies_at_1000, [0, 1000], metrics=["n"], name="dies")
        runner = RayRunner(out_dir=tmp_path, num_workers=1, max_retries=1, progress=False)
        with pytest.raises(ScoringError, match="1 work items failed after 2 attempts each: "
                                               "checkpoint 1000 shard 0: ActorDiedError"):
            runner.run(backend, unit_ids=["a", "b", "c"])
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    assert [p.name for p in tmp_path.glob("part-*.parquet")] == ["part-t0-s000000.parquet"]


def _dies_on_b(checkpoint, batch):
    """A scoring function whose process dies, after a while, on the batch holding unit 'b'."""
    if "b" in list(batch.units):
        time.sleep(3)  # the items after it are queued on the same actor by then
        os._exit(3)
    return {"n": np.full(len(batch), float(checkpoint))}


def test_items_queued_beside_a_dying_item_are_not_lost_with_it(ray_cluster, tmp_path):
    # one actor holds two items at a time: 'a' finishes, 'c' is queued behind 'b', and 'b'
    # kills the actor; without retries 'c' was charged the death and lost with 'b'
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    try:
        backend = CallableBackend(_dies_on_b, [0], metrics=["n"], name="dies_on_b")
        runner = RayRunner(out_dir=tmp_path, num_workers=1, max_retries=0, shard_size=1,
                           progress=False)
        with pytest.raises(ScoringError, match="^1 work items failed after 1 attempts each: "
                                               "checkpoint 0 shard 1: ActorDiedError"):
            runner.run(backend, unit_ids=["a", "b", "c"])
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    assert sorted(p.name for p in tmp_path.glob("part-*.parquet")) == [
        "part-t0-s000000.parquet", "part-t0-s000002.parquet"]


def test_actors_that_cannot_be_placed_are_refused(ray_cluster, two_checkpoints, instances):
    from didmem.errors import ParameterError

    tokens, ids = instances
    with pytest.raises(ParameterError, match="reserves 1 GPUs per actor, but the Ray cluster has 0"):
        RayRunner(num_gpus=1, progress=False).run(make_backend(two_checkpoints), tokens,
                                                  unit_ids=ids, metrics=METRICS)
