"""Write honestdid_lab.json: honestdid's Delta^RM confidence sets on the lab's event study.

Usage (from the repository root, with ``pip install honestdid==0.1.1``; didmem is not needed):
    python tests/data/make_honestdid_lab_reference.py
Input: tests/data/lab_event_study.json (written by make_lab_event_study.py). Each row:
honestdid's computeConditionalCS_DeltaRM, target the first post-treatment event time, alpha
0.05, on a grid of 100 points (its default range); the interval is the smallest and largest
accepted grid point. The rows have the layout of honestdid_rm.json.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main(points=100):
    import honestdid

    study = json.loads((HERE / "lab_event_study.json").read_text())
    source = json.loads((HERE / "honestdid_rm.json").read_text())
    beta, sigma, n_pre = np.array(study["beta"]), np.array(study["sigma"]), study["n_pre"]
    n_post = beta.size - n_pre
    case = {"name": "lab", "event_times": study["event_times"], "beta": study["beta"],
            "sigma": study["sigma"], "n_pre": n_pre, "rows": []}
    for flag, method in (("ARP", "conditional"), ("LF", "C-LF")):
        for mbar in (0.5, 1.0, 2.0):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = honestdid.computeConditionalCS_DeltaRM(
                    beta, sigma, n_pre, n_post, l_vec=np.eye(n_post)[0], Mbar=mbar,
                    alpha=0.05, hybrid_flag=flag, gridPoints=points)
            acc = ref["grid"][ref["accept"] == 1]
            row = {"method": method, "mbar": mbar, "lower": float(acc.min()),
                   "upper": float(acc.max()), "grid_lb": float(ref["grid"].iloc[0]),
                   "grid_ub": float(ref["grid"].iloc[-1]), "grid_points": points}
            print(row, flush=True)
            case["rows"].append(row)
    out = {"tool": source["tool"], "package": source["package"],
           "command": "python tests/data/make_honestdid_lab_reference.py",
           "input": "tests/data/lab_event_study.json", "call": source["call"],
           "cases": [case]}
    (HERE / "honestdid_lab.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
