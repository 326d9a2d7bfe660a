"""Monte Carlo coverage of didmem's simultaneous bands on panels with a known profile.

A thin command-line wrapper around :func:`didmem.montecarlo.band_coverage`: each replication
simulates a memorisation-like panel, fits ``DiDEstimator`` with a multiplier bootstrap and
records whether the simultaneous band covers the whole true profile (every cell,
pre-treatment cells included, whose truth is 0).

Usage::

    python benchmarks/band_coverage.py --reps 400 --units 200            # the standard check
    python benchmarks/band_coverage.py --reps 400 --units 15 30 60 --multipliers rademacher mammen
"""

from __future__ import annotations

import argparse
import json
import time
from _provenance import provenance

from didmem.montecarlo import band_coverage


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--units", type=int, nargs="+", default=[200])
    parser.add_argument("--multipliers", nargs="+", default=["rademacher"])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    rows = []
    for units in args.units:
        for mult in args.multipliers:
            t0 = time.perf_counter()
            row = band_coverage(args.reps, units_per_cohort=units, multiplier=mult,
                                n_bootstrap=args.draws, seed=args.seed)
            row["seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
            print(json.dumps(row))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"provenance": provenance(), "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
