"""didmem estimate --by FEATURE: subgroup profiles, their differences and equality tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.cli import main

pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def panel_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("by")
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=30,
                                           n_never_treated=60, seed=0)
    df["domain"] = np.where(df["unit"] % 2 == 0, "code", "prose")
    path = d / "panel.parquet"
    df.to_parquet(path)
    return path


def _expected(path):
    frame = pd.read_parquet(path)
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")
    feature = frame.groupby("unit")["domain"].first()
    return didmem.heterogeneity(panel, feature, estimator=didmem.DiDEstimator(
        n_bootstrap=0, outcome="y"), seed=1)


def test_estimate_by_writes_profiles_differences_and_tests(panel_file, tmp_path, capsys):
    out = tmp_path / "sub" / "by.parquet"
    assert main(["estimate", str(panel_file), "--outcome", "y", "--by", "domain",
                 "--n-bootstrap", "0", "--seed", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Memorisation by 'domain': 2 subgroups" in text
    assert "code's instantaneous memorisation is" in text and "independent" in text
    assert "estimate_code" in text and "estimate_prose" in text
    het = _expected(panel_file)

    profiles = pd.read_parquet(out)
    assert set(profiles["group"]) == {"code", "prose"}
    expected = het.profiles()
    np.testing.assert_allclose(profiles["estimate"], expected["estimate"], rtol=1e-10)
    np.testing.assert_allclose(profiles["std_error"], expected["std_error"], rtol=1e-10)

    diffs = pd.read_parquet(tmp_path / "sub" / "by.differences.parquet")
    cells = diffs[diffs["aggregation"] == "cells"]
    want = het.difference("code", "prose").to_frame()
    np.testing.assert_allclose(cells["difference"], want["difference"], rtol=1e-10)
    np.testing.assert_allclose(cells["std_error"], want["std_error"], rtol=1e-10)
    inst = diffs[(diffs["aggregation"] == "instantaneous") & diffs["overall"]]
    overall = het.difference("code", "prose").aggregate("instantaneous").overall
    assert inst["difference"].item() == pytest.approx(overall.estimate, rel=1e-10)
    assert inst["ci_lower"].item() == pytest.approx(overall.ci_lower, rel=1e-10)
    assert {"instantaneous", "persistent", "residual", "simple"} <= set(diffs["aggregation"])

    tests = pd.read_parquet(tmp_path / "sub" / "by.equality.parquet")
    joint = tests[tests["aggregation"] == "joint"].set_index("method")
    assert joint.loc["wald", "pvalue"] == pytest.approx(het.joint_test("wald").pvalue,
                                                        rel=1e-10)
    per_cell = tests[tests["aggregation"] == "cells"]
    np.testing.assert_allclose(per_cell["statistic"], het.equality()["statistic"], rtol=1e-10)


def test_estimate_by_refuses_what_it_cannot_fit(panel_file, tmp_path, capsys):
    out = str(tmp_path / "x.parquet")
    assert main(["estimate", str(panel_file), "--outcome", "y", "--by", "colour",
                 "--out", out]) == 2
    err = capsys.readouterr().err
    assert "--by 'colour' is not a column of" in err and err.count("\n") == 1
    frame = pd.read_parquet(panel_file)
    frame["varies"] = np.arange(len(frame))
    varying = tmp_path / "varying.parquet"
    frame.to_parquet(varying)
    assert main(["estimate", str(varying), "--outcome", "y", "--by", "varies",
                 "--out", out]) == 2
    assert "varies within unit" in capsys.readouterr().err
    assert main(["estimate", str(panel_file), "--outcome", "y", "--by", "domain",
                 "--estimator", "difference", "--out", out]) == 2
    assert "--by fits DiD per subgroup" in capsys.readouterr().err
    assert not list(tmp_path.glob("x*.parquet"))  # nothing written


def test_estimate_by_takes_the_control_group_and_refuses_random_timing_flags(
        panel_file, tmp_path, capsys):
    out = tmp_path / "nyt.parquet"
    assert main(["estimate", str(panel_file), "--outcome", "y", "--by", "domain",
                 "--control", "not_yet_treated", "--n-bootstrap", "0", "--out", str(out)]) == 0
    capsys.readouterr()
    frame = pd.read_parquet(panel_file)
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")
    het = didmem.heterogeneity(panel, frame.groupby("unit")["domain"].first(),
                               estimator=didmem.DiDEstimator(
                                   n_bootstrap=0, control_group="not_yet_treated"))
    np.testing.assert_allclose(pd.read_parquet(out)["estimate"], het.profiles()["estimate"],
                               rtol=1e-10)
    assert main(["estimate", str(panel_file), "--outcome", "y", "--by", "domain",
                 "--fisher", "99", "--out", str(tmp_path / "f.parquet")]) == 2
    assert "--fisher" in capsys.readouterr().err
