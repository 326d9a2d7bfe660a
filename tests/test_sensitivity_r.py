"""didmem.sensitivity against the R package HonestDiD.

Two sources: numbers recorded by its authors in their repository (tests/data/honestdid_r.json
with their source, commit, file and the R call; extracted by
tests/data/make_honestdid_r_reference.py), and the decisions of its relative-magnitudes tests
run by R on fixed grids (tests/data/honestdid_r_arp.json, written by
tests/data/make_honestdid_r_arp_reference.R, which records the HonestDiD commit).
R computes some quantities by simulation or on a grid where didmem computes them exactly, so
each comparison states the noise it allows and why.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import didmem

pytestmark = pytest.mark.reference

REFERENCE = Path(__file__).resolve().parent / "data" / "honestdid_r.json"
Z = 1.959963984540054


def _case(name):
    return next(c for c in json.loads(REFERENCE.read_text())["cases"] if c["name"] == name)


def _data(case):
    e = np.array(case["event_times"])
    return (pd.Series(case["beta"], index=e),
            pd.DataFrame(case["sigma"], index=e, columns=e))


def _target(case):
    e = np.array(case["event_times"])
    return {float(t): w for t, w in zip(e[e >= 0], case["l_post"]) if w}


@pytest.mark.parametrize("name", ["benzarti_carloni", "medicaid_sunab"])
def test_original_interval_is_r_s(name):
    case = _case(name)
    s = didmem.sensitivity(_data(case), restriction="smoothness", m=[0.0],
                           event_time=_target(case))
    np.testing.assert_allclose(s.original, case["original"], rtol=1e-12, atol=1e-15)


def test_flci_matches_r_vignette_lovenheim_willen():
    """Delta^SD FLCI for 15 years of exposure, nine M (R's vignette, precompute.R).

    R takes the folded-normal quantile from 10^6 simulated draws (relative sd of the
    half-length about 0.1%) and minimises over a 100-point grid of the estimator's sd, so its
    length is at best the optimum plus that noise; didmem's is exact. Lengths agree to 0.3%
    (three Monte Carlo sds; observed at most 0.12%). R's centre moves with its grid point
    while the length is flat there: end points agree to 0.5% of the length (observed 0.34%).
    """
    case = _case("lovenheim_willen")
    ms = [r["m"] for r in case["rows"]]
    got = didmem.sensitivity(_data(case), restriction="smoothness", m=ms,
                             event_time=_target(case)).to_frame().iloc[1:]
    for row, (_, ours) in zip(case["rows"], got.iterrows()):
        length = row["upper"] - row["lower"]
        assert ours.upper - ours.lower == pytest.approx(length, rel=3e-3), row
        assert ours.lower == pytest.approx(row["lower"], abs=5e-3 * length), row
        assert ours.upper == pytest.approx(row["upper"], abs=5e-3 * length), row


def test_flci_matches_r_readme_medicaid_with_control():
    """Delta^SD FLCI of the README's Medicaid TWFE (with a control), six M.

    R's output is the table printed in the README, three significant digits: agreement to
    half a unit of the last printed digit plus R's Monte Carlo/grid noise (0.2% of the length,
    as in the vignette comparison).
    """
    case = _case("medicaid_twfe_control")
    ms = [r["m"] for r in case["rows"]]
    got = didmem.sensitivity(_data(case), restriction="smoothness", m=ms,
                             event_time=_target(case)).to_frame().iloc[1:]
    for row, (_, ours) in zip(case["rows"], got.iterrows()):
        length = row["upper"] - row["lower"]
        for end in ("lower", "upper"):
            printed = row[end]
            half_unit = 0.5 * 10.0 ** (np.floor(np.log10(abs(printed))) - 2)
            assert ours[end] == pytest.approx(printed, abs=half_unit + 2e-3 * length), (end, row)


def _r_step(case):
    """The spacing of R's grid: 100 points over +/- 20 sd of the target."""
    lo, hi = case["original"]
    return 2 * case["grid_sd"] * (hi - lo) / (2 * Z) / (case["grid_points"] - 1)


def _check_rm(case, frame):
    """didmem's interval (fine grid, widened as needed) against R's 100-point one.

    R reports the extreme accepted points of a coarse grid, which lie inside the set by up to
    one step: didmem's ends may lie outside R's by that, and by one more step for R's
    simulated least-favourable critical value (different draws) and its recorded grid, which
    the cached output does not pin down. They must never lie inside R's by more than a step.
    """
    step = _r_step(case)
    for row, (_, ours) in zip(case["rows"], frame.iloc[1:].iterrows()):
        assert row["lower"] - 2 * step <= ours.lower <= row["lower"] + step, (row, ours.lower)
        assert row["upper"] - step <= ours.upper <= row["upper"] + 2 * step, (row, ours.upper)


def test_relative_magnitudes_match_r_readme_sun_abraham():
    case = _case("medicaid_sunab")
    s = didmem.sensitivity(_data(case), restriction="relative_magnitudes",
                           m=[r["m"] for r in case["rows"]], event_time=_target(case))
    _check_rm(case, s.to_frame())


def test_end_to_end_matches_r_did_and_honest_did_medicaid():
    """The README's Callaway-Sant'Anna example: att_gt (not-yet-treated, universal base),
    aggte dynamic on [-5, 5], honest_did relative magnitudes at e = 0, on the same panel.

    The original interval (estimate and analytic covariance) must be R's to rounding; the
    robust intervals to R's grid as above.
    """
    case = _case("medicaid_cs")
    panel = pd.DataFrame(case["panel"]).rename(columns={"yexp2": "cohort"})
    panel = didmem.Panel(panel, unit="stfips", time="year", cohort="cohort", outcome="dins")
    est = didmem.DiDEstimator(control_group="not_yet_treated", base_period="universal",
                              n_bootstrap=0)
    with pytest.warns(didmem.errors.SmallCohortWarning, match="2015, 2016, 2017, 2019"):
        fit = est.fit(panel)  # four expansion years with one to four states each, as in R
    ev = fit.aggregate("dynamic", min_e=-5, max_e=5)
    s = didmem.sensitivity(ev, restriction="relative_magnitudes",
                           m=[r["m"] for r in case["rows"]], event_time=0)
    np.testing.assert_allclose(s.original, case["original"], rtol=1e-10)
    _check_rm(case, s.to_frame())


def _r_arp_rows():
    data = Path(__file__).resolve().parent / "data"
    studies = {c["name"]: c for f in ("honestdid_rm.json", "honestdid_lab.json",
                                      "honestdid_r.json")
               for c in json.loads((data / f).read_text())["cases"]}
    for case in json.loads((data / "honestdid_r_arp.json").read_text())["cases"]:
        for row in case["rows"]:
            yield studies[case["name"]], row


def test_relative_magnitudes_take_r_s_decisions():
    """R HonestDiD's computeConditionalCS_DeltaRM, run by R on mpdta, the simulated panel, the
    lab's event study and two of R's own examples (the README's Sun-Abraham Medicaid event
    study, the vignette's Benzarti-Carloni one), three Mbar each, 100-point grids. The
    conditional (ARP) test is
    deterministic: didmem takes R's decision at every grid point, so the interval's ends are
    R's exactly. The hybrid's least-favourable critical value is simulated by both with
    other generators: at most two grid points may differ, each next to an end of the set."""
    from didmem.honest._relative import RelativeMagnitudes

    conditional = 0
    for study, row in _r_arp_rows():
        beta, sigma, n_pre = np.array(study["beta"]), np.array(study["sigma"]), study["n_pre"]
        grid = np.linspace(row["grid_lb"], row["grid_ub"], row["grid_points"])
        rm = RelativeMagnitudes(beta, sigma, n_pre, np.array(row["l_post"]), 0.05,
                                hybrid=row["method"] == "C-LF")
        ours, theirs = rm.accepts(row["mbar"], grid), np.array(row["accept"], bool)
        assert theirs.any()
        if row["method"] == "conditional":
            np.testing.assert_array_equal(ours, theirs, err_msg=f"{study['name']} {row}")
            conditional += 1
        else:
            differ = np.flatnonzero(ours != theirs)
            ends = np.flatnonzero(theirs)[[0, -1]]
            assert differ.size <= 2, (study["name"], row["mbar"], differ)
            assert all(np.abs(ends - d).min() <= 1 for d in differ), (study["name"], differ)
    assert conditional == 15
