"""The resumable loop over lab seeds shared by the lab's Monte Carlo scripts.

Each seed's record is written atomically to ``RESULTS/{scale}_seed{s}.json`` as soon as it is
done, so a stopped run resumes where it stopped and ``--summarise`` reads what is there.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path


def load_records(results: Path, scale: str, seeds) -> list:
    """The records of ``seeds`` already in ``results`` (missing seeds are left out)."""
    out = []
    for seed in seeds:
        path = Path(results) / f"{scale}_seed{seed}.json"
        if path.is_file():
            out.append(json.loads(path.read_text()))
    return out


def run_seeds(one_seed, results: Path, scale: str, seeds, *, header: str = "") -> list:
    """Run ``one_seed(seed)`` (a dict) for every seed without a record yet, writing each record
    as it comes; return the records of ``seeds``."""
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"{scale} scale{header}", flush=True)
    for seed in seeds:
        path = results / f"{scale}_seed{seed}.json"
        if path.is_file():
            continue
        clock = time.perf_counter()
        record = one_seed(seed)
        record["seconds"] = time.perf_counter() - clock
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(path)
        print(f"seed {seed}: {record['seconds']:.0f} s", flush=True)
    return load_records(results, scale, seeds)
