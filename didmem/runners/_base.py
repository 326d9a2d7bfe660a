"""The runner interface and the sequential local runner.

A runner executes a :class:`~didmem.runners.ScoringPlan`. Every runner uses the backends' own
machinery: :meth:`OutcomeBackend.run_item <didmem.backends.OutcomeBackend.run_item>` scores a
work item and :class:`~didmem.backends.PartStore` writes its part atomically, so a run that
is killed resumes where it stopped, whichever runner started it and whichever finishes it.
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..backends._instances import Instances
from ..backends._parts import PartStore, WorkItem, time_label
from ..backends.base import _progress_bar, normalise_frame
from .._validation import Integral, check, constraints_of
from ..errors import DidmemError
from ._plan import ScoringPlan

__all__ = ["Runner", "LocalRunner", "ScoringError", "PLAN_FILE"]

PLAN_FILE = "plan.json"


class ScoringError(DidmemError, RuntimeError):
    """Work items failed after every retry; the message lists each with its last error.

    Attributes
    ----------
    failures : list of (WorkItem, str)
        The failed items and their last error. The parts of the items that succeeded are kept,
        so a re-run computes only the failed items.
    """

    def __init__(self, failures: list, attempts: int, out_dir=None) -> None:
        self.failures = list(failures)
        shown = "; ".join(
            f"checkpoint {time_label(it.checkpoint)} shard {it.shard}: {err}"
            for it, err in self.failures[:5]
        )
        more = f" (and {len(self.failures) - 5} more)" if len(self.failures) > 5 else ""
        kept = (
            f" The finished parts are kept in {str(out_dir)!r}; a re-run scores only the rest."
            if out_dir is not None else ""
        )
        super().__init__(
            f"{len(self.failures)} work items failed after {attempts} attempts each: "
            f"{shown}{more}.{kept}"
        )


def error_text(exc: BaseException) -> str:
    """One line naming an exception: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class Runner(abc.ABC):
    """Runs a scoring plan; subclasses decide where the work items execute.

    Parameters
    ----------
    out_dir : str or os.PathLike, optional
        Write each finished work item as a parquet part here, atomically, beside
        ``manifest.json`` and ``plan.json``. A re-run skips the finished parts. Without it the
        parts are kept in memory and nothing is resumable.
    shard_size : int, optional
        Instances per work item (and part); defaults to all instances, one item per
        checkpoint.
    max_retries : int
        How many times a failed work item is tried again before it is reported.
    progress : bool, optional
        Show progress (checkpoint being scored, sequences done, time left) on standard
        error; ``None`` shows it when standard error is a terminal.
    model : str, optional
        A label of the model in the plan (defaults to the backend's class name).
    """

    _constraints = {"max_retries": Integral(0)}

    def __init__(self, out_dir=None, *, shard_size=None, max_retries: int = 2,
                 progress: bool | None = None, model: str | None = None) -> None:
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.shard_size = shard_size
        self.max_retries = check(type(self).__name__, "max_retries", max_retries,
                                 constraints_of(type(self))["max_retries"])
        self.progress = progress
        self.model = model

    # ----------------------------------------------------------------- interface
    def plan(self, backend, token_ids=None, *, unit_ids=None, metrics=None,
             checkpoints=None) -> ScoringPlan:
        """The work items that :meth:`run` would execute, after validating the inputs."""
        instances = Instances(token_ids, unit_ids)
        return ScoringPlan.build(backend, instances, metrics=metrics, checkpoints=checkpoints,
                                 shard_size=self.shard_size, model=self.model)

    def run(self, backend, token_ids=None, *, unit_ids=None, metrics=None,
            checkpoints=None) -> pd.DataFrame:
        """Score every instance at every checkpoint; the same frame as ``backend.score``.

        The values are bitwise those of ``backend.score`` with the same ``shard_size`` in a
        process with the same device and threads; other shard sizes cut other batches and
        agree to floating-point tolerance (see ``docs/ray.rst``, "Values").

        Parameters
        ----------
        backend : OutcomeBackend
            What scores the instances.
        token_ids, unit_ids, metrics, checkpoints
            As in :meth:`OutcomeBackend.score <didmem.backends.OutcomeBackend.score>`.

        Returns
        -------
        pandas.DataFrame
            Columns ``unit``, ``time`` and one per metric; rows ordered by checkpoint, then by
            the order of the instances.

        Raises
        ------
        ScoringError
            Some work items failed ``1 + max_retries`` times; the others' parts are kept.
        """
        instances = Instances(token_ids, unit_ids)
        plan = ScoringPlan.build(backend, instances, metrics=metrics, checkpoints=checkpoints,
                                 shard_size=self.shard_size, model=self.model)
        todo = [it for it in plan.items
                if self.out_dir is None or not (self.out_dir / it.part_name).exists()]
        frames: dict = {}
        with self._session(backend, instances, plan, todo) as session:
            store = None
            if self.out_dir is not None:
                # the settings as the workers see them (a Ray actor may score on a GPU that
                # this process does not have)
                plan = replace(plan, manifest=dict(plan.manifest, backend=session.describe()))
                store = PartStore(self.out_dir, plan.manifest)
                plan.save(self.out_dir / PLAN_FILE)
            pending = plan.pending(store)

            def sink(item: WorkItem, frame: pd.DataFrame) -> None:
                if store is None:
                    frames[item] = frame
                else:
                    store.write(item, frame)

            failures = session.execute(pending, sink) if pending else []
        if failures:
            raise ScoringError(failures, 1 + self.max_retries, self.out_dir)
        parts = [frames[it] if store is None else store.read(it) for it in plan.items]
        return normalise_frame(pd.concat(parts, ignore_index=True), plan.metrics)

    @abc.abstractmethod
    def _session(self, backend, instances: Instances, plan: ScoringPlan, todo: list):
        """A context manager whose value has ``describe()`` and ``execute(pending, sink)``."""


class _LocalSession:
    def __init__(self, runner: LocalRunner, backend, instances, plan) -> None:
        self.runner, self.backend, self.instances, self.plan = runner, backend, instances, plan

    def describe(self) -> dict:
        return self.backend.describe()

    def execute(self, pending: list, sink) -> list:
        backend, failures = self.backend, []
        bar = _progress_bar(self.runner.progress, total=sum(it.n_instances for it in pending))
        try:
            for item in pending:
                if bar is not None:
                    bar.set_description(f"checkpoint {time_label(item.checkpoint)}")
                for attempt in range(1 + self.runner.max_retries):
                    try:
                        frame = backend.run_item(item, self.instances, self.plan.metrics)
                    except Exception as exc:  # retried, then reported with its error
                        error = error_text(exc)
                        with contextlib.suppress(Exception):
                            backend.release()
                        continue
                    sink(item, frame)
                    if bar is not None:
                        bar.update(item.n_instances)
                    break
                else:
                    failures.append((item, error))
        finally:
            backend.release()
            if bar is not None:
                bar.close()
        return failures


class LocalRunner(Runner):
    """Runs the work items one after the other in this process, with a progress line.

    The parameters are those of :class:`Runner`.

    Examples
    --------
    >>> frame = LocalRunner(out_dir="scores").run(backend, token_ids, unit_ids=ids,
    ...                                           metrics=["mean_token_loglik"])  # doctest: +SKIP
    """

    @contextlib.contextmanager
    def _session(self, backend, instances, plan, todo):
        yield _LocalSession(self, backend, instances, plan)
