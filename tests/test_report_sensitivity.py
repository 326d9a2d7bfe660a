"""The report's sensitivity section: asked for, it shows didmem.sensitivity's table and figure."""

from __future__ import annotations

import re

import pytest

import didmem
from didmem.cli import main

pytest.importorskip("matplotlib")
from didmem.report import render_report  # noqa: E402

OPTIONS = {"restriction": "relative_magnitudes", "m": [0.0, 1.0], "method": "conditional",
           "grid_points": 100}


@pytest.fixture(scope="module")
def fits():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=40,
                                           n_never_treated=80, n_times=7, seed=5)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    return {base: didmem.DiDEstimator(base_period=base, n_bootstrap=0).fit(panel)
            for base in ("universal", "varying")}


def _images(text):
    return len(re.findall(r"src='data:image/png;base64,", text))


def test_section_shows_the_intervals_and_breakdown(fits):
    res = fits["universal"]
    plain = render_report(res, figures=["profile"])
    text = render_report(res, figures=["profile"], sensitivity=OPTIONS)
    assert "Sensitivity to violations of parallel trends" not in plain
    assert "Sensitivity to violations of parallel trends" in text
    assert _images(text) == _images(plain) + 1
    s = didmem.sensitivity(res.aggregate("dynamic"), **OPTIONS)
    section = text.split("Sensitivity to violations of parallel trends", 1)[1]
    for value in s.to_frame()[["lower", "upper"]].to_numpy().ravel():
        assert f"{value:.4g}" in section
    assert f"Breakdown Mbar = {s.breakdown:.4g}" in section
    assert "relative magnitudes" in section and "event time 0" in section


def test_section_names_the_variant(fits):
    options = dict(OPTIONS, m=[1.0], grid_points=40, monotonicity="increasing")
    text = render_report(fits["universal"], figures=["profile"], sensitivity=options)
    section = text.split("Sensitivity to violations of parallel trends", 1)[1]
    assert "with a violation that increases from the reference period on" in section


def test_unsuitable_result_says_why_and_the_report_goes_on(fits):
    text = render_report({"universal": fits["universal"], "varying": fits["varying"]},
                         figures=["profile"], sensitivity=OPTIONS)
    assert text.count("Sensitivity to violations of parallel trends") == 2
    assert "Not available: didmem.sensitivity needs a universal base period" in text
    assert "Correlation of profiles" in text


@pytest.mark.parametrize("options, message", [
    ({"restriction": "smoothness"}, "needs 'm'"),
    ({"m": [1], "mbar": 2}, r"Unknown sensitivity option\(s\) \['mbar'\]"),
    ({"m": [1], "restriction": "sd"}, "'restriction' parameter of sensitivity"),
    ([("m", 1)], "must be None or a mapping"),
])
def test_bad_options_are_refused(fits, options, message):
    with pytest.raises(didmem.ParameterError, match=message):
        render_report(fits["universal"], figures=["profile"], sensitivity=options)


def test_cli_report_with_sensitivity(fits, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    path = fits["universal"].save(tmp_path / "r.parquet")
    out = tmp_path / "report.html"
    assert main(["report", str(path), "--out", str(out), "--sensitivity", "smoothness",
                 "--sensitivity-m", "0,0.05", "--sensitivity-event-time", "1"]) == 0
    text = out.read_text()
    assert "Sensitivity to violations of parallel trends" in text
    assert "smoothness" in text and "event time 1" in text and "Not available" not in text
    capsys.readouterr()
    assert main(["report", str(path), "--out", str(out), "--sensitivity", "smoothness"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("didmem report: error: --sensitivity and --sensitivity-m go together")
