"""Exact agreement with R ``did`` 2.5.0 on ``mpdta`` (reference values in tests/data/reference).

The reference files were produced with, for scenario ``mpdta_nev_dr``::

    att_gt(yname="lemp", tname="year", idname="countyreal", gname="first.treat",
           xformla=~1, data=mpdta, control_group="nevertreated", est_method="dr",
           base_period="varying", bstrap=FALSE, cband=FALSE)
    aggte(out, type=..., bstrap=FALSE)

and ``control_group="notyettreated"`` for ``mpdta_nyt_dr`` (see tests/data/reference/README.md,
which records what is known of their provenance).
Analytic standard errors are deterministic, so they are compared at 1e-8 relative.
"""

import numpy as np
import pandas as pd
import pytest

import didmem

from .conftest import reference_file

pytestmark = pytest.mark.reference

SCENARIOS = {"mpdta_nev_dr": "never_treated", "mpdta_nyt_dr": "not_yet_treated"}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def fitted(request, mpdta_panel):
    scenario = request.param
    res = didmem.DiDEstimator(small_sample=False,
                              control_group=SCENARIOS[scenario], base_period="varying",
                              anticipation=0, n_bootstrap=0, seed=0).fit(mpdta_panel)
    return scenario, res


def test_att_gt_and_analytic_se(fitted):
    scenario, res = fitted
    ref = pd.read_csv(reference_file("r_did_mpdta_attgt.csv"))
    ref = ref[ref["scenario"] == scenario].reset_index(drop=True)
    frame = res.to_frame()
    assert len(frame) == len(ref) == 12
    np.testing.assert_array_equal(frame["cohort"], ref["group"])
    np.testing.assert_array_equal(frame["time"], ref["t"])
    np.testing.assert_allclose(frame["estimate"], ref["att"], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(frame["std_error"], ref["se"], rtol=1e-8)
    # pointwise 95% intervals without the bootstrap
    np.testing.assert_allclose(frame["ci_upper"] - frame["estimate"], 1.959963984540054 * ref["se"],
                               rtol=1e-8)


@pytest.mark.parametrize("kind", ["simple", "group", "dynamic", "calendar"])
def test_aggregations(fitted, kind):
    scenario, res = fitted
    ref = pd.read_csv(reference_file("r_did_mpdta_aggte.csv"))
    ref = ref[(ref["scenario"] == scenario) & (ref["type"] == kind)]
    agg = res.aggregate(kind)
    np.testing.assert_allclose(agg.overall.estimate, ref["overall_att"].iloc[0], rtol=1e-8)
    np.testing.assert_allclose(agg.overall.std_error, ref["overall_se"].iloc[0], rtol=1e-8)
    if kind == "simple":
        assert agg.to_frame().shape[0] == 1
        return
    frame = agg.to_frame()
    key = {"group": "cohort", "dynamic": "event_time", "calendar": "time"}[kind]
    np.testing.assert_array_equal(frame[key], ref["egt"])
    np.testing.assert_allclose(frame["estimate"], ref["att_egt"], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(frame["std_error"], ref["se_egt"], rtol=1e-8)


def test_pretest(fitted):
    scenario, res = fitted
    ref = pd.read_csv(reference_file("r_did_mpdta_pretest.csv"))
    ref = ref[ref["scenario"] == scenario]
    pre = res.pretest
    assert pre.df == 5  # pre-treatment cells: (2006: 2004, 2005), (2007: 2004-2006)
    np.testing.assert_allclose(pre.statistic, ref["W"].iloc[0], rtol=1e-8)
    assert abs(pre.pvalue - ref["Wpval"].iloc[0]) <= 5e-6  # R rounds p to 5 places


def test_memorisation_aliases_match_r_names(fitted):
    _, res = fitted
    pairs = [("cohort", "group"), ("checkpoint", "calendar"), ("overall", "simple")]
    for alias, name in pairs:
        a, b = res.aggregate(alias), res.aggregate(name)
        np.testing.assert_array_equal(a.estimates, b.estimates)
        assert a.overall == b.overall
    # instantaneous memorisation is the event-time-0 row of the dynamic aggregation here
    # (every cohort is one of the panel's times), persistent the rows with e > 0
    inst, dyn = res.aggregate("instantaneous"), res.aggregate("dynamic")
    dyn_frame = dyn.to_frame().set_index("event_time")
    np.testing.assert_allclose(inst.overall.estimate, dyn_frame.loc[0, "estimate"], rtol=1e-12)
    np.testing.assert_allclose(inst.overall.std_error, dyn_frame.loc[0, "std_error"], rtol=1e-10)
    pers = res.aggregate("persistent").to_frame().set_index("event_time")
    np.testing.assert_allclose(pers["estimate"], dyn_frame.loc[pers.index, "estimate"], rtol=1e-12)
    # residual memorisation is the last calendar period
    resid, cal = res.aggregate("residual"), res.aggregate("calendar").to_frame()
    np.testing.assert_allclose(resid.overall.estimate, cal["estimate"].iloc[-1], rtol=1e-12)
    np.testing.assert_allclose(resid.overall.std_error, cal["std_error"].iloc[-1], rtol=1e-10)


def test_bootstrap_near_analytic_and_band_between_pointwise_and_3(mpdta_panel):
    """R's printed bootstrap output (seed 09152024) has ATT(2004,2006) SE 0.0384 and a
    simultaneous critical value near 2.7; ours must land near the analytic SEs within Monte
    Carlo error and give a critical value between 1.96 and about 3."""
    ana = didmem.DiDEstimator(small_sample=False, n_bootstrap=0).fit(mpdta_panel)
    boot = didmem.DiDEstimator(small_sample=False,
                               n_bootstrap=4000, seed=9152024).fit(mpdta_panel)
    ratio = boot.std_errors / ana.std_errors
    # IQR-based scale from 4000 draws: relative MC error of about 2.5%
    assert np.all(np.abs(ratio - 1) < 0.1), ratio
    assert 1.96 < boot.critical_value < 3.1
    assert boot.band == "simultaneous"
    cell = boot.to_frame().query("cohort == 2004 and time == 2006").iloc[0]
    assert abs(cell["std_error"] - 0.0384) < 0.004


def test_reference_files_are_the_recorded_ones():
    """The files are those whose provenance tests/data/reference/README.md records (its table
    of sha256 sums), so an edited or re-exported file cannot pass for the recorded one."""
    import hashlib
    import re

    readme = reference_file("README.md").read_text()
    recorded = dict(re.findall(r"^\| `([\w.]+\.csv)` \| `([0-9a-f]{64})` \|$", readme, re.M))
    assert sorted(recorded) == ["mpdta.csv", "r_did_mpdta_aggte.csv", "r_did_mpdta_attgt.csv",
                                "r_did_mpdta_pretest.csv"]
    for name, digest in recorded.items():
        assert hashlib.sha256(reference_file(name).read_bytes()).hexdigest() == digest, name
