"""Write honestdid_rm.json: Delta^RM confidence sets of the PyPI package ``honestdid``.

Usage (from the repository root, with ``pip install honestdid==0.1.1``):
    python tests/data/make_honestdid_reference.py [path/to/mpdta.csv]
Inputs: the dynamic event study of mpdta (default ``../shared/reference/mpdta.csv``, lemp, cohorts
first.treat, never-treated 0; didmem's DiDEstimator with base_period="universal") and of a
simulated panel whose treated cohorts' untreated paths bend away (the fixture
``simulated_event_study`` of tests/test_sensitivity.py). Each row: honestdid's
computeConditionalCS_DeltaRM on a grid of 100 points over +/-20 standard errors of the target
(its default range); the interval is the smallest and largest accepted grid point.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import didmem

HERE = Path(__file__).resolve().parent


def event_studies(mpdta):
    df = pd.read_csv(mpdta)
    panel = didmem.Panel(df, unit="countyreal", time="year", cohort="first.treat",
                         outcome="lemp", never_treated=0)
    est = didmem.DiDEstimator(base_period="universal", n_bootstrap=0)
    yield "mpdta", est.fit(panel).aggregate("dynamic")
    sim, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=60,
                                            n_never_treated=120, n_times=8, seed=11)
    cohort = sim["cohort"].to_numpy(float)
    treated = np.isfinite(cohort) & (cohort > 0)
    sim = sim.assign(y=sim["y"] + np.where(treated, 0.02 * sim["time"] ** 2, 0.0))
    panel = didmem.Panel(sim, unit="unit", time="time", cohort="cohort", outcome="y")
    yield "simulated", est.fit(panel).aggregate("dynamic")


def main(mpdta=HERE.parents[1].parent / "shared" / "reference" / "mpdta.csv", points=100):
    import honestdid

    out = {"tool": f"honestdid {honestdid.__version__} (PyPI)",
           "package": {"name": "honestdid", "version": honestdid.__version__,
                       "source": "https://pypi.org/project/honestdid/",
                       "author": "Anzony Quispe", "license": "MIT",
                       "install": f"pip install honestdid=={honestdid.__version__}",
                       "note": "a Python port of the R package HonestDiD; not written by "
                               "didmem's authors"},
           "command": "python tests/data/make_honestdid_reference.py",
           "call": "honestdid.computeConditionalCS_DeltaRM(beta, sigma, n_pre, n_post, "
                   "l_vec=e_1, Mbar=mbar, alpha=0.05, hybrid_flag=..., gridPoints=100)",
           "cases": []}
    for name, ev in event_studies(mpdta):
        keep = ev.keys != -1
        beta = np.asarray(ev.estimates)[keep]
        sigma = ev.vcov().to_numpy()[np.ix_(keep, keep)]
        n_pre = int((ev.keys < -1).sum())
        n_post = beta.size - n_pre
        l_vec = np.eye(n_post)[0]
        case = {"name": name, "event_times": list(map(float, ev.keys[keep])),
                "beta": beta.tolist(), "sigma": sigma.tolist(), "n_pre": n_pre, "rows": []}
        for flag, method in (("ARP", "conditional"), ("LF", "C-LF")):
            for mbar in (0.5, 1.0, 2.0):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ref = honestdid.computeConditionalCS_DeltaRM(
                        beta, sigma, n_pre, n_post, l_vec=l_vec, Mbar=mbar, alpha=0.05,
                        hybrid_flag=flag, gridPoints=points)
                acc = ref["grid"][ref["accept"] == 1]
                row = {"method": method, "mbar": mbar, "lower": float(acc.min()),
                       "upper": float(acc.max()), "grid_lb": float(ref["grid"].iloc[0]),
                       "grid_ub": float(ref["grid"].iloc[-1]), "grid_points": points}
                print(name, row, flush=True)
                case["rows"].append(row)
        out["cases"].append(case)
    (HERE / "honestdid_rm.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:2])
