"""The outcome-backend interface: score instances at checkpoints into a long table.

A backend knows a set of checkpoints (times) and how to compute one or more metrics for a
batch of instances at one checkpoint. :meth:`OutcomeBackend.score` does the rest, the same way
for every backend: it validates the instances, cuts the work into items (one per checkpoint
and shard of instances), runs them with a progress bar, optionally writes each finished item
as an atomic parquet part so that a killed run resumes where it stopped, and returns the long
table with columns ``unit``, ``time`` and one column per metric.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .._progress import Progress
from .._progress import progress as progress_line
from ..errors import ParameterError
from ._instances import InstanceBatch, Instances, listing
from ._parts import PartStore, WorkItem, time_label

__all__ = ["OutcomeBackend", "check_checkpoint_times"]


def check_checkpoint_times(times, owner: str) -> tuple:
    """Validate checkpoint times: non-empty, finite real numbers, distinct; return them sorted."""
    times = list(times)
    if not times:
        raise ParameterError(f"{owner} needs at least one checkpoint; got none.")
    bad = [t for t in times if isinstance(t, bool) or not isinstance(t, (int, float, np.number))]
    bad += [t for t in times if t not in bad and not np.isfinite(t)]
    if bad:
        raise ParameterError(
            f"Checkpoint times of {owner} must be finite numbers (training steps); got "
            f"{listing(bad)}."
        )
    if len(set(float(t) for t in times)) != len(times):
        raise ParameterError(f"Checkpoint times of {owner} must be distinct; got {times}.")
    return tuple(sorted(t.item() if isinstance(t, np.generic) else t for t in times))


class OutcomeBackend(abc.ABC):
    """Abstract source of outcomes: metrics of instances at checkpoints.

    A subclass provides :attr:`checkpoints` and :meth:`score_batch`; it may override
    :meth:`validate` (checks before any work), :meth:`open_checkpoint` /
    :meth:`close_checkpoint` (load and free a model once per checkpoint) and
    :meth:`describe` (settings that change the results, recorded with resumable runs).
    See ``docs/backends.rst`` for a worked example.

    Attributes
    ----------
    batch_size : int
        Instances per call of :meth:`score_batch`.
    default_metrics : tuple of str
        Metrics scored when :meth:`score` gets ``metrics=None``.
    metric_names : tuple of str or None
        Every metric the backend can score, so that a study can check its metrics before
        any scoring; ``None`` (the default) when the backend accepts other names too.
    """

    batch_size: int = 64
    default_metrics: tuple = ()
    metric_names: tuple | None = None

    # ------------------------------------------------------------ the contract
    @property
    @abc.abstractmethod
    def checkpoints(self) -> tuple:
        """Times (training steps) of the checkpoints, ascending."""

    @abc.abstractmethod
    def score_batch(self, checkpoint, batch: InstanceBatch, metrics: tuple) -> Mapping:
        """Score one batch of instances at one checkpoint.

        Parameters
        ----------
        checkpoint : int or float
            One of :attr:`checkpoints`; :meth:`open_checkpoint` has been called with it.
        batch : InstanceBatch
            The instances: ``batch.units`` and ``batch.token_ids``.
        metrics : tuple of str
            The metrics to return.

        Returns
        -------
        Mapping of str to array_like
            For each metric, one value per instance of the batch, in order.
        """

    def validate(self, instances: Instances, metrics: tuple) -> None:
        """Check the instances and metrics before any work is done (default: nothing)."""

    def open_checkpoint(self, checkpoint) -> None:
        """Prepare to score at ``checkpoint``, for example by loading its weights."""

    def close_checkpoint(self) -> None:
        """Free what :meth:`open_checkpoint` loaded."""

    def describe(self) -> dict:
        """JSON-serialisable settings that change the scores (default: the class name)."""
        return {"backend": type(self).__name__}

    def checkpoint_source(self, checkpoint) -> str:
        """Where a checkpoint's scores come from (a path, a revision), for the run manifest."""
        return time_label(checkpoint)

    def spec(self):
        """A picklable :class:`~didmem.backends.BackendSpec` that rebuilds this backend.

        Distributed runners build each worker's backend from it rather than shipping the
        object. ``None`` (the default) means there is no spec: the runner sends a pickled
        copy of the backend, which must then hold no loaded model.
        """
        return None

    def run_manifest(self, instances: Instances, metrics: tuple, times: tuple, shard_size,
                     items: list) -> dict:
        """What the parts of a resumable run are computed from (see :class:`PartStore`)."""
        return {
            "backend": self.describe(),
            "instances": instances.fingerprint(),
            "metrics": list(metrics),
            "shard_size": items[0].n_instances if shard_size is None else int(shard_size),
            "sources": {time_label(c): self.checkpoint_source(c) for c in times},
        }

    # ------------------------------------------------------------ the machinery
    def resolve_metrics(self, metrics) -> tuple:
        """The metrics to score: ``metrics`` as a tuple, or :attr:`default_metrics`."""
        if metrics is None:
            metrics = self.default_metrics
        if isinstance(metrics, str):
            metrics = (metrics,)
        metrics = tuple(metrics)
        if not metrics:
            raise ParameterError(f"{type(self).__name__}.score needs at least one metric.")
        if len(set(metrics)) != len(metrics):
            raise ParameterError(f"The metrics must be distinct; got {list(metrics)}.")
        return metrics

    def resolve_checkpoints(self, checkpoints) -> tuple:
        """The checkpoints to score: a subset of :attr:`checkpoints`, ascending."""
        if checkpoints is None:
            return tuple(self.checkpoints)
        wanted = check_checkpoint_times(checkpoints, type(self).__name__)
        known = {float(c) for c in self.checkpoints}
        unknown = [c for c in wanted if float(c) not in known]
        if unknown:
            raise ParameterError(
                f"Unknown checkpoints {listing(unknown)}; {type(self).__name__} has "
                f"{listing(self.checkpoints, 8)}."
            )
        return tuple(c for c in self.checkpoints if float(c) in {float(w) for w in wanted})

    def work_items(self, n_instances: int, checkpoints: Sequence, shard_size: int | None) -> list:
        """The work items of a run: for each checkpoint, the shards of ``shard_size`` instances."""
        if shard_size is None:
            shard_size = n_instances
        if (
            isinstance(shard_size, bool)
            or not isinstance(shard_size, (int, np.integer))
            or (shard_size < 1)
        ):
            raise ParameterError(f"shard_size must be a positive integer; got {shard_size!r}.")
        bounds = list(range(0, n_instances, int(shard_size))) + [n_instances]
        return [
            WorkItem(checkpoint=c, shard=s, start=bounds[s], stop=bounds[s + 1])
            for c in checkpoints
            for s in range(len(bounds) - 1)
        ]

    def run_item(self, item: WorkItem, instances: Instances, metrics: tuple, bar=None):
        """Score one work item and return its part of the long table.

        The checkpoint is opened if it is not the one currently open.
        """
        if getattr(self, "_open_checkpoint", None) != item.checkpoint:
            self.close_checkpoint()
            self._open_checkpoint = None
            self.open_checkpoint(item.checkpoint)
            self._open_checkpoint = item.checkpoint
        columns = {m: [] for m in metrics}
        for start in range(item.start, item.stop, self.batch_size):
            batch = instances.batch(start, min(start + self.batch_size, item.stop))
            values = self.score_batch(item.checkpoint, batch, metrics)
            for m in metrics:
                if m not in values:
                    raise ParameterError(
                        f"{type(self).__name__}.score_batch returned no metric {m!r} at "
                        f"checkpoint {item.checkpoint} (it returned {sorted(values)})."
                    )
                column = np.asarray(values[m])
                if column.shape != (len(batch),):
                    raise ParameterError(
                        f"{type(self).__name__}.score_batch returned {m!r} with shape "
                        f"{column.shape} for a batch of {len(batch)} instances at checkpoint "
                        f"{item.checkpoint}; expected one value per instance."
                    )
                columns[m].append(column)
            if bar is not None:
                bar.update(len(batch))
        frame = pd.DataFrame(
            {
                "unit": instances.units[item.start : item.stop],
                "time": np.full(item.n_instances, item.checkpoint),
            }
        )
        for m in metrics:
            column = np.concatenate(columns[m])
            frame[m] = column if column.dtype == bool else column.astype(np.float64)
        return frame

    def release(self) -> None:
        """Close the open checkpoint, if any."""
        if getattr(self, "_open_checkpoint", None) is not None:
            self.close_checkpoint()
        self._open_checkpoint = None

    def score(
        self,
        token_ids=None,
        *,
        unit_ids=None,
        metrics=None,
        checkpoints=None,
        out_dir=None,
        shard_size: int | None = None,
        progress: bool | None = None,
    ) -> pd.DataFrame:
        """Score every instance at every checkpoint.

        Parameters
        ----------
        token_ids : 2-D array_like of int, or sequence of 1-D array_like of int
            The instances' token ids.
        unit_ids : array_like, optional
            One identifier per instance (unique ints or strings); defaults to ``0 .. n-1``.
        metrics : sequence of str, optional
            Metrics to compute; defaults to :attr:`default_metrics`.
        checkpoints : sequence of numbers, optional
            A subset of :attr:`checkpoints`; defaults to all.
        out_dir : str or os.PathLike, optional
            Write each finished (checkpoint, shard) as a parquet part here, atomically. A
            re-run with the same arguments skips the finished parts and returns a frame
            identical to an uninterrupted run (bitwise when it runs on the same machine with
            the same threads; see ``docs/ray.rst``, "Values").
        shard_size : int, optional
            Instances per work item (and per part); defaults to all instances, one part per
            checkpoint.
        progress : bool, optional
            Show progress over checkpoints and batches on standard error (the checkpoint
            being scored, sequences done, time left). ``None`` shows it when standard error
            is a terminal.

        Returns
        -------
        pandas.DataFrame
            Columns ``unit``, ``time`` and one per metric; rows ordered by checkpoint, then by
            the order of the instances.
        """
        instances = Instances(token_ids, unit_ids)
        metrics = self.resolve_metrics(metrics)
        times = self.resolve_checkpoints(checkpoints)
        self.validate(instances, metrics)
        items = self.work_items(len(instances), times, shard_size)
        store = None
        if out_dir is not None:
            store = PartStore(
                out_dir, self.run_manifest(instances, metrics, times, shard_size, items)
            )
        pending = [it for it in items if store is None or not store.is_done(it)]
        bar = _progress_bar(progress, total=sum(it.n_instances for it in pending))
        parts = {}
        try:
            for item in pending:
                if bar is not None:
                    bar.set_description(f"checkpoint {time_label(item.checkpoint)}")
                frame = self.run_item(item, instances, metrics, bar)
                if store is None:
                    parts[item] = frame
                else:
                    store.write(item, frame)
        finally:
            self.release()
            if bar is not None:
                bar.close()
        frames = [parts[it] if store is None else store.read(it) for it in items]
        return normalise_frame(pd.concat(frames, ignore_index=True), metrics)


def normalise_frame(frame: pd.DataFrame, metrics: tuple) -> pd.DataFrame:
    """Give the frame the same dtypes whether it was built in memory or read from parts."""
    out = pd.DataFrame({"unit": frame["unit"].to_numpy()})
    time = frame["time"].to_numpy(dtype=np.float64)
    out["time"] = time.astype(np.int64) if np.all(np.mod(time, 1) == 0) else time
    for m in metrics:
        column = frame[m].to_numpy()
        out[m] = column if column.dtype == bool else column.astype(np.float64)
    return out


def _progress_bar(progress: bool | None, total: int):
    """The scoring progress line (:mod:`didmem._progress`): on a terminal, or when asked; None
    when nothing is shown."""
    if total == 0:
        return None
    bar = progress_line(total, "scoring", progress, unit="seq")
    return bar if isinstance(bar, Progress) else None
