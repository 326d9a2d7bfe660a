"""The tracker's folder: one panel part per evaluation, held-back rows, and the state.

Layout (``didmem estimate FOLDER`` and :meth:`didmem.Panel.scan` read the data files; names
that start with ``_`` or ``.`` are not data, as for pyarrow and Spark)::

    FOLDER/part-t{step}.parquet     the panel part of the evaluation at ``step``
    FOLDER/_held/t{step}.parquet    scores at ``step`` of instances whose cohort is not known yet
    FOLDER/_tracker.json            the tracker's state (evaluations, the tracked order)

A panel part holds the columns ``unit``, ``time``, ``cohort`` and one per metric. A unit's
cohort must be the same in every file, and it is known only once its batch has been trained
on; so the scores of an instance not yet trained are held back under ``_held/`` and enter the
panel, all at once, in the part of the evaluation that is its cohort. The folder is therefore
always a balanced panel of the instances whose cohort is known (validation instances and those
trained so far) over the evaluations so far.

Every file is written under a temporary name and renamed (:func:`os.replace`, atomic), the
state last; files of an evaluation that the state does not list (a kill between the part and
the state) are removed when the tracker opens the folder again.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import numpy as np
import pandas as pd

from ..backends._parts import time_label, write_parquet_atomic
from ..errors import OutputFileError

__all__ = ["TrackerFolder", "STATE_FILE"]

STATE_FILE = "_tracker.json"
_HELD = "_held"


def _step_of(name: str, prefix: str) -> float | None:
    """The step in a file name ``{prefix}{step}.parquet``, or None for another name."""
    if not (name.startswith(prefix) and name.endswith(".parquet")):
        return None
    label = name[len(prefix):-len(".parquet")].replace("m", "-")
    try:
        return float(label)
    except ValueError:
        return None


class TrackerFolder:
    """Reads and writes the files of one tracker's folder (see the module notes)."""

    def __init__(self, path) -> None:
        self.path = Path(path)

    # ------------------------------------------------------------------ names
    def part(self, step) -> Path:
        return self.path / f"part-t{time_label(step)}.parquet"

    def held(self, step) -> Path:
        return self.path / _HELD / f"t{time_label(step)}.parquet"

    @property
    def state_path(self) -> Path:
        return self.path / STATE_FILE

    # ------------------------------------------------------------------ state
    def read_state(self) -> dict | None:
        """The saved state, or None when the folder has none."""
        path = self.state_path
        if not path.exists():
            return None
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise OutputFileError(
                f"The tracker state {str(path)!r} cannot be read ({exc}); it was changed "
                "outside didmem. Use a new folder, or restore the file.") from None
        if not isinstance(state, dict) or "evaluations" not in state:
            raise OutputFileError(f"The file {str(path)!r} is not a tracker state.")
        return state

    def write_state(self, state: dict) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(f".{STATE_FILE}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(json.dumps(state, sort_keys=True))
        os.replace(tmp, self.state_path)

    def data_steps(self) -> list:
        """Steps of the panel parts and held files in the folder."""
        steps = []
        if self.path.is_dir():
            steps += [s for p in self.path.iterdir() if (s := _step_of(p.name, "part-t")) is not None]
        held = self.path / _HELD
        if held.is_dir():
            steps += [s for p in held.iterdir() if (s := _step_of(p.name, "t")) is not None]
        return sorted(set(steps))

    def prune(self, evaluations) -> list:
        """Remove the files of evaluations not in ``evaluations`` and leftover temporary
        files; return the steps removed."""
        keep = {float(s) for s in evaluations}
        removed = []
        for folder, prefix in ((self.path, "part-t"), (self.path / _HELD, "t")):
            if not folder.is_dir():
                continue
            for p in folder.iterdir():
                if p.name.startswith(".") and p.name.endswith(".tmp"):
                    p.unlink()
                    continue
                step = _step_of(p.name, prefix)
                if step is not None and step not in keep:
                    p.unlink()
                    removed.append(step)
        return sorted(set(removed))

    # ------------------------------------------------------------------ data
    def write_part(self, step, frame: pd.DataFrame) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(frame, self.part(step))
        return self.part(step)

    def write_held(self, step, frame: pd.DataFrame) -> None:
        (self.path / _HELD).mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(frame, self.held(step))

    def held_rows(self, steps, units: np.ndarray) -> pd.DataFrame | None:
        """The held-back rows of ``units`` at ``steps`` (every such row must be there)."""
        frames = []
        for step in steps:
            path = self.held(step)
            try:
                frame = pd.read_parquet(path)
            except (OSError, ValueError) as exc:
                raise OutputFileError(
                    f"The held-back scores {str(path)!r} of the evaluation at step "
                    f"{time_label(step)} cannot be read ({' '.join(str(exc).split())}); the "
                    "folder was changed outside didmem.") from None
            frames.append(frame[frame["unit"].isin(units)])
            if len(frames[-1]) != len(units):
                raise OutputFileError(
                    f"The held-back scores {str(path)!r} lack {len(units) - len(frames[-1])} "
                    "of the instances whose cohort is now known; the folder was changed "
                    "outside didmem.")
        return pd.concat(frames, ignore_index=True) if frames else None
