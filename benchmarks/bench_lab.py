"""Time the memorisation lab at the quick and demo scales and check the demo's signal.

Usage::

    python benchmarks/bench_lab.py [--repeats 3] [--scales quick demo]
        [--figure docs/_static/lab_exact_check.png] [--no-signal] [--signal-out DIR]
        [--shifts 0 0.1 0.2 0.5]

Each repetition writes a fresh run into a temporary directory (training, twin, exact runs,
scoring, files) and reports its wall-clock time, including the import of torch and
transformers, and its CPU time (user + system): the lab trains with one thread, so on a
machine shared with other jobs the CPU time is what the wall time would be on an idle one. For the demo scale it also prints the true
instantaneous effect per cohort and, where the estimation core is installed
(``didmem.estimators.DiDEstimator``), the difference-in-differences estimate of it with its
simultaneous band, counting the cohorts whose instantaneous effect is significant.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = """
import os, resource, sys, time
t0 = time.perf_counter()
load = os.getloadavg()[0]
import didmem.lab as lab
r = lab.run(sys.argv[1], quick=sys.argv[2] == "quick")
print("WALL", time.perf_counter() - t0)
use = resource.getrusage(resource.RUSAGE_SELF)
print("CPU", use.ru_utime + use.ru_stime)
print("LOAD", load)
print("STAGES", " ".join(f"{k}={v:.2f}" for k, v in r.timings.items()))
"""


def time_scale(scale: str, repeats: int) -> list:
    """Wall-clock seconds of fresh runs, each in a new Python process."""
    walls = []
    for i in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run([sys.executable, "-c", CHILD, str(Path(tmp) / "run"), scale],
                                 capture_output=True, text=True, check=True)
            lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
            walls.append(float(lines["WALL"]))
            print(f"{scale} run {i + 1}: {walls[-1]:.1f} s wall, {float(lines['CPU']):.1f} s CPU "
                  f"(load average {float(lines['LOAD']):.1f} at start; {lines['STAGES']})",
                  flush=True)
    return walls


def signal(out_dir: Path, figure: str | None) -> None:
    """Truth and, where available, the DiD estimate of the instantaneous effect per cohort."""
    import didmem.lab as lab

    result = lab.run(out_dir)
    if result.timings:
        print("demo run (in process, imports excluded): "
              + ", ".join(f"{k} {v:.1f} s" for k, v in result.timings.items())
              + f"; total {sum(result.timings.values()):.1f} s")
    inst = result.instantaneous().set_index("cohort")
    print("\ntrue instantaneous effect tau(g, g) on mean_token_loglik (z: instance spread)")
    try:
        from didmem import Panel
        from didmem.estimators import DiDEstimator
    except ImportError:
        DiDEstimator = None
    if DiDEstimator is None:
        print(inst.round(4).to_string())
    else:
        panel = Panel(result.panel, unit="unit", time="time", cohort="cohort",
                      outcome="mean_token_loglik")
        fit = DiDEstimator(n_bootstrap=999, seed=0).fit(panel)
        cells = fit.to_frame()
        own = cells[cells["cohort"] == cells["time"]].set_index("cohort")
        columns = ["estimate", "std_error", "ci_lower", "ci_upper", "significant"]
        table = inst[["tau", "z"]].join(own[columns], how="left")
        print(table.round(4).to_string())
        n_sig = int(own["significant"].sum())
        print(f"significant instantaneous effects (simultaneous 95% band over all cells): "
              f"{n_sig} of {len(own)}")
        from didmem import compare

        for column in ("tau", "tau_total", "tau_twin"):
            row = compare({"did": fit}, truth=result.truth.assign(tau=result.truth[column]),
                          metric="mean_token_loglik").iloc[0]
            print(f"post-treatment cells against {column}: n={row['n_cells']}, "
                  f"mean error {row['bias']:+.4f}, RMSE {row['rmse']:.4f}, "
                  f"corr {row['corr']:.3f}, band coverage {row['coverage']:.3f}")
    ex = result.exact[result.exact["metric"] == "mean_token_loglik"]
    print("\nexact per-cohort check (twin minus exact truth, both direct effects):")
    print(ex.round(4).to_string(index=False))
    pre, post = ex[ex["time"] < ex["cohort"]], ex[ex["time"] >= ex["cohort"]]
    print(f"twin before g: max |tau_twin| {pre['tau_twin'].abs().max():.4f}; after: mean "
          f"difference {post['difference'].mean():+.4f}, max |difference| "
          f"{post['difference'].abs().max():.4f}")
    if figure:
        _figure(result, figure)


def shift_comparison(shifts) -> None:
    """Error of the difference and DiD estimators against the truth, per validation shift."""
    import didmem.lab as lab
    from didmem import Panel
    from didmem.estimators import DiDEstimator, DifferenceEstimator

    print("\nvalidation_shift  estimator            mean error   rmse   (post-treatment cells)")
    for shift in shifts:
        with tempfile.TemporaryDirectory() as tmp:
            r = lab.run(Path(tmp) / "run", exact_cohorts=(), validation_shift=shift)
        panel = Panel(r.panel, unit="unit", time="time", cohort="cohort",
                      outcome="mean_token_loglik")
        truth = r.truth[r.truth["metric"] == "mean_token_loglik"].set_index(["cohort", "time"])
        for est in (DifferenceEstimator(), DiDEstimator()):
            cells = est.fit(panel).to_frame()
            cells = cells[cells["time"] >= cells["cohort"]].set_index(["cohort", "time"])
            err = cells["estimate"] - truth.loc[cells.index, "tau"]
            print(f"{shift:>16}  {type(est).__name__:<20} {err.mean():+.4f}    "
                  f"{np.sqrt((err ** 2).mean()):.4f}  ({len(cells)})")


def _figure(result, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ex = result.exact[result.exact["metric"] == "mean_token_loglik"]
    cohorts = sorted(ex["cohort"].unique())
    fig, axes = plt.subplots(1, len(cohorts), figsize=(3.2 * len(cohorts), 2.8), sharey=True)
    for ax, g in zip(np.atleast_1d(axes), cohorts):
        part = ex[ex["cohort"] == g]
        ax.plot(part["time"], part["tau_exact"], "o-", label="exact (only cohort removed)")
        ax.plot(part["time"], part["tau_twin"], "s--", label="twin (all analysed replaced)")
        ax.axvline(g, color="grey", lw=0.8, ls=":")
        ax.axhline(0, color="black", lw=0.5)
        ax.set_title(f"cohort g = {g}")
        ax.set_xlabel("checkpoint c")
    np.atleast_1d(axes)[0].set_ylabel("τ(g, c), mean token log-lik")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"figure written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scales", nargs="*", default=["quick", "demo"])
    parser.add_argument("--figure", default=None, help="write the exact-check figure here")
    parser.add_argument("--no-signal", action="store_true", help="skip the demo signal check")
    parser.add_argument("--signal-out", default=None,
                        help="keep the signal check's demo run here (a complete run is reused)")
    parser.add_argument("--shifts", nargs="*", type=float, default=[],
                        help="compare estimators on runs with these validation shifts")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    for scale in args.scales:
        walls = time_scale(scale, args.repeats)
        print(f"{scale}: median {np.median(walls):.1f} s, max {max(walls):.1f} s "
              f"over {len(walls)} fresh runs\n")
    if not args.no_signal and args.signal_out:
        signal(Path(args.signal_out), args.figure)
    elif not args.no_signal:
        with tempfile.TemporaryDirectory() as tmp:
            signal(Path(tmp) / "demo", args.figure)
    if args.shifts:
        shift_comparison(args.shifts)


if __name__ == "__main__":
    main()
