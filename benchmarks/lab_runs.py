"""Issue 38: time ``didmem lab --runs R`` (R runs on one corpus, each with its exact truth).

Usage::

    nice -n 15 python benchmarks/lab_runs.py [--runs 3] [--scale demo] [--repeats 1]
        [--workers N] [--keep DIR] [--out benchmarks/results/lab_runs.json]

Each repetition runs ``didmem lab --runs R --out TMP`` (the command a user types, in a fresh
process, so the imports of torch and transformers count) and, with ``--single``, the single
run of the same seed beside it, alternating. It records the wall-clock and CPU time (user +
system, of the child: the lab trains with one thread, so on a machine shared with other jobs
the CPU time is what the wall time would be on an idle one with one worker; the lab's
worker processes count, as they are the command's children), the seconds of each stage
(the summary's last line: with several workers each stage's seconds in its worker, and
``runs`` their wall time), the machine load before and after, and checks the files: a
``run`` column in ``panel.parquet`` and ``truth.parquet`` with ``R`` runs. ``--workers``
passes ``--workers N`` (default: the command's own, one process per run up to the cores);
``--keep DIR`` writes the lab's output to ``DIR`` (replaced) instead of a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _child_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def time_lab(runs: int, scale: str, seed: int, workers: int | None = None,
             keep: str | None = None) -> dict:
    """One fresh ``didmem lab`` command: wall, CPU, stages and a check of its files."""
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(keep) if keep else Path(tmp) / "lab"
        command = [sys.executable, "-m", "didmem.cli", "lab", "--out", str(out), "--seed", str(seed)]
        command += ["--runs", str(runs)] if runs > 1 else []
        command += ["--quick"] if scale == "quick" else []
        command += ["--workers", str(workers)] if workers else []
        command += ["--overwrite"] if keep else []
        load, cpu0, start = os.getloadavg()[0], _child_cpu(), time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        wall, cpu = time.perf_counter() - start, _child_cpu() - cpu0
        stages = next((line for line in done.stdout.splitlines()
                       if line.startswith("seconds:")), "")
        panel = pd.read_parquet(out / "panel.parquet")
        truth = pd.read_parquet(out / "truth.parquet")
        runs_seen = int(panel["run"].nunique()) if "run" in panel else 1
        assert runs_seen == runs and (runs == 1 or truth["run"].nunique() == runs)
        return {"runs": runs, "scale": scale, "seed": seed, "workers": workers,
                "wall_s": round(wall, 1),
                "cpu_s": round(cpu, 1), "load_before": round(load, 2),
                "load_after": round(os.getloadavg()[0], 2), "stages": stages,
                "panel_rows": len(panel), "truth_rows": len(truth)}


def main() -> None:
    from _provenance import provenance

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", choices=("demo", "quick"), default="demo")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--single", action="store_true",
                        help="also time the single run of the same seed, alternating")
    parser.add_argument("--workers", type=int, default=None,
                        help="the lab's --workers (default: its own)")
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="write the lab's output (of the several runs) to DIR, replaced")
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    rows = []
    for _ in range(args.repeats):
        for runs in ([args.runs, 1] if args.single else [args.runs]):
            row = time_lab(runs, args.scale, args.seed, args.workers,
                           args.keep if runs == args.runs else None)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "provenance": provenance()},
                                             indent=1) + "\n")


if __name__ == "__main__":
    main()
