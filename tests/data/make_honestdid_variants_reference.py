"""Write honestdid_variants.json: the sign and monotonicity variants of the PyPI ``honestdid``.

Usage (from the repository root, with ``pip install honestdid==0.1.1``; didmem is not needed):
    python tests/data/make_honestdid_variants_reference.py
Inputs: the two event studies of honestdid_rm.json (mpdta and the simulated bent panel; their
estimates and covariance are read from that file). Each row: honestdid's
computeConditionalCS_DeltaRMB / _DeltaRMM (relative magnitudes with a sign or monotonicity
restriction) or _DeltaSDB / _DeltaSDM (smoothness with one), target the first post-treatment
event time, alpha 0.05, on a grid of 100 points (the package's default range); the interval
is the smallest and largest accepted grid point. "conditional" is hybrid_flag="ARP", "C-LF" is
hybrid_flag="LF" (its least-favourable critical value is simulated).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

VARIANTS = [  # (didmem restriction, keyword, direction, honestdid function, its keyword, bounds)
    ("relative_magnitudes", "bias", "positive", "computeConditionalCS_DeltaRMB",
     "biasDirection", "Mbar", (0.5, 1.0)),
    ("relative_magnitudes", "bias", "negative", "computeConditionalCS_DeltaRMB",
     "biasDirection", "Mbar", (0.5, 1.0)),
    ("relative_magnitudes", "monotonicity", "increasing", "computeConditionalCS_DeltaRMM",
     "monotonicityDirection", "Mbar", (0.5, 1.0)),
    ("relative_magnitudes", "monotonicity", "decreasing", "computeConditionalCS_DeltaRMM",
     "monotonicityDirection", "Mbar", (0.5, 1.0)),
    ("smoothness", "bias", "positive", "computeConditionalCS_DeltaSDB", "biasDirection", "M",
     (0.0, 0.02)),
    ("smoothness", "bias", "negative", "computeConditionalCS_DeltaSDB", "biasDirection", "M",
     (0.0, 0.02)),
    ("smoothness", "monotonicity", "increasing", "computeConditionalCS_DeltaSDM",
     "monotonicityDirection", "M", (0.0, 0.02)),
    ("smoothness", "monotonicity", "decreasing", "computeConditionalCS_DeltaSDM",
     "monotonicityDirection", "M", (0.0, 0.02)),
]


def main(points=100):
    import honestdid

    source = json.loads((HERE / "honestdid_rm.json").read_text())
    out = {"tool": f"honestdid {honestdid.__version__} (PyPI)",
           "package": source["package"],
           "command": "python tests/data/make_honestdid_variants_reference.py",
           "call": "honestdid.computeConditionalCS_Delta{RMB,RMM,SDB,SDM}(beta, sigma, n_pre, "
                   "n_post, l_vec=e_1, Mbar=m or M=m, alpha=0.05, hybrid_flag='ARP' or 'LF', "
                   "biasDirection=... or monotonicityDirection=..., gridPoints=100)",
           "cases": []}
    for case in source["cases"]:
        beta, sigma, n_pre = np.array(case["beta"]), np.array(case["sigma"]), case["n_pre"]
        n_post = beta.size - n_pre
        rows = []
        for restriction, keyword, direction, function, their_kw, bound, ms in VARIANTS:
            for flag, method in (("ARP", "conditional"), ("LF", "C-LF")):
                for m in ms:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        ref = getattr(honestdid, function)(
                            beta, sigma, n_pre, n_post, l_vec=np.eye(n_post)[0], alpha=0.05,
                            hybrid_flag=flag, gridPoints=points,
                            **{bound: m, their_kw: direction})
                    grid = np.asarray(ref["grid"], float)
                    acc = grid[np.asarray(ref["accept"]) == 1]
                    row = {"restriction": restriction, keyword: direction, "method": method,
                           "m": m, "lower": float(acc.min()) if acc.size else None,
                           "upper": float(acc.max()) if acc.size else None,
                           "grid_lb": float(grid[0]), "grid_ub": float(grid[-1]),
                           "grid_points": points, "function": function}
                    print(case["name"], row, flush=True)
                    rows.append(row)
        out["cases"].append({"name": case["name"], "rows": rows})
    (HERE / "honestdid_variants.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
