"""Write honestdid_r.json: numbers recorded by the R package HonestDiD in its own repository.

R is not installed here, so nothing is recomputed in R: this script reads R data files that the
package's authors committed (their inputs and their R outputs) and stores the numbers, with
the repository, commit, file and the R call that produced them.

Usage (from the repository root; ``pip install rdata==1.1.0``; a clone of
https://github.com/asheshrambachan/HonestDiD at ``MIRROR``, e.g. a bare mirror):
    python tests/data/make_honestdid_r_reference.py MIRROR

Sources
-------
- ``README_cache/gfm/unnamed-chunk-{8,10,12}_*.rdb`` at commit 99e05c78 (HonestDiD 0.2.6): knitr's
  cache of the README's chunks, i.e. the objects those chunks created when the README was knit:
  the Medicaid TWFE estimates with a control (chunk 8), the Sun-Abraham event study and its
  relative-magnitudes results (chunk 10), the Callaway-Sant'Anna results of ``honest_did``
  (chunk 12), and the Medicaid panel itself (chunk 10's ``df``).
- ``README.md`` at HEAD: the printed smoothness table of chunk 8 (three significant digits).
- ``data/*.rda`` at commit fdadae33 (HonestDiD 0.2.6, last commit with the vignette): the
  Lovenheim-Willen and Benzarti-Carloni event studies and ``VignetteResults`` written by
  ``vignettes/precompute.R``.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = "https://github.com/asheshrambachan/HonestDiD"
README_COMMIT = "99e05c7853631f012168a5f60a2778eb04215651"
VIGNETTE_COMMIT = "fdadae33428a024df204c210da48cc5362966e89"


def _git(mirror, *args) -> bytes:
    return subprocess.run(["git", "-C", str(mirror), *args], check=True,
                          capture_output=True).stdout


def _convert(data: bytes):
    import rdata

    def raw(obj, attrs):
        return obj

    frames = {"data.frame": raw, "tbl_df": raw, "tbl": raw}
    return rdata.conversion.convert(rdata.parser.parse_data(data), constructor_dict=frames)


def _cache(mirror, chunk):
    """``{name: object}`` of one cached README chunk (knitr's lazy-load database)."""
    names = _git(mirror, "ls-tree", "--name-only", README_COMMIT, "README_cache/gfm/").decode()
    stem = next(n for n in names.split() if n.startswith(f"README_cache/gfm/unnamed-chunk-"
                                                         f"{chunk}_") and n.endswith(".rdx"))
    index = _convert(gzip.decompress(_git(mirror, "show", f"{README_COMMIT}:{stem}")))
    db = _git(mirror, "show", f"{README_COMMIT}:{stem[:-4]}.rdb")
    out = {}
    for name, (offset, length) in index["variables"].items():
        try:
            out[str(name)] = _convert(zlib.decompress(db[int(offset) + 4:int(offset) +
                                                         int(length)]))
        except Exception:  # objects of classes rdata cannot build (fitted models): not needed
            continue
    return out, stem[:-4] + ".rdb"


def _rda(mirror, name):
    data = _git(mirror, "show", f"{VIGNETTE_COMMIT}:data/{name}.rda")
    return _convert(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)[name]


def _floats(x):
    return np.asarray(x, dtype=float).ravel().tolist()


def _rows(table, bound):
    return [{"m": m, "lower": lo, "upper": hi, "method": str(me)}
            for m, lo, hi, me in zip(_floats(table[bound]), _floats(table["lb"]),
                                     _floats(table["ub"]), table["method"])]


def _original(table):
    return [_floats(table["lb"])[0], _floats(table["ub"])[0]]


def main(mirror):
    cases = []

    # Sun-Abraham event study of the Medicaid expansion, relative magnitudes, C-LF (chunk 10)
    c10, f10 = _cache(mirror, 10)
    kw = c10["kwargs"]
    cases.append({
        "name": "medicaid_sunab", "restriction": "relative_magnitudes",
        "source": {"file": f10, "commit": README_COMMIT, "objects": "kwargs, extra, "
                   "original_results, sensitivity_results"},
        "r_call": "createSensitivityResults_relativeMagnitudes(betahat, sigma, numPrePeriods=10, "
                  "numPostPeriods=6, Mbarvec=seq(0.5, 2, by=0.5), gridPoints=100)  # C-LF, "
                  "l_vec = first post period, grid +/- 20 sd of the target",
        "event_times": _floats(c10["beta_vcv"]["cohorts"]),
        "beta": _floats(kw["betahat"]), "sigma": np.asarray(kw["sigma"], float).tolist(),
        "n_pre": int(_floats(kw["numPrePeriods"])[0]), "l_post": [1.0] + [0.0] * 5,
        "grid_points": int(_floats(c10["extra"]["gridPoints"])[0]), "grid_sd": 20.0,
        "original": _original(c10["original_results"]),
        "rows": _rows(c10["sensitivity_results"], "Mbar")})

    # Callaway-Sant'Anna on the same panel through honest_did (chunk 12); the panel from chunk 10
    c12, f12 = _cache(mirror, 12)
    df = c10["df"]
    res = c12["sensitivity_results"]
    robust, orig = res["robust_ci"], res["orig_ci"]
    cases.append({
        "name": "medicaid_cs", "restriction": "relative_magnitudes",
        "source": {"file": f12, "commit": README_COMMIT, "objects": "sensitivity_results; the "
                   f"panel is chunk 10's df ({f10})"},
        "r_call": "att_gt(yname='dins', tname='year', idname='stfips', gname='yexp2' (NA -> "
                  "3000), control_group='notyettreated', base_period='universal'); "
                  "aggte(type='dynamic', min_e=-5, max_e=5); honest_did(es, e=0, "
                  "type='relative_magnitude', Mbarvec=seq(0.5, 2, by=0.5))  # gridPoints=100",
        "panel": {"stfips": _floats(df["stfips"]), "year": _floats(df["year"]),
                  "dins": _floats(df["dins"]),  # never expanded: NA in R, null here
                  "yexp2": [None if np.isnan(v) else v for v in _floats(df["yexp2"])]},
        "grid_points": 100, "grid_sd": 20.0,
        "original": _original(orig), "rows": _rows(robust, "Mbar")})

    # Medicaid TWFE with a control, smoothness FLCI: inputs cached, output printed (3 digits)
    c8, f8 = _cache(mirror, 8)
    printed = [(0.00, 0.0264, 0.0607), (0.01, 0.0128, 0.0788), (0.02, 0.00186, 0.0908),
               (0.03, -0.00814, 0.101), (0.04, -0.0181, 0.111), (0.05, -0.0281, 0.121)]
    cases.append({
        "name": "medicaid_twfe_control", "restriction": "smoothness",
        "source": {"file": f8, "commit": README_COMMIT, "objects": "betahat, sigma; the "
                   "intervals are the table printed under that chunk in README.md (HEAD "
                   "6813f02e), three significant digits"},
        "r_call": "createSensitivityResults(betahat, sigma, numPrePeriods=5, numPostPeriods=2, "
                  "Mvec=seq(0, 0.05, by=0.01))  # FLCI, l_vec = first post period",
        "event_times": [-6.0, -5.0, -4.0, -3.0, -2.0, 0.0, 1.0],
        "beta": _floats(c8["betahat"]), "sigma": np.asarray(c8["sigma"], float).tolist(),
        "n_pre": 5, "l_post": [1.0, 0.0], "printed_digits": 3,
        "rows": [{"m": m, "lower": lo, "upper": hi, "method": "FLCI"} for m, lo, hi in printed]})

    # Lovenheim-Willen (vignette): smoothness FLCI for 15 years of exposure
    lw = _rda(mirror, "LWdata_EventStudy")
    vig = _rda(mirror, "VignetteResults")
    times = np.asarray(lw["timeVec"], float)
    ref = float(_floats(lw["referencePeriod"])[0])
    n_post = int(np.sum(times > ref))
    cases.append({
        "name": "lovenheim_willen", "restriction": "smoothness",
        "source": {"file": "data/LWdata_EventStudy.rda, data/VignetteResults.rda "
                   "(LW_DeltaSD_RobustResults)", "commit": VIGNETTE_COMMIT},
        "r_call": "createSensitivityResults(betahat, sigma, numPrePeriods=9, numPostPeriods=23, "
                  "l_vec=basisVector(17, 23), Mvec=seq(0, 0.04, by=0.005))  # FLCI; "
                  "vignettes/precompute.R",
        "event_times": (times - ref - 1).tolist(),  # reference -2 relabelled as -1
        "beta": _floats(lw["betahat"]), "sigma": np.asarray(lw["sigma"], float).tolist(),
        "n_pre": int(np.sum(times < ref)), "l_post": np.eye(n_post)[16].tolist(),
        "rows": _rows(vig["LW_DeltaSD_RobustResults"], "M")})

    # Benzarti-Carloni (vignette): the original interval of the first post period
    bc = _rda(mirror, "BCdata_EventStudy")
    times = np.asarray(bc["timeVec"], float)
    ref = float(_floats(bc["referencePeriod"])[0])
    cases.append({
        "name": "benzarti_carloni", "restriction": "original",
        "source": {"file": "data/BCdata_EventStudy.rda, data/VignetteResults.rda "
                   "(BC_OriginalResults)", "commit": VIGNETTE_COMMIT},
        "r_call": "constructOriginalCS(betahat, sigma, numPrePeriods=4, numPostPeriods=4, "
                  "l_vec=basisVector(1, 4))",
        "event_times": (times - ref - 1).tolist(),
        "beta": _floats(bc["betahat"]), "sigma": np.asarray(bc["sigma"], float).tolist(),
        "n_pre": int(np.sum(times < ref)), "l_post": [1.0, 0.0, 0.0, 0.0],
        "original": _original(vig["BC_OriginalResults"]), "rows": []})

    out = {"tool": "R package HonestDiD 0.2.6 (numbers recorded in its repository; R not run "
                   "here)",
           "repository": REPO, "license": "MIT",
           "command": "python tests/data/make_honestdid_r_reference.py MIRROR  "
                      "(pip install rdata==1.1.0)",
           "cases": cases}
    (HERE / "honestdid_r.json").write_text(json.dumps(out, indent=1, allow_nan=False))
    for case in cases:
        print(case["name"], case.get("original"), len(case["rows"]), "rows")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
