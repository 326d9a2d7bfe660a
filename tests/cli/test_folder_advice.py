"""What a folder the folder route cannot fit is told to do (issue 50, item 5): every refusal of
``didmem estimate DIR`` says what to do on the command line, in one line, and the advice works
(the folder's files joined into one file are fitted with the same options)."""

import pandas as pd
import pytest

import didmem
from didmem.cli import main

from ..test_panel_scan import _write


@pytest.fixture(scope="module")
def frame():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=10, n_never_treated=20,
                                           n_times=5, seed=4)
    return df


def _error(capsys, *args):
    assert main(["estimate", *map(str, args)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ".." not in err.replace("...", "")
    return err


@pytest.mark.parametrize("extra", [("--balance", "keep"), ("--exposure", "2")])
def test_folder_refusals_say_to_join_the_files_and_the_advice_works(tmp_path, frame, capsys,
                                                                     extra):
    folder = _write(tmp_path / "data", frame, n_files=3)
    err = _error(capsys, folder, "--outcome", "y", "--out", tmp_path / "r.parquet", *extra)
    assert f"for {' '.join(extra)} join the folder's files into one parquet file" in err
    if extra[0] == "--exposure":
        return  # the panel has one cohort column: the file is refused for its own reason
    code = err.split("in Python: ", 1)[1].split(") and pass that file", 1)[0]
    import os
    import pathlib

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(code, {"pandas": pd, "pathlib": pathlib})
    finally:
        os.chdir(here)
    assert main(["estimate", str(tmp_path / "panel.parquet"), "--outcome", "y", "--out",
                 str(tmp_path / "r.parquet"), "--n-bootstrap", "0", *extra]) == 0


def test_a_folder_with_holes_is_told_the_file_route(tmp_path, frame, capsys):
    folder = _write(tmp_path / "holes", frame.drop(index=[0, 7]), n_files=2)
    err = _error(capsys, folder, "--outcome", "y", "--out", tmp_path / "r.parquet")
    assert "The panel is unbalanced" in err
    assert "and pass that file (DIR: the folder) with --balance keep" in err
    assert "didmem.Panel(" not in err  # the library's advice, not the command line's


def test_a_csv_in_a_folder_is_told_to_convert_it(tmp_path, frame, capsys):
    folder = _write(tmp_path / "mixed", frame, n_files=2)
    frame.iloc[:5].to_csv(folder / "extra.csv", index=False)
    err = _error(capsys, folder, "--outcome", "y", "--out", tmp_path / "r.parquet")
    assert f"The folder holds the text file {str(folder / 'extra.csv')!r}" in err
    assert "Convert it" in err and "pass a CSV panel as one file" in err


def test_r_inference_on_a_folder_says_what_to_pass(tmp_path, frame, capsys):
    folder = _write(tmp_path / "data", frame, n_files=2)
    err = _error(capsys, folder, "--outcome", "y", "--out", tmp_path / "r.parquet",
                 "--r-inference", "--n-bootstrap", "50")
    assert "pass --n-bootstrap 0 with it" in err
    assert main(["estimate", str(folder), "--outcome", "y", "--out", str(tmp_path / "r.parquet"),
                 "--r-inference", "--n-bootstrap", "0"]) == 0


def test_a_doubled_period_is_written_once(capsys, tmp_path):
    from didmem.cli import _cli_message
    from didmem.errors import PanelError

    text = _cli_message("score", PanelError("it failed: bad footer.. Remove it. Wait... then."))
    assert text == "it failed: bad footer. Remove it. Wait... then."


def test_the_summary_says_the_fit_came_from_a_folder(tmp_path, frame, capsys):
    folder = _write(tmp_path / "data", frame, n_files=2)
    assert main(["estimate", str(folder), "--outcome", "y", "--out", str(tmp_path / "r.parquet"),
                 "--n-bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert (f"  source: the parquet folder {str(folder)!r}, read here in bounded memory and "
            "fitted from its moments") in out
    one = tmp_path / "one.parquet"
    frame.to_parquet(one)
    assert main(["estimate", str(one), "--outcome", "y", "--out", str(tmp_path / "s.parquet"),
                 "--n-bootstrap", "0"]) == 0
    assert "source:" not in capsys.readouterr().out


def test_the_settings_keep_the_source_and_the_report_shows_it(tmp_path, frame):
    import dataclasses

    from didmem.report import render_report
    from didmem.results._settings import ResultSettings

    res = didmem.DiDEstimator(n_bootstrap=0).fit(
        didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y"))
    assert res.settings.source == ""  # a panel in memory says nothing more
    routed = dataclasses.replace(res.settings, source="a parquet folder's moments, on Ray")
    doc = routed.to_doc()
    assert ResultSettings.from_doc(doc) == routed
    del doc["source"]  # a file written before the source was kept
    assert ResultSettings.from_doc(doc).source == ""
    saved = didmem.load_result(res.save(tmp_path / "r.parquet"))
    page = render_report(dataclasses.replace(saved, settings=routed))
    assert ("<td class='k'>source</td><td>a parquet folder&#x27;s moments, on Ray</td>"
            in page)
    assert "<td class='k'>source</td>" not in render_report(saved)
