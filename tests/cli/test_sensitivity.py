"""didmem sensitivity: the table of didmem.sensitivity from a results file, one-line errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.cli import main

pytest.importorskip("pyarrow")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("sensitivity")
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=40,
                                           n_never_treated=80, n_times=7, seed=5)
    panel_path = d / "panel.csv"
    df.to_csv(panel_path, index=False)
    out = {}
    for base in ("universal", "varying"):
        path = d / f"{base}.parquet"
        assert main(["estimate", str(panel_path), "--outcome", "y", "--draws", "0",
                     "--base-period", base, "--out", str(path)]) == 0
        out[base] = path
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    fitted = didmem.DiDEstimator(base_period="universal", n_bootstrap=0).fit(panel)
    return out, fitted.aggregate("dynamic")


@pytest.mark.parametrize("restriction, m, extra", [
    ("relative_magnitudes", [0.0, 0.5, 1.0], ["--method", "conditional", "--grid-points", "150"]),
    ("smoothness", [0.0, 0.05], ["--average", "0,1"]),
    ("relative_magnitudes", [0.5, 1.0], ["--method", "conditional", "--grid-points", "60",
                                         "--bias", "positive"]),
])
def test_sensitivity_table_matches_the_api(files, tmp_path, capsys, restriction, m, extra):
    results, dynamic = files
    out = tmp_path / "s.csv"
    assert main(["sensitivity", str(results["universal"]), "--restriction", restriction,
                 "--m", ",".join(map(str, m)), "--out", str(out), *extra]) == 0
    printed = capsys.readouterr().out
    assert "breakdown" in printed and str(out) in printed
    assert out.with_suffix(".png").stat().st_size > 1000
    table = pd.read_csv(out)
    if restriction == "smoothness":
        expected = didmem.sensitivity(dynamic, restriction=restriction, m=m,
                                      event_time={0: 0.5, 1: 0.5})
    else:
        bias = extra[extra.index("--bias") + 1] if "--bias" in extra else None
        expected = didmem.sensitivity(dynamic, restriction=restriction, m=m, event_time=0,
                                      method="conditional", bias=bias,
                                      grid_points=int(extra[extra.index("--grid-points") + 1]))
        assert ("with bias positive" in printed) == (bias is not None)
        variants = table["variant"].astype(object).where(table["variant"].notna(), "")
        assert list(variants.unique()) == [expected.variant or ""]
    want = expected.to_frame()
    assert list(table["method"]) == list(want["method"])
    # the saved covariance is the fitted one, so the intervals agree to rounding
    np.testing.assert_allclose(table[["lower", "upper"]], want[["lower", "upper"]],
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(table["breakdown"], expected.breakdown, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("args, message", [
    (["--m", "0,x"], "--m expects comma-separated numbers; got '0,x'"),
    (["--m", "1", "--event-time", "9"], "event_time [9] is not among the post-treatment"),
    (["--m", "-1"], "The option --m must be a finite non-negative number"),
    # the library's parameter, named by the flag that sets it
    (["--m", "1", "--grid-points", "5"], "The option --grid-points must be an integer"),
    (["--m", "1", "--seed", "-1"], "The option --seed must be"),
    (["--m", "1", "--average", "0,0"], "--average lists an event time twice"),
    (["--m", "1", "--out", "table.txt"], "--out must name a '.csv' file"),
    (["--m", "1", "--bias", "positive", "--monotonicity", "increasing"],
     "at most one of bias and monotonicity"),
])
def test_user_errors_are_one_line(files, tmp_path, capsys, args, message):
    results, _ = files
    if "--out" in args:
        args = args[:-1] + [str(tmp_path / args[-1])]
    assert main(["sensitivity", str(results["universal"]), "--restriction", "smoothness",
                 *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("didmem sensitivity: error: ") and err.count("\n") == 1
    assert message in err


def test_varying_base_period_is_refused_with_the_fix(files, capsys):
    results, _ = files
    assert main(["sensitivity", str(results["varying"]), "--m", "1"]) == 2
    err = capsys.readouterr().err
    assert "base_period='varying'" in err and "--base-period universal" in err


def test_base_period_only_for_did(files, tmp_path, capsys):
    assert main(["estimate", str(tmp_path / "none.csv"), "--outcome", "y", "--estimator",
                 "difference", "--base-period", "universal", "--out",
                 str(tmp_path / "r.parquet")]) == 2
    assert "--base-period applies to --estimator did only" in capsys.readouterr().err


def test_a_difference_estimator_file_is_not_told_to_change_its_base_period(files, tmp_path,
                                                                           capsys):
    """Before, a DifferenceEstimator results file was told to re-run with --base-period
    universal, an option that estimator does not have; now the message says which estimator
    the file holds and which one the analysis reads."""
    panel = tmp_path / "panel.csv"
    didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=10, n_never_treated=10,
                                   n_times=5, seed=0)[0].to_csv(panel, index=False)
    path = tmp_path / "difference.parquet"
    assert main(["estimate", str(panel), "--outcome", "y", "--estimator", "difference",
                 "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["sensitivity", str(path), "--m", "0,1"]) == 2
    err = capsys.readouterr().err
    assert "holds a DifferenceEstimator result, which has no base period" in err
    assert "DiDEstimator" in err and err.count("\n") == 1
