"""Exact agreement with R ``did`` 2.5.1 on panels with holes and repeated cross-sections.

Reference values: ``tests/data/reference/make_r_did_holes_reference.R`` (run with
``Rscript tests/data/reference/make_r_did_holes_reference.R`` from the repository root;
README_holes.md there records the R and package versions and their sources). Four data sets
(mpdta with 10% of its rows removed, did's simulated panel with 10% removed, mpdta read as
repeated cross-sections, a genuine repeated cross-section from did's simulator) across
both control groups, both base periods, anticipation 0 and 1, no extras / weights /
clusters, and ``est_method`` reg, dr and ipw without extras (identical without covariates:
one didmem fit is checked against all three), dr with weights or clusters. ATT(g,t), analytic standard errors, the four aggregations
and R's Wald pre-test, at 1e-8 relative. With the covariate ``lpop`` (R's cross-section
estimators cell by cell): mpdta with holes and as cross-sections, both control groups and
base periods, anticipation 0 and 1, reg, dr and ipw without extras and with weights, dr
with clusters.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import didmem

from .conftest import reference_file

pytestmark = pytest.mark.reference

DATA = {
    "mpdta_unbalanced": ("holes_mpdta_unbalanced.csv",
                         dict(unit="countyreal", time="year", cohort="first.treat",
                              outcome="lemp"), "state"),
    "sim_unbalanced": ("holes_sim_unbalanced.csv",
                       dict(unit="id", time="period", cohort="G", outcome="Y"), "cluster"),
    "mpdta_rcs": ("holes_mpdta_rcs.csv",
                  dict(unit=None, time="year", cohort="first.treat", outcome="lemp"), "state"),
    "sim_rcs": ("holes_sim_rcs.csv", dict(unit=None, time="period", cohort="G", outcome="Y"),
                "cluster"),
}
CONTROL = {"nevertreated": "never_treated", "notyettreated": "not_yet_treated"}
GRID = list(itertools.product(DATA, CONTROL, ("varying", "universal"), (0, 1),
                              ("none", "weights", "cluster")))
METHODS = ("reg", "dr", "ipw")
COV_GRID = [(data, cg, bp, ant, extra, method)
            for data, cg, bp, ant, extra in itertools.product(
                ("mpdta_unbalanced", "mpdta_rcs"), CONTROL, ("varying", "universal"), (0, 1),
                ("none", "weights", "cluster"))
            for method in (("dr",) if extra == "cluster" else METHODS)]


def _name(data, cg, bp, ant, extra, method):
    return f"{data}_{cg}_{bp}_a{ant}_{extra}_{method}"


def _read(prefix):
    return tuple(pd.read_csv(reference_file(f"{prefix}{what}.csv"))
                 for what in ("attgt", "aggte", "pretest"))


@pytest.fixture(scope="module")
def references():
    return _read("r_did_holes_")


@pytest.fixture(scope="module")
def cov_references():
    return _read("r_did_holes_cov_")


def _fit(data, cg, bp, ant, extra, method="dr", covariates=None):
    path, cols, cluster = DATA[data]
    frame = pd.read_csv(reference_file(path))
    options = {"weights": "wt"} if extra == "weights" else (
        {"cluster": cluster} if extra == "cluster" else {})
    panel = didmem.Panel(frame, never_treated=0, balance="keep", covariates=covariates, **cols,
                         **options)
    assert panel.layout == ("cross_sections" if cols["unit"] is None else "unbalanced")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", didmem.DidmemWarning)
        res = didmem.DiDEstimator(small_sample=False, n_bootstrap=0, control_group=CONTROL[cg],
                                  base_period=bp, anticipation=ant,
                                  est_method=method).fit(panel)
        aggs = {kind: res.aggregate(kind) for kind in ("simple", "group", "dynamic",
                                                       "calendar")}
    return res, aggs


def _close(got, want, what):
    got, want = np.asarray(got, float), np.asarray(want, float)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-8, atol=1e-12, err_msg=what)


def _check(references, res, aggs, scenario, extra):
    attgt, aggte, pretest = references
    frame = res.to_frame()
    ref = attgt[attgt["scenario"] == scenario].reset_index(drop=True)
    assert len(ref) == len(frame) > 0, scenario
    np.testing.assert_array_equal(frame["cohort"], ref["group"])
    np.testing.assert_array_equal(frame["time"], ref["t"])
    _close(frame["estimate"], ref["att"], f"{scenario} att")
    _close(frame["std_error"], ref["se"], f"{scenario} se")
    for kind, agg in aggs.items():
        rows = aggte[(aggte["scenario"] == scenario) & (aggte["type"] == kind)]
        _close([agg.overall.estimate, agg.overall.std_error],
               [rows["overall_att"].iloc[0], rows["overall_se"].iloc[0]],
               f"{scenario} {kind} overall")
        if kind != "simple":
            got = agg.to_frame()
            key = {"group": "cohort", "dynamic": "event_time", "calendar": "time"}[kind]
            np.testing.assert_array_equal(got[key], rows["egt"])
            _close(got["estimate"], rows["att_egt"], f"{scenario} {kind}")
            _close(got["std_error"], rows["se_egt"], f"{scenario} {kind} se")
    want = pretest[pretest["scenario"] == scenario].iloc[0]  # with clusters: clustered V
    _close([res.pretest.statistic], [want["W"]], f"{scenario} W")
    assert abs(res.pretest.pvalue - want["Wpval"]) <= 5e-6


@pytest.mark.parametrize("data,cg,bp,ant,extra", GRID,
                         ids=["_".join(map(str, g)) for g in GRID])
def test_matches_r_did(references, data, cg, bp, ant, extra):
    res, aggs = _fit(data, cg, bp, ant, extra)
    for method in METHODS if extra == "none" else ("dr",):
        _check(references, res, aggs, _name(data, cg, bp, ant, extra, method), extra)


@pytest.mark.parametrize("data,cg,bp,ant,extra,method", COV_GRID,
                         ids=["_".join(map(str, g)) for g in COV_GRID])
def test_matches_r_did_with_covariates(cov_references, data, cg, bp, ant, extra, method):
    res, aggs = _fit(data, cg, bp, ant, extra, method, covariates=["lpop"])
    _check(cov_references, res, aggs, _name(data, cg, bp, ant, extra, method) + "_lpop",
           extra)


def test_reference_files_are_the_recorded_ones():
    """The files are those README_holes.md records (its sha256 table)."""
    readme = reference_file("README_holes.md").read_text()
    recorded = dict(re.findall(r"^\| `([\w.]+\.csv)` \| `([0-9a-f]{64})` \|$", readme, re.M))
    assert len(recorded) == 10
    for name, digest in recorded.items():
        assert hashlib.sha256(reference_file(name).read_bytes()).hexdigest() == digest, name
