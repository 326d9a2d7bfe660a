"""The output directory of a lab run: layout, guards against clobbering, manifest.

A run marks the directory as in progress first and writes ``manifest.json`` last, so a
directory whose manifest exists is complete. A directory that holds another run's manifest,
or files that are not a lab run's, is refused unless ``overwrite=True``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pandas as pd

from ..errors import OutputFileError, ParameterError

__all__ = ["LabDirectory", "MANIFEST", "IN_PROGRESS", "FORMAT_VERSION"]

MANIFEST = "manifest.json"
IN_PROGRESS = ".lab-in-progress"
FORMAT_VERSION = 2
#: Every entry a run may write (the manifest last).
ENTRIES = (
    "checkpoints", "twin", "exact", "subsets", "data_order.parquet", "instances.parquet",
    "sample.parquet", "panel.parquet", "truth.parquet", "truth_units.parquet",
    "truth_draws.parquet", "truth_controls.parquet", "twin_scores.parquet", "exact_check.parquet", "membership.parquet",
    "subset_scores.parquet", "losses.parquet",
    "study.toml", "study_instances.parquet", "study_order.parquet", "runs",
    IN_PROGRESS, MANIFEST,
)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class LabDirectory:
    """One run's output directory.

    Parameters
    ----------
    path : path-like
        The directory (created if missing).
    """

    def __init__(self, path):
        self.path = Path(path)

    def manifest(self) -> dict | None:
        """The manifest of a complete run here, or None."""
        path = self.path / MANIFEST
        if not path.is_file():
            return None
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            problem = None if isinstance(manifest, dict) and isinstance(
                manifest.get("settings"), dict) else "it is not an object with the run's settings"
        except (UnicodeDecodeError, ValueError) as exc:
            problem = " ".join(str(exc).split())
        if problem is not None:
            raise OutputFileError(
                f"The lab run's manifest {str(path)!r} cannot be read ({problem}): the run was "
                "cut short or the file changed. Run it again with overwrite=True (--overwrite), "
                "or choose another directory."
            )
        return manifest

    def is_complete_run_of(self, settings: dict) -> bool:
        """Whether a complete run with exactly ``settings`` is here, its files intact."""
        manifest = self.manifest()
        if manifest is None or manifest.get("settings") != settings:
            return False
        return all((self.path / name).is_file() for name in manifest.get("files", {}))

    def prepare(self, settings: dict, overwrite: bool) -> None:
        """Make the directory ready for a new run, or refuse.

        Raises
        ------
        ParameterError
            If the directory holds a different run, or files that are not a lab run's, and
            ``overwrite`` is False.
        """
        path = self.path
        if path.exists() and not path.is_dir():
            raise ParameterError(f"The output path {str(path)!r} exists and is not a directory.")
        if path.is_dir() and any(path.iterdir()) and not overwrite:
            manifest = self.manifest()
            if manifest is not None:
                old = manifest.get("settings", {})
                changed = sorted(k for k in set(old) | set(settings)
                                 if old.get(k) != settings.get(k))
                if not changed:
                    missing = sorted(name for name in manifest.get("files", {})
                                     if not (path / name).is_file())
                    raise ParameterError(
                        f"The output directory {str(path)!r} holds a lab run with these "
                        f"settings whose files are incomplete (missing: {missing[:8]}"
                        + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
                        + "). Pass overwrite=True (--overwrite) to run it again, or choose "
                        "another directory."
                    )
                raise ParameterError(
                    f"The output directory {str(path)!r} holds a different lab run (settings "
                    f"that differ: {changed[:8]}). Choose another directory, or pass "
                    "overwrite=True (--overwrite) to replace it."
                )
            if not (path / IN_PROGRESS).exists():
                names = sorted(p.name for p in path.iterdir())
                raise ParameterError(
                    f"The output directory {str(path)!r} is not empty and holds no lab run "
                    f"(it has {names[:5]}). Choose another directory, or pass overwrite=True "
                    "(--overwrite) to write into it."
                )
            # an interrupted lab run: safe to replace
        self.clear()
        path.mkdir(parents=True, exist_ok=True)
        (path / IN_PROGRESS).write_text("a didmem lab run is writing here\n", encoding="utf-8")

    def clear(self) -> None:
        """Remove what a lab run writes (manifest first); leave other files alone."""
        if not self.path.is_dir():
            return
        for name in (MANIFEST,) + ENTRIES:
            target = self.path / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()

    def write_parquet(self, name: str, frame: pd.DataFrame) -> Path:
        """Write a table with pyarrow, without the index."""
        target = self.path / name
        frame.to_parquet(target, index=False, engine="pyarrow")
        return target

    def finish(self, manifest: dict) -> Path:
        """Hash every file, write ``manifest.json`` last, and drop the in-progress mark."""
        marker = self.path / IN_PROGRESS
        if marker.exists():
            marker.unlink()
        files = {}
        for entry in sorted(ENTRIES):
            top = self.path / entry
            if entry == MANIFEST or not top.exists():
                continue
            paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
            for full in paths:
                files[full.relative_to(self.path).as_posix()] = _sha256(full)
        files = dict(sorted(files.items()))
        manifest = dict(manifest, files=files)
        target = self.path / MANIFEST
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, target)
        return target
