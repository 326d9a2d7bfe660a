"""The lab's pool of worker processes: tasks run when their inputs are done."""

import os

import pytest

from didmem.errors import ParameterError
from didmem.lab.workers import Task, default_workers, run_tasks


def _square(x, laps):
    laps("square")
    return {"value": x * x, "pid": os.getpid()}


def _add(a, b, laps):
    laps("add")
    return {"value": a["value"] + b["value"], "pid": os.getpid()}


def _fail(laps):
    raise ValueError("this task fails")


def test_tasks_wait_for_their_inputs_and_run_elsewhere():
    pytest.importorskip("torch")
    seen = []
    tasks = [Task("sum", _add, after=("three", "four")), Task("three", _square, (3,)),
             Task("four", _square, (4,))]
    out = run_tasks(tasks, 2, 1, on_done=lambda name, value, laps: seen.append((name, laps)))
    assert out["sum"]["value"] == 25 and out["three"]["value"] == 9
    assert seen[-1][0] == "sum" and {n for n, _ in seen} == {"sum", "three", "four"}
    assert set(seen[-1][1]) == {"add"} and seen[-1][1]["add"] >= 0
    assert os.getpid() not in {v["pid"] for v in out.values()}


def test_a_tasks_error_is_raised_as_it_is():
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="this task fails"):
        run_tasks([Task("bad", _fail), Task("after", _square, (2,), after=("bad",))], 1, 1)


def test_bad_task_lists_are_refused():
    with pytest.raises(ParameterError, match="unique"):
        run_tasks([Task("a", _square, (1,)), Task("a", _square, (2,))], 1, 1)
    with pytest.raises(ParameterError, match="waits for 'b', which is not a task"):
        run_tasks([Task("a", _add, (1,), after=("b",))], 1, 1)
    with pytest.raises(ParameterError, match="wait for one another"):
        run_tasks([Task("a", _add, after=("b", "b")), Task("b", _add, after=("a", "a"))], 1, 1)


def test_default_workers():
    cores = len(os.sched_getaffinity(0))
    assert default_workers(1, 1) == 1
    assert default_workers(64, 1) == cores
    assert default_workers(3, 64) == 1


def test_a_large_request_starts_at_most_two_processes_per_run():
    from didmem.lab.workers import default_workers, lab_workers

    assert lab_workers(10**9, runs=3, threads=1) == 6
    assert lab_workers(4, runs=3, threads=1) == 4
    assert lab_workers(8, runs=1, threads=1) == 1
    assert lab_workers(None, runs=3, threads=1) == default_workers(3, 1)


def test_a_run_started_while_a_worker_imports_the_script_is_refused(tmp_path, monkeypatch):
    """A script without a main guard: the worker importing it must not start the run again
    (on the caller's directory); the caller then sees the pool broken, with the same advice."""
    import multiprocessing

    from didmem.lab import run

    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(ParameterError, match="if __name__ == \"__main__\":"):
        run(tmp_path / "out", quick=True, runs=2, overwrite=True)
    assert not (tmp_path / "out").exists()
