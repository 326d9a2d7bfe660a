"""Calibration of the Wald pre-test as the number of pre-treatment cells grows.

Panels from ``didmem.datasets.simulate_panel`` with parallel trends true by construction;
prints df, W / df and the p-value per seed. The table in docs/user_guide.rst came from

    python benchmarks/pretest_calibration.py --cohorts 5 10 20 40 --seeds 4

and, for 95 cohorts, one run with ``--cohorts 95 --seeds 1 --never 2000`` (about a minute on 2 cores).
"""

import argparse
import warnings

import didmem


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohorts", type=int, nargs="+", default=[5, 10, 20, 40])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--units", type=int, default=100, help="instances per cohort")
    parser.add_argument("--never", type=int, default=1000, help="never-treated instances")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", didmem.DidmemWarning)
    for n_cohorts in args.cohorts:
        rows = []
        for seed in range(args.seeds):
            df, _ = didmem.datasets.simulate_panel(n_cohorts=n_cohorts, units_per_cohort=args.units,
                                                   n_never_treated=args.never, seed=seed)
            panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
            res = didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(panel)
            pt = res.pretest
            n_sig = int(res.to_frame().query("not post")["significant"].sum())
            rows.append(f"df={pt.df} W/df={pt.statistic / pt.df:.2f} p={pt.pvalue:.3g} "
                        f"significant pre cells={n_sig}")
        print(f"{n_cohorts} cohorts: " + "; ".join(rows), flush=True)


if __name__ == "__main__":
    main()
