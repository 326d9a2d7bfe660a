"""Lab work in parallel processes: a small pool that runs tasks as their inputs are ready.

With several runs (``LabConfig(runs=R)``) the lab's work splits into tasks per run (the main
run with its exact runs, the twin, the subset models, scoring and tables), some needing
others' results (scoring a run needs its models, and ``reference_ratio`` run 0's twin). The
tasks run in ``workers`` fresh processes (started with ``spawn``: no state inherited from the
caller, so a task computes what it computes in the caller's process, and every run's files
are the same whatever the number of workers). Each task runs inside
:func:`~didmem.lab.trainer.torch_session` with the lab's thread count.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Callable

from ..errors import ParameterError
from .trainer import torch_session

__all__ = ["Task", "Laps", "run_tasks", "default_workers", "refuse_in_bootstrap"]

_GUARD = ("In a script, call didmem.lab.run under `if __name__ == \"__main__\":` (the lab's "
          "workers start with 'spawn' and import the script), or pass workers=1 (--workers 1) "
          "to run everything in the calling process.")


def refuse_in_bootstrap() -> None:
    """Refuse to start a lab run in a worker process that is still importing the caller's
    script (a script that calls :func:`didmem.lab.run` without ``if __name__ ==
    "__main__":``): the run would start again there, on the caller's directory.

    Raises
    ------
    ParameterError
        While this process is a new ``spawn`` process importing its parent's main module.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise ParameterError("didmem.lab.run was called while a worker process of the lab "
                             "was importing the calling script. " + _GUARD)


def default_workers(runs: int, threads: int) -> int:
    """The processes to use by default: one per run, at most as many as the cores this
    process may use divided by the torch threads of each (at least one)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(int(runs), cores // max(1, int(threads))))


def lab_workers(requested, runs: int, threads: int) -> int:
    """The processes a lab of ``runs`` runs uses: :func:`default_workers` when none is
    requested, else the request, at most two per run (a run's main training and its twin
    are the most of its tasks that can run at once), so that a large request does not
    start processes (each loads torch) that can have nothing to do."""
    if runs == 1:
        return 1
    if requested is None:
        return default_workers(runs, threads)
    return max(1, min(int(requested), 2 * int(runs)))


class Laps:
    """Seconds per stage of a task, as :func:`run_tasks` reports them: ``laps(name)`` ends
    the stage ``name`` (begun at the previous call, or when the task started)."""

    def __init__(self) -> None:
        self.seconds: dict = {}
        self._clock = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = now - self._clock
        self._clock = now


@dataclass(frozen=True)
class Task:
    """One piece of work: ``func(*args, *results of after, laps)`` in a worker process.

    Attributes
    ----------
    name : str
        Unique among the tasks.
    func : callable
        A module-level function (it is sent to the worker by reference); its last argument
        is a :class:`Laps` that it calls at the end of each of its stages.
    args : tuple
        Its first arguments (sent by pickling).
    after : tuple of str
        The tasks whose results it takes, in this order, after ``args``.
    """

    name: str
    func: Callable
    args: tuple = ()
    after: tuple = field(default_factory=tuple)


def _call(func, threads: int, args: tuple):
    """Run one task in a worker: its result and its stages' seconds."""
    laps = Laps()
    with torch_session(threads):
        value = func(*args, laps)
    return value, laps.seconds


def run_tasks(tasks: list, workers: int, threads: int, on_done=None) -> dict:
    """Run ``tasks`` in ``workers`` processes, each as soon as its inputs are done.

    Parameters
    ----------
    tasks : list of Task
        In order of priority: when a process is free, it takes the first task whose inputs
        are done.
    workers : int
        Processes (at least 1).
    threads : int
        Torch threads of each task (:func:`~didmem.lab.trainer.torch_session`).
    on_done : callable, optional
        ``on_done(name, result, seconds)`` in this process when a task is done
        (``seconds``: its stages' seconds).

    Returns
    -------
    dict
        Each task's result by name.

    Raises
    ------
    ParameterError
        A task waits for one that does not exist or that waits for it, or a worker process
        died (the message says how to run without workers). A task's own exception is raised
        as it is, after the other tasks are cancelled.
    """
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise ParameterError(f"Task names must be unique; got {names}.")
    unknown = [(t.name, a) for t in tasks for a in t.after if a not in names]
    if unknown:
        raise ParameterError(f"Task {unknown[0][0]!r} waits for {unknown[0][1]!r}, which is not "
                             "a task.")
    pending, running, results = list(tasks), {}, {}
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=int(workers), mp_context=context)
    try:
        while pending or running:
            while pending and len(running) < workers:
                ready = next((t for t in pending if all(a in results for a in t.after)), None)
                if ready is None:
                    break
                pending.remove(ready)
                inputs = tuple(ready.args) + tuple(results[a] for a in ready.after)
                running[pool.submit(_call, ready.func, threads, inputs)] = ready
            if not running:
                raise ParameterError(f"Tasks {[t.name for t in pending]} wait for one another.")
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: names.index(running[f].name)):
                task = running.pop(future)
                value, seconds = future.result()
                results[task.name] = value
                if on_done is not None:
                    on_done(task.name, value, seconds)
    except BrokenProcessPool as exc:
        raise ParameterError(
            f"A worker process of the lab stopped before it finished ({exc}). " + _GUARD
        ) from exc
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results
