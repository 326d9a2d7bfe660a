"""Time the command line against diff-diff's fit, side by side in one run (issue 29).

Every measurement runs in a fresh process, in turn, on the same paper-scale panel
(``paper_scale.PAPER``: 95 cohorts x 150 + 2,000 never-treated units, 96 periods, written
once as parquet), so their order and the machine's load are shared:

* ``import pandas`` and ``import didmem``: wall time of a fresh interpreter importing it;
* ``didmem --help`` and ``didmem COMMAND --help`` for every subcommand;
* ``didmem estimate`` on the panel (1,000 draws, the band, the summary and the results
  file): wall time and peak memory of the whole process;
* diff-diff's ``CallawaySantAnna.fit`` alone (its own clock inside its process), and
  didmem's cold in-process fit (panel + fit + frame in a fresh process), both through
  the worker of ``paper_scale.py``, with the peak memory of its whole process. Both clocks
  start after the tool's imports (``import diff_diff`` loads scipy and its own modules;
  for didmem the worker imports the fit's modules, numba and scipy among them, which
  ``import didmem`` leaves for first use); "cold fit with imports" adds them back;
* ``didmem report`` on the results file.

Each row has the median, minimum and maximum over ``--repeats`` rounds (every round runs
every measurement once) and the 1-minute load average around it. The rows go to a JSON file
with the commit, date and machine (``--json``); ``--append-results`` also appends them as a
Markdown section to ``benchmarks/RESULTS.md``.

Examples
--------
A smoke run on a small panel::

    python benchmarks/cli_speed.py --quick --repeats 1

The figures in RESULTS.md::

    python benchmarks/cli_speed.py --repeats 3 --json benchmarks/results/cli_speed.json \\
        --append-results
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

from _provenance import provenance, write_rows  # noqa: E402
from paper_scale import PAPER, QUICK, machine, save_panel, simulate  # noqa: E402

ESTIMATE_FLAGS = ["--outcome", "y", "--never-treated", "0", "--n-bootstrap", "1000"]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# A small process that runs one command and reports its wall time and peak memory: a child
# inherits the peak resident size of the process it is spawned from (Linux folds the parent's
# high-water mark into the child's at exec), so the commands are spawned from this one, which
# imports nothing heavy, and not from the benchmark, which holds the panel.
_LAUNCHER = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.run(json.loads(sys.argv[1]), capture_output=True)
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"wall_s": wall, "peak_mb": peak, "code": proc.returncode,
                  "stdout": proc.stdout.decode()[-4000:], "stderr": proc.stderr.decode()[-2000:]}))
"""


def timed(cmd: list[str], cwd: Path) -> dict:
    """Run ``cmd`` in a fresh process: wall seconds, peak resident MB, exit status, stdout."""
    launcher = [sys.executable, "-S", "-c", _LAUNCHER, json.dumps(cmd)]
    proc = subprocess.run(launcher, cwd=cwd, env=_env(), capture_output=True, text=True,
                          check=False)
    try:
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": f"launcher failed: {proc.stderr.strip()[-300:]}"}
    out = {"wall_s": res["wall_s"], "peak_mb": res["peak_mb"], "stdout": res["stdout"]}
    if res["code"] != 0:
        tail = res["stderr"].strip().splitlines()
        out["error"] = f"exit {res['code']}: {tail[-1] if tail else ''}"
    return out


def _dropped(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "stdout"}


def measurements(panel: Path, work: Path) -> dict:
    """Name -> command of every command-line measurement (see the module notes)."""
    from didmem.cli import SUBCOMMANDS

    py = sys.executable
    cli = [py, "-m", "didmem.cli"]
    out = {"import pandas": [py, "-c", "import pandas"],
           "import didmem": [py, "-c", "import didmem"],
           "didmem --help": cli + ["--help"]}
    for name in SUBCOMMANDS:
        out[f"didmem {name} --help"] = cli + [name, "--help"]
    out["didmem estimate"] = cli + ["estimate", str(panel), "--out",
                                    str(work / "result.parquet"), *ESTIMATE_FLAGS]
    out["didmem report"] = cli + ["report", str(work / "result.parquet"), "--out",
                                  str(work / "report.html")]
    return out


def one_round(panel_parquet: Path, panel_npz: Path, work: Path) -> dict:
    """Every measurement once, in order; the fits by the worker of ``paper_scale.py``."""
    rows = {}
    commands = measurements(panel_parquet, work)
    report = commands.pop("didmem report")
    for name, cmd in commands.items():
        rows[name] = {**_dropped(timed(cmd, work)), "load": os.getloadavg()[0]}
    rows["didmem report"] = {**_dropped(timed(report, work)), "load": os.getloadavg()[0]}
    for tool, key in (("diff-diff", "diff-diff fit"), ("didmem", "didmem cold fit")):
        cmd = [sys.executable, str(HERE / "paper_scale.py"), "--worker", tool, "--data",
               str(panel_npz), "--n-bootstrap", "1000", "--seed", "0", "--control-group",
               "never_treated", "--est-method", "reg"]
        res = timed(cmd, work)
        lines = [ln for ln in res.get("stdout", "").splitlines() if ln.startswith("RESULT ")]
        if "error" in res or not lines:
            rows[key] = {"error": res.get("error", "no result"), "load": os.getloadavg()[0]}
            continue
        fit = json.loads(lines[-1][len("RESULT "):])
        seconds = fit["fit_s"] if tool == "diff-diff" else fit["setup_s"] + fit["fit_s"]
        rows[key] = {"wall_s": seconds, "peak_mb": res["peak_mb"],
                     "load": fit["load_average"]}
        if tool == "didmem":  # the same, with the imports of numba and scipy it needs
            rows[key + " with imports"] = {"wall_s": seconds + fit["import_s"],
                                           "peak_mb": res["peak_mb"],
                                           "load": fit["load_average"]}
    return rows


def summarise(rounds: list[dict]) -> dict:
    """Median, min and max of each measurement over the rounds; the loads seen."""
    out = {}
    for name in rounds[0]:
        ok = [r[name] for r in rounds if "error" not in r[name]]
        if not ok:
            out[name] = {"error": rounds[-1][name]["error"]}
            continue
        walls = [r["wall_s"] for r in ok]
        out[name] = {"median_s": statistics.median(walls), "min_s": min(walls),
                     "max_s": max(walls), "peak_mb": max(r.get("peak_mb", float("nan"))
                                                         for r in ok),
                     "loads": [round(r["load"], 1) for r in ok], "n": len(ok)}
    return out


def ratios(summary: dict) -> dict:
    """The issue's targets as ratios of medians."""
    med = {k: v.get("median_s", float("nan")) for k, v in summary.items()}
    helps = [v for k, v in med.items() if k.endswith("--help")]
    return {
        "import didmem / import pandas": med["import didmem"] / med["import pandas"],
        "slowest --help (s)": max(helps),
        "diff-diff fit / didmem estimate": med["diff-diff fit"] / med["didmem estimate"],
        "diff-diff fit / didmem cold fit": med["diff-diff fit"] / med["didmem cold fit"],
        "diff-diff fit / didmem cold fit with imports": (med["diff-diff fit"]
                                                         / med["didmem cold fit with imports"]),
    }


def markdown(summary: dict, ratio: dict, info: dict, command: str) -> str:
    """The rows as a Markdown section for RESULTS.md."""
    prov = info["provenance"]
    lines = [f"## Command-line speed (issue 29), {prov['date']}", "",
             f"`{command}` on commit `{(prov['commit'] or '?')[:7]}`"
             f"{' (with uncommitted changes)' if prov['dirty'] else ''}; machine: "
             f"{info['machine']['cores']}-core {info['machine']['cpu']}, "
             f"{info['machine']['ram_gb']} GB; panel: {info['panel']}. Each row: median "
             f"[min-max] over {info['repeats']} rounds, every measurement in a fresh process, "
             "in turn; the load average (1 min) at each; diff-diff's row is its fit alone.", "",
             "| measurement | median s | min-max s | peak MB | load |",
             "|---|---:|---:|---:|---|"]
    for name, row in summary.items():
        if "error" in row:
            lines.append(f"| {name} | {row['error']} | | | |")
            continue
        lines.append(f"| {name} | {row['median_s']:.3f} | {row['min_s']:.3f}-{row['max_s']:.3f}"
                     f" | {row['peak_mb']:.0f} | {', '.join(map(str, row['loads']))} |")
    lines += ["", "| target (issue 29) | value |", "|---|---:|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in ratio.items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small panel (smoke test)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (default: 3)")
    parser.add_argument("--json", type=Path, help="write the rows with provenance here")
    parser.add_argument("--append-results", action="store_true",
                        help="append the rows to benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    spec = QUICK if args.quick else PAPER
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        df = simulate(spec)
        df.to_parquet(work / "panel.parquet", index=False)
        save_panel(df, work / "panel.npz")
        del df
        rounds = []
        for r in range(args.repeats):
            rounds.append(one_round(work / "panel.parquet", work / "panel.npz", work))
            print(f"round {r + 1}: " + ", ".join(
                f"{k} {v.get('wall_s', float('nan')):.2f}s" for k, v in rounds[-1].items()),
                file=sys.stderr)
    summary = summarise(rounds)
    ratio = ratios(summary)
    info = {"provenance": provenance(), "machine": machine(), "repeats": args.repeats,
            "panel": f"{spec.n_cohorts} cohorts x {spec.units_per_cohort} + "
                     f"{spec.n_never_treated} never-treated, {spec.n_periods} periods"}
    command = "python benchmarks/cli_speed.py " + " ".join(argv if argv is not None
                                                            else sys.argv[1:])
    text = markdown(summary, ratio, info, command.strip())
    print(text)
    if args.json:
        write_rows(args.json, {"summary": summary, "ratios": ratio, "rounds": rounds,
                               "machine": info["machine"], "panel": info["panel"],
                               "command": command.strip()})
    if args.append_results:
        with open(HERE / "RESULTS.md", "a") as fh:
            fh.write("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
