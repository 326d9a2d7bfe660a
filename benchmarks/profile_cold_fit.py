"""Where the cold fit's time goes: cProfile of ``paper_scale.py``'s didmem fit in a fresh process.

The same steps as the worker of :mod:`paper_scale` (imports first, outside the profile, as
the benchmark keeps them outside its clock; then ``Panel`` + ``DiDEstimator.fit`` +
``to_frame`` under the profiler), timed by the process's CPU clock (all threads: the
bootstrap's helper thread counts too, attributed to what the main thread is doing), so that
a loaded machine inflates the figures less than wall time would. Prints the total CPU
seconds, the numba modules the fit imported and the kernels it loaded, and the top rows.

Examples
--------
::

    python benchmarks/paper_scale.py --help            # the panel: PAPER, 95 x 150 + 2,000, T = 96
    python benchmarks/profile_cold_fit.py --rows 30 --sort tottime
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from paper_scale import PAPER, QUICK, simulate  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small panel (smoke test)")
    parser.add_argument("--rows", type=int, default=25, help="rows of the profile to print")
    parser.add_argument("--sort", default="cumulative", help="pstats sort key")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    df = simulate(QUICK if args.quick else PAPER)
    import didmem
    import didmem.estimators.did  # noqa: F401  (the worker's imports)
    import didmem.inference.cell_inference  # noqa: F401

    before = set(sys.modules)
    profile = cProfile.Profile(time.process_time)
    cpu0 = time.process_time()
    profile.enable()
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         never_treated=0)
    res = didmem.DiDEstimator(control_group="never_treated", base_period="varying",
                              anticipation=0, n_bootstrap=args.n_bootstrap, seed=0).fit(panel)
    res.to_frame()
    profile.disable()
    cpu = time.process_time() - cpu0
    numba_modules = sorted(m for m in set(sys.modules) - before if m.split(".")[0] == "numba")
    kernels = sorted({f"{fn.__module__}.{fn.__name__}"
                      for fn in _numba_dispatchers() if fn.signatures})
    print(f"cold fit under the profiler: {cpu:.3f} s CPU (all threads)")
    print(f"numba modules imported by the fit: {len(numba_modules)}; kernels loaded: "
          f"{', '.join(kernels) or 'none'}")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats(args.sort).print_stats(args.rows)
    print(out.getvalue())
    return 0


def _numba_dispatchers():
    """Every numba dispatcher of didmem's modules now imported (none when numba is not)."""
    if "numba" not in sys.modules:
        return []
    from numba.core.registry import CPUDispatcher

    found = []
    for name, module in list(sys.modules.items()):
        if name.startswith("didmem") and module is not None:
            found += [v for v in vars(module).values() if isinstance(v, CPUDispatcher)]
    return found


if __name__ == "__main__":
    sys.exit(main())
