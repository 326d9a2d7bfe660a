"""Time didmem against other Callaway & Sant'Anna implementations at the paper's scale.

The paper-scale panel (Lesci et al. 2024) has 95 cohorts of 150 instances each plus 2,000
never-treated instances, observed at 96 checkpoints; cohort ``g`` runs over periods 2..96, so
every cohort has at least one pre-period. This script builds that balanced panel once, writes
it to a temporary file, and times each tool on the *same* panel in its own fresh Python
process, so that the peak resident memory (``ru_maxrss`` of that process) belongs to that tool
alone. Every tool runs with the same settings: never-treated control group, varying base
period, no covariates, no anticipation, a 1,000-draw multiplier bootstrap and a simultaneous
(sup-t) band where the tool offers one.

Run ``python benchmarks/paper_scale.py --help`` for the options; ``benchmarks/README.md``
explains the output and ``benchmarks/RESULTS.md`` records the figures measured so far.

Examples
--------
A smoke run on a small panel (seconds)::

    python benchmarks/paper_scale.py --quick

The full table recorded in RESULTS.md::

    python benchmarks/paper_scale.py --tools didmem,csdid,diff-diff,differences \\
        --differences-python /path/to/venv/bin/python --json bench.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _provenance import provenance

TOOLS = ("didmem", "csdid", "diff-diff", "differences")
_DIST_NAMES = {
    "didmem": "didmem",
    "csdid": "csdid",
    "diff-diff": "diff-diff",
    "differences": "differences",
}
# What a tool's "import" loads before its clock starts. ``import didmem`` is lazy; the fit's
# modules (numba, scipy) are imported here, as ``import diff_diff`` imports its own, so that
# "fit" means the same for every tool; the import row shows what they cost.
_IMPORT_NAMES = {
    "didmem": ("didmem", "didmem.estimators.did", "didmem.inference.cell_inference"),
    "csdid": "csdid.att_gt",  # csdid's package __init__ is empty
    "diff-diff": "diff_diff",
    "differences": "differences",
}


# --------------------------------------------------------------------------------------------
# The panel
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PanelSpec:
    """Shape and seed of a simulated staggered panel.

    Parameters
    ----------
    n_cohorts : int
        Number of treated cohorts. Cohort ``k`` (``k = 0..n_cohorts-1``) is first treated in
        period ``first_cohort + k * cohort_spacing``.
    units_per_cohort : int
        Units in each treated cohort.
    n_never_treated : int
        Never-treated units (cohort code ``0`` in the table, as in R ``did``).
    n_periods : int
        Periods ``1..n_periods``.
    first_cohort : int
        The first treated period; at least 2 so that every cohort has a pre-period.
    cohort_spacing : int
        Periods between consecutive cohorts.
    seed : int
        Seed of :func:`numpy.random.default_rng`.
    """

    n_cohorts: int = 95
    units_per_cohort: int = 150
    n_never_treated: int = 2000
    n_periods: int = 96
    first_cohort: int = 2
    cohort_spacing: int = 1
    seed: int = 20240101

    def __post_init__(self) -> None:
        last = self.first_cohort + (self.n_cohorts - 1) * self.cohort_spacing
        if self.first_cohort < 2 or last > self.n_periods:
            raise ValueError(
                f"Cohorts must lie in periods 2..{self.n_periods}; this spec puts them in "
                f"{self.first_cohort}..{last}."
            )
        if min(self.n_cohorts, self.units_per_cohort, self.n_never_treated) < 1:
            raise ValueError("n_cohorts, units_per_cohort and n_never_treated must be >= 1.")

    @property
    def n_units(self) -> int:
        """Total number of units."""
        return self.n_cohorts * self.units_per_cohort + self.n_never_treated

    @property
    def cohorts(self) -> np.ndarray:
        """Treated cohorts (first treated period of each), ascending."""
        return self.first_cohort + self.cohort_spacing * np.arange(self.n_cohorts)

    def scaled(self, units: float = 1.0, periods: int = 1) -> PanelSpec:
        """The same design with ``units`` times the units and ``periods`` times the periods.

        Parameters
        ----------
        units : float
            Multiplier of ``units_per_cohort`` and ``n_never_treated``.
        periods : int
            Multiplier of ``n_periods`` and of ``cohort_spacing``; the cohorts keep their
            number and are spread over the longer window.

        Returns
        -------
        PanelSpec
        """
        return dataclasses.replace(
            self,
            units_per_cohort=round(self.units_per_cohort * units),
            n_never_treated=round(self.n_never_treated * units),
            n_periods=self.n_periods * periods,
            first_cohort=(self.first_cohort - 1) * periods + 1,
            cohort_spacing=self.cohort_spacing * periods,
        )


PAPER = PanelSpec()
QUICK = PanelSpec(n_cohorts=8, units_per_cohort=40, n_never_treated=120, n_periods=10)
# `differences` at full scale takes several minutes: run it on a quarter of the periods.
QUARTER = PanelSpec(n_cohorts=23, units_per_cohort=150, n_never_treated=2000, n_periods=24)


def true_effect(event_time: np.ndarray) -> np.ndarray:
    """The simulated treatment effect at event time ``e = t - g`` (zero before ``g``).

    An instantaneous jump of 1.0 that decays towards a residual 0.25 with a half-life of
    about 3.5 periods, like a memorisation profile.

    Parameters
    ----------
    event_time : numpy.ndarray
        Event times ``t - g``.

    Returns
    -------
    numpy.ndarray
    """
    e = np.asarray(event_time, dtype=float)
    effect = 0.25 + 0.75 * np.exp(-np.clip(e, 0, None) / 5.0)
    return np.where(e >= 0, effect, 0.0)


def simulate(spec: PanelSpec) -> pd.DataFrame:
    """Build the balanced long panel described by ``spec``.

    ``y[i, t] = a_i + b_t + true_effect(t - g_i) + e_it`` with unit effects
    ``a_i ~ N(0, 1)``, a smooth time trend ``b_t = -log(t)`` plus ``N(0, 0.1^2)`` shocks and
    noise ``e_it ~ N(0, 1)``; the effect is zero for never-treated units.

    Parameters
    ----------
    spec : PanelSpec

    Returns
    -------
    pandas.DataFrame
        Columns ``unit`` (int64), ``time`` (int64, ``1..n_periods``), ``cohort`` (int64, ``0``
        for never-treated units) and ``y`` (float64), sorted by unit then time.
    """
    rng = np.random.default_rng(spec.seed)
    n, t_count = spec.n_units, spec.n_periods
    cohort = np.concatenate(
        [np.repeat(spec.cohorts, spec.units_per_cohort), np.zeros(spec.n_never_treated, int)]
    ).astype(np.int64)
    times = np.arange(1, t_count + 1, dtype=np.int64)
    unit_effect = rng.normal(size=n)
    time_effect = -np.log(times) + rng.normal(scale=0.1, size=t_count)
    y = unit_effect[:, None] + time_effect[None, :] + rng.normal(size=(n, t_count))
    treated = cohort > 0
    y[treated] += true_effect(times[None, :] - cohort[treated, None])
    return pd.DataFrame(
        {
            "unit": np.repeat(np.arange(1, n + 1, dtype=np.int64), t_count),
            "time": np.tile(times, n),
            "cohort": np.repeat(cohort, t_count),
            "y": y.ravel(),
        }
    )


def save_panel(df: pd.DataFrame, path: Path) -> None:
    """Write the panel's columns to an uncompressed ``.npz`` file."""
    np.savez(path, **{c: df[c].to_numpy() for c in df.columns})


def load_panel(path: Path) -> pd.DataFrame:
    """Read a panel written by :func:`save_panel`."""
    with np.load(path) as z:
        return pd.DataFrame({c: z[c] for c in z.files})


# --------------------------------------------------------------------------------------------
# One tool, in its own process
# --------------------------------------------------------------------------------------------
def _peak_rss_mb() -> float:
    # Linux reports ru_maxrss in KiB, macOS in bytes.
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def _current_rss_mb() -> float:
    try:
        import psutil
    except ImportError:
        return float("nan")
    return psutil.Process().memory_info().rss / 2**20


class _Clock:
    """Wall-clock and process CPU time (all threads) between successive ``lap`` calls."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        out = (wall - self.wall, cpu - self.cpu)
        self.wall, self.cpu = wall, cpu
        return out


def _timings(setup, fit) -> dict:
    return {"setup_s": setup[0], "setup_cpu_s": setup[1], "fit_s": fit[0], "fit_cpu_s": fit[1]}


def _cells(cohort, time_, estimate, std_error) -> dict:
    order = np.lexsort((np.asarray(time_, float), np.asarray(cohort, float)))
    return {
        "cohort": np.asarray(cohort, float)[order],
        "time": np.asarray(time_, float)[order],
        "estimate": np.asarray(estimate, float)[order],
        "std_error": np.asarray(std_error, float)[order],
    }


def _run_didmem(df, n_bootstrap, seed, control_group, warm, est_method):
    import didmem

    clock = _Clock()
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         never_treated=0)
    setup = clock.lap()
    est = didmem.DiDEstimator(control_group=control_group, base_period="varying",
                              anticipation=0, n_bootstrap=n_bootstrap, seed=seed)
    res = est.fit(panel)
    frame = res.to_frame()
    out = _timings(setup, clock.lap())
    out["critical_value"] = float(getattr(res, "critical_value", float("nan")))
    if warm:
        clock.lap()
        est.fit(panel).to_frame()
        out["warm_fit_s"], out["warm_fit_cpu_s"] = clock.lap()
    out["cells"] = _cells(frame["cohort"], frame["time"], frame["estimate"], frame["std_error"])
    return out


def _run_csdid(df, n_bootstrap, seed, control_group, warm, est_method):
    from csdid.att_gt import ATTgt

    cg = {"never_treated": "nevertreated", "not_yet_treated": "notyettreated"}[control_group]
    clock = _Clock()
    # The constructor runs csdid's pre-processing (R's pre_process_did).
    att = ATTgt(yname="y", tname="time", idname="unit", gname="cohort", data=df,
                control_group=cg, cband=n_bootstrap > 0, biters=max(n_bootstrap, 1))
    setup = clock.lap()
    np.random.seed(seed)  # csdid's mboot draws from numpy's global generator
    att.fit(est_method=est_method, base_period="varying", bstrap=n_bootstrap > 0)
    r = att.results
    out = _timings(setup, clock.lap())
    out.update(critical_value=float(r["c"]),
               cells=_cells(r["group"], r["year"], r["att"], r["se"]))
    return out


def _run_diff_diff(df, n_bootstrap, seed, control_group, warm, est_method):
    from diff_diff import CallawaySantAnna

    clock = _Clock()
    est = CallawaySantAnna(control_group=control_group, base_period="varying",
                           estimation_method=est_method, n_bootstrap=n_bootstrap,
                           bootstrap_weights="rademacher", seed=seed, cband=True)
    setup = clock.lap()
    res = est.fit(df, outcome="y", unit="unit", time="time", first_treat="cohort")
    out = _timings(setup, clock.lap())
    gte = res.group_time_effects
    keys = list(gte)
    crit = res.cband_crit_value
    # diff-diff's sup-t band covers event-study aggregates only, not ATT(g,t) cells.
    out.update(critical_value=float("nan") if crit is None else float(crit),
               cells=_cells([k[0] for k in keys], [k[1] for k in keys],
                            [gte[k]["effect"] for k in keys], [gte[k]["se"] for k in keys]))
    return out


def _run_differences(df, n_bootstrap, seed, control_group, warm, est_method):
    from differences import ATTgt

    clock = _Clock()
    data = df.assign(cohort=df["cohort"].where(df["cohort"] > 0)).set_index(["unit", "time"])
    att = ATTgt(data=data, cohort_column="cohort", base_period="varying")
    setup = clock.lap()
    res = att.fit(formula="y", est_method=est_method, control_group=control_group,
                  boot_iterations=n_bootstrap,
                  random_state=seed, n_jobs=1, progress_bar=False)
    out = _timings(setup, clock.lap())
    out["critical_value"] = float("nan")
    try:
        table = att.results().reset_index()
        table.columns = ["_".join(str(p) for p in c if str(p)) if isinstance(c, tuple) else c
                         for c in table.columns]
        est_col = next(c for c in table.columns if c.endswith("ATT"))
        se_col = next(c for c in table.columns if c.endswith("std_error"))
        out["cells"] = _cells(table["cohort"], table["time"], table[est_col], table[se_col])
    except (KeyError, StopIteration, ValueError) as exc:  # layout is not a stable API
        out["cells_error"] = f"{type(exc).__name__}: {exc}"
    del res
    return out


_RUNNERS = {"didmem": _run_didmem, "csdid": _run_csdid, "diff-diff": _run_diff_diff,
            "differences": _run_differences}


def worker(args: argparse.Namespace) -> None:
    """Entry point of the child process: load, fit, and print one JSON line."""
    import warnings

    warnings.simplefilter("ignore")  # competitors' deprecation chatter is not our concern
    t0 = time.perf_counter()
    names = _IMPORT_NAMES[args.worker]
    for name in (names,) if isinstance(names, str) else names:
        __import__(name)
    t1 = time.perf_counter()
    rss_import = _current_rss_mb()
    df = load_panel(Path(args.data))
    t2 = time.perf_counter()
    rss_before = _current_rss_mb()
    out = _RUNNERS[args.worker](df, args.n_bootstrap, args.seed, args.control_group,
                                args.warm, args.est_method)
    out.update(import_s=t1 - t0, load_s=t2 - t1, rss_after_import_mb=rss_import,
               rss_before_fit_mb=rss_before,
               peak_rss_mb=_peak_rss_mb(), load_average=os.getloadavg()[0])
    cells = out.pop("cells", None)
    if cells is not None and args.cells_out:
        np.savez(args.cells_out, **cells)
    if cells is not None:
        out["n_cells"] = len(cells["estimate"])
    print("RESULT " + json.dumps(out))


def run_tool(tool: str, data: Path, *, python: str, n_bootstrap: int, seed: int,
             control_group: str, est_method: str, warm: bool, cells_out: Path | None,
             timeout: float | None) -> dict:
    """Run one tool on the saved panel in a fresh process and return its measurements.

    Parameters
    ----------
    tool : str
        One of :data:`TOOLS`.
    data : pathlib.Path
        The ``.npz`` panel written by :func:`save_panel`.
    python : str
        Interpreter to run the child with (``differences`` may live in its own environment).
    n_bootstrap, seed : int
        Bootstrap draws and seed.
    control_group : str
        ``"never_treated"`` or ``"not_yet_treated"``.
    est_method : str
        ``"reg"`` or ``"dr"`` for the other tools (identical estimates without covariates);
        didmem has a single method.
    warm : bool
        Also time a second fit in the same process (didmem only).
    cells_out : pathlib.Path or None
        Where the child writes its ATT(g,t) table, for the cross-tool comparison.
    timeout : float or None
        Seconds before the child is killed.

    Returns
    -------
    dict
        ``wall_s`` (the whole child, start to exit), the child's own timings, ``peak_rss_mb``
        and, on failure, ``error``.
    """
    cmd = [python, str(Path(__file__).resolve()), "--worker", tool, "--data", str(data),
           "--n-bootstrap", str(n_bootstrap), "--seed", str(seed),
           "--control-group", control_group, "--est-method", est_method]
    if warm:
        cmd.append("--warm")
    if cells_out is not None:
        cmd += ["--cells-out", str(cells_out)]
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    out = json.loads(lines[-1][len("RESULT "):])
    out["wall_s"] = wall
    return out


def tool_version(tool: str, python: str) -> str | None:
    """Installed version of ``tool`` under ``python``, or ``None`` when it is missing."""
    code = ("import importlib.metadata as m, sys\n"
            f"try: print(m.version({_DIST_NAMES[tool]!r}))\n"
            "except m.PackageNotFoundError: sys.exit(1)")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + env.get(
        "PYTHONPATH", "")
    if tool == "didmem":  # a source checkout need not be installed
        code = "import didmem; print(didmem.__version__)"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env,
                          check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


# --------------------------------------------------------------------------------------------
# The whole benchmark
# --------------------------------------------------------------------------------------------
def machine() -> dict:
    """Cores, CPU model, memory, OS and Python of this machine."""
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        ram_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        ram_gb = float("nan")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cores": cores, "cpu": cpu, "ram_gb": round(ram_gb, 1),
            "os": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__, "pandas": pd.__version__}


def _median_of(runs: list[dict], key: str) -> float:
    vals = [r[key] for r in runs if key in r and r[key] is not None]
    return float(statistics.median(vals)) if vals else float("nan")


def summarise(runs: list[dict]) -> dict:
    """Medians over repeats of every timing, and the largest peak memory."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"error": runs[-1].get("error", "no run"), "repeats": len(runs)}
    keys = ("import_s", "load_s", "setup_s", "setup_cpu_s", "fit_s", "fit_cpu_s",
            "warm_fit_s", "warm_fit_cpu_s", "wall_s", "rss_after_import_mb",
            "rss_before_fit_mb", "load_average")
    out = {k: _median_of(ok, k) for k in keys if any(k in r for r in ok)}
    out["peak_rss_mb"] = max(r["peak_rss_mb"] for r in ok)
    out["fit_s_all"] = [r["fit_s"] for r in ok]
    out["repeats"] = len(ok)
    for k in ("n_cells", "critical_value"):
        if k in ok[-1]:
            out[k] = ok[-1][k]
    return out


def compare_cells(reference: Path, other: Path) -> dict:
    """Largest absolute ATT difference on the (cohort, time) cells two tools share."""
    with np.load(reference) as a, np.load(other) as b:
        ka = {(c, t): i for i, (c, t) in enumerate(zip(a["cohort"], a["time"]))}
        pairs = [(ka[(c, t)], j) for j, (c, t) in enumerate(zip(b["cohort"], b["time"]))
                 if (c, t) in ka]
        if not pairs:
            return {"shared_cells": 0}
        ia, ib = map(np.array, zip(*pairs))
        with np.errstate(divide="ignore", invalid="ignore"):
            se_ratio = b["std_error"][ib] / a["std_error"][ia]
        return {"shared_cells": len(pairs),
                "max_abs_att_diff": float(np.max(np.abs(a["estimate"][ia] - b["estimate"][ib]))),
                # Bootstrap SEs differ by Monte Carlo error (about 1/sqrt(2B) relative).
                "median_abs_se_rel_diff": float(np.nanmedian(np.abs(se_ratio - 1)))}


def wait_for_quiet(max_load: float | None, patience: float = 600.0) -> float:
    """Wait until the 1-minute load average is at most ``max_load`` (at most ``patience`` s).

    Returns
    -------
    float
        The load average when the wait ended.
    """
    load = os.getloadavg()[0]
    deadline = time.monotonic() + patience
    while max_load is not None and load > max_load and time.monotonic() < deadline:
        time.sleep(5)
        load = os.getloadavg()[0]
    return load


def bench_panel(label: str, spec: PanelSpec, tools: list[str], args, pythons: dict,
                workdir: Path, results: dict) -> None:
    """Build one panel, time every tool on it, and store the figures under ``label``."""
    t0 = time.perf_counter()
    df = simulate(spec)
    build_s = time.perf_counter() - t0
    path = workdir / f"{label}.npz"
    save_panel(df, path)
    entry = {"spec": dataclasses.asdict(spec), "n_units": spec.n_units,
             "n_rows": len(df), "build_s": build_s, "tools": {}}
    del df
    print(f"[{label}] {spec.n_units} units x {spec.n_periods} periods, "
          f"{spec.n_cohorts} cohorts: built in {build_s:.2f} s", flush=True)
    for tool in tools:
        runs = []
        repeat = args.repeat if tool == "didmem" else (args.repeat_others or args.repeat)
        for rep in range(repeat):
            cells_out = workdir / f"{label}-{tool}-cells.npz" if rep == 0 else None
            wait_for_quiet(args.max_load, args.max_wait)
            r = run_tool(tool, path, python=pythons[tool], n_bootstrap=args.n_bootstrap,
                         seed=args.seed + rep, control_group=args.control_group,
                         est_method=args.est_method,
                         warm=tool == "didmem", cells_out=cells_out, timeout=args.timeout)
            runs.append(r)
            msg = r.get("error") or (f"fit {r['fit_s']:.3f} s, setup {r['setup_s']:.3f} s, "
                                     f"peak {r['peak_rss_mb']:.0f} MB")
            print(f"[{label}] {tool} run {rep + 1}/{repeat}: {msg}", flush=True)
            if "error" in r:
                break
        entry["tools"][tool] = summarise(runs)
    # Cross-check the point estimates: every tool against the first one that produced cells
    # (didmem where it ran).
    have = [t for t in tools if (workdir / f"{label}-{t}-cells.npz").exists()]
    if have:
        entry["reference_tool"] = have[0]
        ref = workdir / f"{label}-{have[0]}-cells.npz"
        for tool in have[1:]:
            entry["tools"][tool]["vs_reference"] = compare_cells(
                ref, workdir / f"{label}-{tool}-cells.npz")
    results["panels"][label] = entry


def scaling(results: dict) -> dict:
    """Time ratios of the scaled didmem runs to the base run, against the size ratios."""
    base = results["panels"].get("paper") or results["panels"].get("quick")
    out = {}
    if base is None or "didmem" not in base["tools"]:
        return out
    b = base["tools"]["didmem"]
    size0 = base["n_units"] * base["spec"]["n_periods"]
    for label, entry in results["panels"].items():
        if not label.startswith("scale-") or "didmem" not in entry["tools"]:
            continue
        s = entry["tools"]["didmem"]
        size = entry["n_units"] * entry["spec"]["n_periods"]
        row = {"size_ratio": size / size0}
        for key in ("fit_s", "fit_cpu_s", "warm_fit_s", "warm_fit_cpu_s", "setup_s"):
            if key in s and key in b:
                row[key + "_ratio"] = s[key] / b[key]
        row["linear_wall"] = bool(row.get("warm_fit_s_ratio", np.inf) <= row["size_ratio"])
        row["linear_cpu"] = bool(row.get("warm_fit_cpu_s_ratio", np.inf) <= row["size_ratio"])
        out[label] = row
    return out


def markdown(results: dict) -> str:
    """The results as Markdown tables, ready for RESULTS.md."""
    m = results["machine"]
    lines = [f"- date: {results['date']}",
             f"- machine: {m['cores']} cores, {m['cpu']}, {m['ram_gb']} GB RAM; {m['os']}",
             f"- python {m['python']}, numpy {m['numpy']}, pandas {m['pandas']}; "
             + ", ".join(f"{t} {v}" for t, v in results["versions"].items() if v),
             f"- command: `{results['command']}`",
             f"- settings: {results['settings']}", ""]
    for label, entry in results["panels"].items():
        sp = entry["spec"]
        lines += [(f"### {label}: {entry['n_units']:,} units x {sp['n_periods']} periods, "
                   f"{sp['n_cohorts']} cohorts ({entry['n_rows']:,} rows; built in "
                   f"{entry['build_s']:.2f} s)"), "",
                  ("| tool | setup (s) | fit (s) | fit CPU (s) | warm fit (s) | "
                   "peak RSS (MB) | RSS after import (MB) | RSS before setup (MB) | "
                   "cells | crit. value | "
                   f"max abs ATT diff vs {entry.get('reference_tool', '-')} | "
                   "median rel. SE diff | load avg |"),
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        nan = float("nan")
        for tool, s in entry["tools"].items():
            if "error" in s:
                lines.append(f"| {tool} | error: {s['error']} ||||||||||||")
                continue
            vs = s.get("vs_reference", {}).get("max_abs_att_diff")
            vse = s.get("vs_reference", {}).get("median_abs_se_rel_diff")
            lines.append(
                f"| {tool} | {s.get('setup_s', nan):.3f} | {s['fit_s']:.3f} | "
                f"{s.get('fit_cpu_s', nan):.3f} | {s.get('warm_fit_s', nan):.3f} | "
                f"{s['peak_rss_mb']:.0f} | {s.get('rss_after_import_mb', nan):.0f} | "
                f"{s.get('rss_before_fit_mb', nan):.0f} | "
                f"{s.get('n_cells', '')} | {s.get('critical_value', nan):.3f} | "
                f"{'' if vs is None else f'{vs:.1e}'} | {'' if vse is None else f'{vse:.3f}'} | "
                f"{s.get('load_average', nan):.1f} |")
        d = entry["tools"].get("didmem")
        if d and "error" not in d:
            for tool, s in entry["tools"].items():
                if tool != "didmem" and "error" not in s:
                    lines.append(f"\n{tool} fit / didmem fit: {s['fit_s'] / d['fit_s']:.1f}x "
                                 f"(cold), {s['fit_s'] / d.get('warm_fit_s', np.nan):.1f}x "
                                 f"(warm)")
        lines.append("")
    if results.get("scaling"):
        lines += ["### Scaling of didmem", "",
                  ("| panel | size ratio (units x periods) | fit ratio | warm fit ratio | "
                   "warm fit CPU ratio | setup ratio | within linear (wall / CPU)? |"),
                  "|---|---:|---:|---:|---:|---:|---|"]
        nan = float("nan")
        for label, row in results["scaling"].items():
            lines.append(f"| {label} | {row['size_ratio']:.1f} | "
                         f"{row.get('fit_s_ratio', nan):.2f} | "
                         f"{row.get('warm_fit_s_ratio', nan):.2f} | "
                         f"{row.get('warm_fit_cpu_s_ratio', nan):.2f} | "
                         f"{row.get('setup_s_ratio', nan):.2f} | "
                         f"{'yes' if row['linear_wall'] else 'NO'} / "
                         f"{'yes' if row['linear_cpu'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tools", default="didmem,csdid,diff-diff",
                   help="comma-separated subset of " + ",".join(TOOLS)
                   + " (default: didmem,csdid,diff-diff)")
    p.add_argument("--quick", action="store_true",
                   help="a small panel (8 cohorts x 40 units + 120 never-treated, 10 periods) "
                        "for a smoke run; the scaling check uses 10x its units")
    p.add_argument("--repeat", type=int, default=1,
                   help="fresh processes per tool; the table shows medians (default 1)")
    p.add_argument("--repeat-others", type=int, default=0,
                   help="fresh processes for each tool but didmem, if not --repeat (their "
                        "full-scale runs are long)")
    p.add_argument("--n-bootstrap", type=int, default=1000, help="bootstrap draws (1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed of the first repeat")
    p.add_argument("--control-group", default="never_treated",
                   choices=("never_treated", "not_yet_treated"))
    p.add_argument("--est-method", default="reg", choices=("reg", "dr"),
                   help="estimation method of csdid, diff-diff and differences; without "
                        "covariates both give the same ATT(g,t) and 'reg' is the faster "
                        "(default reg)")
    p.add_argument("--scale-units", type=float, default=10.0,
                   help="didmem also runs on a panel with this many times the units "
                        "(0 to skip; default 10)")
    p.add_argument("--scale-periods", type=int, default=4,
                   help="didmem also runs on a panel with this many times the periods, the "
                        "cohorts spread over them (0 or 1 to skip; default 4)")
    p.add_argument("--differences-scale", choices=("quarter", "full"), default="quarter",
                   help="`differences` runs on a quarter of the periods (23 cohorts, 24 "
                        "periods; didmem runs there too) or on the full panel")
    p.add_argument("--differences-python", default=sys.executable,
                   help="interpreter whose environment has `differences` installed")
    p.add_argument("--timeout", type=float, default=1800.0,
                   help="seconds before a tool's process is killed (1800)")
    p.add_argument("--max-load", type=float, default=None,
                   help="before each run, wait (up to --max-wait seconds) until the 1-minute "
                        "load average is at most this; for shared machines")
    p.add_argument("--max-wait", type=float, default=600.0,
                   help="the longest wait for --max-load, in seconds (600)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    p.add_argument("--markdown", metavar="PATH", help="also write the Markdown tables here")
    # Internal: the child process.
    p.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cells-out", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> dict | None:
    """Run the benchmark; see ``--help``."""
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return None
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown:
        raise SystemExit(f"Unknown tools {unknown}; choose from {list(TOOLS)}.")
    pythons = {t: (args.differences_python if t == "differences" else sys.executable)
               for t in TOOLS}
    versions = {t: tool_version(t, pythons[t]) for t in tools}
    missing = [t for t in tools if versions[t] is None]
    for t in missing:
        print(f"skipping {t}: not installed under {pythons[t]}", file=sys.stderr)
    tools = [t for t in tools if t not in missing]
    results = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "provenance": provenance(),
        "command": "python " + " ".join([os.path.relpath(__file__)] + sys.argv[1:]
                                        if argv is None else [os.path.relpath(__file__)]
                                        + list(argv)),
        "machine": machine(), "versions": versions,
        "settings": (f"control_group={args.control_group}, base_period=varying, no "
                     f"covariates, n_bootstrap={args.n_bootstrap} (Rademacher multiplier), "
                     f"est_method={args.est_method} (other tools), "
                     f"sup-t band, repeats={args.repeat} for didmem and "
                     f"{args.repeat_others or args.repeat} for the others (medians)"),
        "panels": {},
    }
    base = QUICK if args.quick else PAPER
    base_label = "quick" if args.quick else "paper"
    with tempfile.TemporaryDirectory(prefix="didmem-bench-") as tmp:
        workdir = Path(tmp)
        if "didmem" in tools:
            # One untimed run first, so that numba's on-disk cache exists and the timed
            # "cold" fits measure a fresh process loading compiled kernels, not compiling.
            warmup = workdir / "warmup.npz"
            save_panel(simulate(QUICK), warmup)
            run_tool("didmem", warmup, python=sys.executable, n_bootstrap=args.n_bootstrap,
                     seed=args.seed, control_group=args.control_group,
                     est_method=args.est_method, warm=False, cells_out=None,
                     timeout=args.timeout)
        on_base = args.quick or args.differences_scale == "full"
        main_tools = [t for t in tools if t != "differences" or on_base]
        bench_panel(base_label, base, main_tools, args, pythons, workdir, results)
        if "differences" in tools and not on_base:
            sub = [t for t in ("didmem", "differences") if t in tools]
            bench_panel("quarter-periods", QUARTER, sub, args, pythons, workdir, results)
        if "didmem" in tools:
            if args.scale_units and args.scale_units != 1:
                bench_panel(f"scale-units-x{args.scale_units:g}",
                            base.scaled(units=args.scale_units), ["didmem"], args, pythons,
                            workdir, results)
            if args.scale_periods and args.scale_periods > 1:
                bench_panel(f"scale-periods-x{args.scale_periods}",
                            base.scaled(periods=args.scale_periods), ["didmem"], args,
                            pythons, workdir, results)
    results["scaling"] = scaling(results)
    text = markdown(results)
    print()
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=float) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(text)
    return results


if __name__ == "__main__":
    main()
