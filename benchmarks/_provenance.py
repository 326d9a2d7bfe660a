"""Where a benchmark result comes from: the commit, the date and the machine.

Every script that writes a result file puts :func:`provenance` in it, so a figure can be
traced to the code that produced it (``dirty`` is true when the working tree had changes).
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=_ROOT, capture_output=True, text=True,
                             timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def provenance() -> dict:
    """The commit (with ``dirty``), UTC date, machine, cores and Python of this run."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": None if status is None else bool(status),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
    }


def write_rows(path, rows) -> None:
    """Write ``rows`` (JSON-serialisable) with this run's :func:`provenance` to ``path``."""
    import json

    with open(path, "w") as fh:
        json.dump({"provenance": provenance(), "rows": rows}, fh, indent=1)


def add_rows(out: list, study, json_path=None) -> list:
    """Run ``study()`` (a list of JSON-serialisable rows), stamp each row with the seconds it
    took, print each as a JSON line, append them to ``out`` and, with ``json_path``, rewrite
    that file with every row so far (:func:`write_rows`), so a stopped run keeps what it did."""
    import json
    import time

    start = time.perf_counter()
    rows = study()
    for row in rows:
        row["seconds"] = round(time.perf_counter() - start, 1)
        print(json.dumps(row), flush=True)
    out.extend(rows)
    if json_path:
        write_rows(json_path, out)
    return rows
