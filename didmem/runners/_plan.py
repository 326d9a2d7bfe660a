"""The scoring plan: the explicit list of work items of a run, printable and saveable."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..backends._instances import Instances
from ..backends._parts import PartStore, time_label

__all__ = ["ScoringPlan"]


@dataclass(frozen=True)
class ScoringPlan:
    """Every work item of a run: (model, checkpoint, shard of instances).

    Build it with :meth:`Runner.plan <didmem.runners.Runner.plan>`; a runner executes the
    items that have no finished part yet.

    Attributes
    ----------
    model : str
        A label of the model (for example ``"pythia-1.4b-deduped"``).
    items : tuple of WorkItem
        Ordered by checkpoint, then by shard.
    metrics : tuple of str
        The metrics each item scores.
    n_instances : int
        Number of instances.
    manifest : dict
        What the parts are computed from (backend settings, instances' fingerprint,
        metrics, shard size, checkpoint sources), as written to ``manifest.json``.
    """

    model: str
    items: tuple
    metrics: tuple
    n_instances: int
    manifest: dict

    @classmethod
    def build(cls, backend, instances: Instances, *, metrics=None, checkpoints=None,
              shard_size=None, model=None, validate: bool = True) -> ScoringPlan:
        """The plan of scoring ``instances`` with ``backend``; validates them first."""
        metrics = backend.resolve_metrics(metrics)
        times = backend.resolve_checkpoints(checkpoints)
        if validate:
            backend.validate(instances, metrics)
        items = backend.work_items(len(instances), times, shard_size)
        manifest = backend.run_manifest(instances, metrics, times, shard_size, items)
        return cls(
            model=model if model is not None else type(backend).__name__,
            items=tuple(items),
            metrics=metrics,
            n_instances=len(instances),
            manifest=manifest,
        )

    @property
    def checkpoints(self) -> tuple:
        """The checkpoints of the plan, ascending."""
        return tuple(dict.fromkeys(it.checkpoint for it in self.items))

    def pending(self, store: PartStore | None) -> list:
        """The items with no finished part in ``store`` (all of them when it is ``None``)."""
        return [it for it in self.items if store is None or not store.is_done(it)]

    def to_dict(self) -> dict:
        """The plan as JSON-serialisable data."""
        return {
            "model": self.model,
            "n_instances": self.n_instances,
            "metrics": list(self.metrics),
            "manifest": self.manifest,
            "items": [
                {
                    "model": self.model,
                    "checkpoint": time_label(it.checkpoint),
                    "source": self.manifest["sources"][time_label(it.checkpoint)],
                    "shard": it.shard,
                    "start": it.start,
                    "stop": it.stop,
                    "part": it.part_name,
                }
                for it in self.items
            ],
        }

    def save(self, path) -> Path:
        """Write the plan as JSON to ``path`` (atomically) and return the path."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1))
        os.replace(tmp, path)
        return path

    def summary(self) -> str:
        """A short human-readable description: counts, then one line per checkpoint."""
        shards = len(self.items) // max(1, len(self.checkpoints))
        lines = [(
            f"scoring plan of {self.model}: {len(self.items)} work items = "
            f"{len(self.checkpoints)} checkpoints x {shards} shards of {self.n_instances} "
            f"instances; metrics {', '.join(self.metrics)}"
        )]
        for c in self.checkpoints:
            shards = [it for it in self.items if it.checkpoint == c]
            source = self.manifest["sources"][time_label(c)]
            lines.append(f"  checkpoint {time_label(c)} ({source}): {len(shards)} shards")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()
