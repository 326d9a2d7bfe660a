"""Work items and the atomic parquet part store that makes scoring resumable.

A run of :meth:`OutcomeBackend.score` is cut into work items, one per (checkpoint, shard of
instances). Each finished item is written as one parquet part: first under a temporary name
in the same directory, then renamed with :func:`os.replace`, which is atomic on POSIX and
Windows. A part therefore either exists complete or not at all, and a re-run skips the items
whose part exists. A ``manifest.json`` records what the parts were computed from, so a re-run
with other instances, metrics or settings fails instead of mixing results.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..errors import OutputFileError, ParameterError

__all__ = ["WorkItem", "PartStore", "time_label", "write_parquet_atomic"]


def write_parquet_atomic(frame: pd.DataFrame, final: Path) -> None:
    """Write ``frame`` to ``final`` as parquet, atomically: a temporary file beside it, then a
    rename, so that a reader (or a run killed meanwhile) never sees a half-written part."""
    tmp = final.with_name(f".{final.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()

_MANIFEST = "manifest.json"
_FORMAT = 1


def time_label(time) -> str:
    """A file-name-safe label of a checkpoint time: ``1000`` for ints, ``0.5`` for floats."""
    if float(time).is_integer():
        return str(int(time))
    return repr(float(time)).replace("-", "m")


@dataclass(frozen=True)
class WorkItem:
    """One unit of scoring work: a shard of instances at one checkpoint.

    Attributes
    ----------
    checkpoint : int or float
        The checkpoint's time (its training step).
    shard : int
        Index of the shard of instances.
    start, stop : int
        The shard holds instances ``start .. stop-1`` in the order they were given.
    """

    checkpoint: float
    shard: int
    start: int
    stop: int

    @property
    def n_instances(self) -> int:
        """Number of instances in the shard."""
        return self.stop - self.start

    @property
    def part_name(self) -> str:
        """File name of the item's parquet part."""
        return f"part-t{time_label(self.checkpoint)}-s{self.shard:06d}.parquet"


class PartStore:
    """A directory of parquet parts, one per finished :class:`WorkItem`.

    Parameters
    ----------
    directory : str or os.PathLike
        Where the parts and ``manifest.json`` live; created if missing.
    manifest : dict
        JSON-serialisable description of the run (instances' fingerprint, metrics, shard
        size, backend settings) and, under ``"sources"``, one entry per checkpoint time.

    Raises
    ------
    ParameterError
        The directory already holds parts of a run with a different manifest. Checkpoints
        may be added to a run; any other change needs a new directory.
    """

    def __init__(self, directory, manifest: dict) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        manifest = json.loads(json.dumps({"format": _FORMAT, **manifest}, sort_keys=True))
        path = self.directory / _MANIFEST
        if path.exists():
            old = self._read_manifest(path)
            self._check_compatible(old, manifest)
            manifest["sources"] = {**old.get("sources", {}), **manifest.get("sources", {})}
        self.manifest = manifest
        self._write_json(path, manifest)

    def _read_manifest(self, path: Path) -> dict:
        """The manifest of the earlier run in the directory, or an error naming the file."""
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
            problem = None if isinstance(old, dict) and isinstance(old.get("sources", {}), dict) \
                else f"it holds a JSON {type(old).__name__}, not a manifest's object"
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problem = " ".join(str(exc).split()) or type(exc).__name__
        if problem is not None:
            raise OutputFileError(
                f"The manifest {str(path)!r} of an earlier run in this output directory cannot "
                f"be read ({problem}): it was cut short or changed outside didmem. Delete the "
                "directory's manifest.json and parts (or use a new output directory) and run "
                "again."
            )
        return old

    def _check_compatible(self, old: dict, new: dict) -> None:
        keys = sorted((set(old) | set(new)) - {"sources"})
        differ = [k for k in keys if old.get(k) != new.get(k)]
        old_src, new_src = old.get("sources", {}), new.get("sources", {})
        differ += [
            f"sources[{t}]" for t in sorted(set(old_src) & set(new_src)) if old_src[t] != new_src[t]
        ]
        if differ:
            raise ParameterError(
                f"The output directory {str(self.directory)!r} holds parts of a different run: "
                f"{', '.join(differ)} differ from its manifest.json. Use a new out_dir, or "
                "delete the old parts to recompute them."
            )

    def path(self, item: WorkItem) -> Path:
        """Where the part of ``item`` lives."""
        return self.directory / item.part_name

    def is_done(self, item: WorkItem) -> bool:
        """Whether the part of ``item`` has been written completely."""
        return self.path(item).exists()

    def write(self, item: WorkItem, frame: pd.DataFrame) -> None:
        """Write the part of ``item`` atomically (temporary file, then rename)."""
        write_parquet_atomic(frame, self.path(item))

    def read(self, item: WorkItem) -> pd.DataFrame:
        """Read the part of ``item``.

        Raises
        ------
        OutputFileError
            The part cannot be read (cut short outside didmem's atomic writes, say by a
            copy or a full disk); the message names the file to delete.
        """
        path = self.path(item)
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise OutputFileError(
                f"The part file {str(path)!r} cannot be read ({reason}). Delete it and run "
                "again: the run scores that work item anew and keeps the other parts."
            ) from None

    @staticmethod
    def _write_json(path: Path, payload: dict) -> None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(json.dumps(payload, indent=1, sort_keys=True))
        os.replace(tmp, path)
