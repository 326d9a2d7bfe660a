"""Regression tests (issue 11): the CLI on unusual input: one-line errors and warnings, advice
in terms of its flags, and options it had no way to express."""

import re
import subprocess
import sys

import numpy as np
import pytest

import didmem
from didmem.cli import main


@pytest.fixture()
def panel_csv(tmp_path):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20,
                                           n_never_treated=40, seed=0)
    path = tmp_path / "panel.csv"
    df.to_csv(path, index=False)
    return df, path


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "didmem.cli", *map(str, args)],
                          capture_output=True, text=True)


def _one_line_error(proc, command):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"didmem {command}: error: "), proc.stderr
    return lines[0]


def test_corrupt_parquet_is_one_line(tmp_path):
    pytest.importorskip("pyarrow")
    bad = tmp_path / "panel.parquet"
    bad.write_bytes(b"PAR1 this is not really parquet")
    line = _one_line_error(_cli("estimate", bad, "--outcome", "y", "--out",
                                tmp_path / "r.parquet"), "estimate")
    assert "Could not read the panel file" in line and "panel.parquet" in line


def test_corrupt_csv_is_one_line(tmp_path):
    bad = tmp_path / "panel.csv"
    bad.write_bytes(b"\xff\xfe\x00 binary \x00\x81")
    line = _one_line_error(_cli("estimate", bad, "--outcome", "y", "--out",
                                tmp_path / "r.parquet"), "estimate")
    assert "panel.csv" in line


def test_plot_dpi_zero_is_refused(tmp_path, capsys):
    assert main(["plot", str(tmp_path / "r.parquet"), "--figure", "profile", "--dpi", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("didmem plot: error: --dpi must be dots per inch in [36, 1200]") \
        and err.rstrip().endswith("got 0.") and err.count("\n") == 1


def test_report_refuses_a_pdf_name(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    pytest.importorskip("matplotlib")
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=20,
                                           n_never_treated=40, seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    res = didmem.DiDEstimator(n_bootstrap=0).fit(panel).save(tmp_path / "r.parquet")
    assert main(["report", str(res), "--out", str(tmp_path / "rep.pdf")]) == 2
    assert "must end in '.html'" in capsys.readouterr().err
    assert not (tmp_path / "rep.pdf").exists()


def test_never_treated_option(panel_csv, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    df, path = panel_csv
    df = df.assign(time=df["time"] + 2003,
                   cohort=np.where(np.isinf(df["cohort"]), 0, df["cohort"] + 2003))
    df.to_csv(path, index=False)
    out = tmp_path / "r.parquet"
    assert main(["estimate", str(path), "--outcome", "y", "--out", str(out), "--draws", "0"]) == 2
    err = capsys.readouterr().err
    assert "pass --never-treated 0" in err and "never_treated=0" not in err
    assert main(["estimate", str(path), "--outcome", "y", "--out", str(out), "--draws", "0",
                 "--never-treated", "0"]) == 0
    text = capsys.readouterr().out
    assert "40 never-treated" in text
    assert "outcome='y'" in text and "outcome=None" not in text


@pytest.mark.filterwarnings("always::didmem.DataDroppedWarning")  # shown by the CLI, on stderr
def test_balance_option_and_its_advice(panel_csv, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    df, path = panel_csv
    df.iloc[3:].to_csv(path, index=False)  # unit 0 misses three times
    out = tmp_path / "r.parquet"
    assert main(["estimate", str(path), "--outcome", "y", "--out", str(out), "--draws", "0"]) == 2
    err = capsys.readouterr().err
    assert "--balance drop_incomplete_units" in err and "balance=" not in err
    assert main(["estimate", str(path), "--outcome", "y", "--out", str(out), "--draws", "0",
                 "--balance", "drop_incomplete_units"]) == 0
    captured = capsys.readouterr()
    assert "didmem: warning: Dropped 1 of 100 units" in captured.err
    assert re.search(r"units: 99 \(\d+ in 3 cohorts, \d+ never-treated\)", captured.out)


def test_column_errors_point_to_the_flags(panel_csv, tmp_path):
    df, path = panel_csv
    df.rename(columns={"unit": "id"}).to_csv(path, index=False)
    line = _one_line_error(_cli("estimate", path, "--outcome", "y", "--out",
                                tmp_path / "r.parquet"), "estimate")
    assert "unit column 'unit'" in line and "--unit, --time, --cohort and --outcome" in line


def test_warnings_are_one_line_without_source(panel_csv, tmp_path):
    pytest.importorskip("pyarrow")
    df, path = panel_csv
    df.iloc[3:].to_csv(path, index=False)
    proc = _cli("estimate", path, "--outcome", "y", "--out", tmp_path / "r.parquet", "--draws",
                "0", "--balance", "drop_incomplete_units")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines and all(line.startswith("didmem: warning: ") for line in lines), proc.stderr
    assert "Dropped 1 of 100 units" in proc.stderr
    assert ".py:" not in proc.stderr and "warnings.warn" not in proc.stderr


@pytest.mark.parametrize("value", ["", " ", "DIR", "missing.csv", "notes.txt"])
@pytest.mark.parametrize("command, option", [("report", "--truth"), ("power", "--pilot")])
def test_a_file_option_names_itself_in_its_error(tmp_path, capsys, command, option, value):
    """``didmem report R.parquet --truth ''`` said "A panel file must end in '.csv' or
    '.parquet'; got '.'": an empty value is the current folder to pathlib. Found in a fresh
    clone by the CLI property test (issue 50). Every file option names itself and its value."""
    value = {"DIR": str(tmp_path), "notes.txt": str(tmp_path / "notes.txt")}.get(value, value)
    (tmp_path / "notes.txt").write_text("not a panel")
    argv = {"report": ["report", str(tmp_path / "r.parquet"), "--out", str(tmp_path / "r.html")],
            "power": ["power", "--outcome", "y", "--out", str(tmp_path / "power")]}[command]
    assert main([*argv, option, value]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"didmem {command}: error: "), err
    assert option in lines[0], lines[0]
    assert not (tmp_path / "r.html").exists()
