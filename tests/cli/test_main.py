"""The command line: the demo end to end (quick scale) and user errors without tracebacks."""

import subprocess
import sys

import pandas as pd
import pytest

from didmem.cli import main


def test_demo_quick_end_to_end(tmp_path, capsys):
    pytest.importorskip("torch")  # the demo trains the lab model
    assert main(["demo", "--quick", "--out", str(tmp_path), "--draws", "200"]) == 0
    out = capsys.readouterr().out
    assert "instantaneous memorisation" in out and "truth vs estimate: RMSE" in out
    cells = pd.read_csv(tmp_path / "cells.csv")
    assert {"cohort", "time", "estimate", "std_error", "tau", "significant"} <= set(cells.columns)
    assert cells.loc[cells["post"], "tau"].notna().all()
    inst = pd.read_csv(tmp_path / "instantaneous.csv")
    assert len(inst) > 0 and inst["true_tau"].notna().all()
    assert (tmp_path / "lab" / "manifest.json").exists()
    for name in ("profile.png", "instantaneous.png", "persistent.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG" and name in out
    assert "report.html" in out and "data:image/png;base64," in (tmp_path / "report.html").read_text()
    import didmem

    assert len(didmem.load_result(tmp_path / "results.parquet").to_frame()) == len(cells)


def test_user_error_is_one_line_and_exit_2(tmp_path):
    """The lab refuses a foreign --out before it loads torch, so this runs without it."""
    (tmp_path / "other.txt").write_text("not a lab run")
    proc = subprocess.run([sys.executable, "-m", "didmem.cli", "lab", "--quick", "--out",
                           str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("didmem lab: error:") and proc.stderr.count("\n") == 1


def test_help_explains_commands(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out and "lab" in out
