"""didmem estimate / plot / report on a panel file, and their one-line user errors."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

import didmem
from didmem.cli import main

pytest.importorskip("pyarrow")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def panel_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("panels")
    paths = []
    for seed in (0, 1):
        df, _ = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=30,
                                               n_never_treated=80, seed=seed)
        df = df.rename(columns={"unit": "id", "y": "loglik"})
        path = d / (f"panel{seed}.parquet" if seed == 0 else f"panel{seed}.csv")
        df.to_parquet(path) if path.suffix == ".parquet" else df.to_csv(path, index=False)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def results_files(panel_files, tmp_path_factory):
    d = tmp_path_factory.mktemp("results")
    out = []
    for i, panel in enumerate(panel_files):
        path = d / f"model{i}.parquet"
        assert main(["estimate", str(panel), "--outcome", "loglik", "--unit", "id",
                     "--n-bootstrap", "99", "--out", str(path)]) == 0
        out.append(path)
    return out


def test_estimate_writes_results_and_prints_summary(panel_files, tmp_path, capsys):
    path = tmp_path / "r.parquet"
    assert main(["estimate", str(panel_files[1]), "--outcome", "loglik", "--unit", "id",
                 "--estimator", "difference", "--control", "not_yet_treated",
                 "--lower-is-better", "--n-bootstrap", "99", "--out", str(path)]) == 0
    out = capsys.readouterr().out
    assert "DifferenceEstimator on outcome 'loglik' (sign flipped" in out and str(path) in out
    loaded = didmem.load_result(path)
    assert loaded.params["control_group"] == "not_yet_treated" and loaded.lower_is_better
    assert len(pd.read_parquet(path)) == len(loaded.to_frame())
    assert out.index("event-time Wald") < out.index("R did's Wald")  # calibrated test first
    assert loaded.params["small_sample"] is True


def test_estimate_r_inference_flag(panel_files, tmp_path, capsys):
    path = tmp_path / "r.parquet"
    assert main(["estimate", str(panel_files[1]), "--outcome", "loglik", "--unit", "id",
                 "--draws", "99", "--r-inference", "--out", str(path)]) == 0
    loaded = didmem.load_result(path)
    assert loaded.params["small_sample"] is False and loaded.settings.multiplier == "rademacher"
    assert loaded.settings.correction_name is None


@pytest.mark.parametrize("kind", ["profile", "instantaneous", "persistent", "residual",
                                  "pretrends"])
def test_plot_each_kind(results_files, tmp_path, kind, capsys):
    out = tmp_path / f"{kind}.png"
    assert main(["plot", str(results_files[0]), "--figure", kind, "--out", str(out),
                 "--dpi", "50"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(out) in capsys.readouterr().out


def test_plot_correlation_and_default_name(results_files):
    assert main(["plot", *map(str, results_files), "--figure", "correlation", "--dpi", "50"]) == 0
    assert (results_files[0].parent / "model0_correlation.png").exists()


def test_report_of_two_results(results_files, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", *map(str, results_files), "--out", str(out), "--title", "T"]) == 0
    text = out.read_text()
    # six figures per result (the event study included), the correlation
    assert "Correlation of profiles" in text and text.count("data:image/png;base64,") == 13


def test_report_with_labels_and_truth(panel_files, results_files, tmp_path):
    _, truth = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=30,
                                              n_never_treated=80, seed=0)
    truth_path = tmp_path / "truth.csv"
    truth.to_csv(truth_path, index=False)
    out = tmp_path / "report.html"
    assert main(["report", *map(str, results_files), "--out", str(out), "--labels",
                 "first,second", "--truth", str(truth_path)]) == 0
    text = out.read_text()
    assert "<h2>first</h2>" in text and "<h2>second</h2>" in text
    assert text.count("the band covers the truth in") == 4  # finding and truth section, twice
    png = tmp_path / "corr.png"
    assert main(["plot", *map(str, results_files), "--figure", "correlation", "--labels",
                 "first,second", "--out", str(png)]) == 0
    assert png.exists()


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "didmem.cli", *args], capture_output=True,
                          text=True)


@pytest.mark.parametrize("args, words", [
    (["estimate", "missing.parquet", "--outcome", "y", "--out", "r.parquet"], "No panel file"),
    (["estimate", "PANEL", "--outcome", "nope", "--unit", "id", "--out", "r.parquet"], "nope"),
    (["estimate", "PANEL", "--outcome", "loglik", "--unit", "id", "--out", "r.csv"], ".parquet"),
    (["plot", "missing.parquet", "--figure", "profile"], "No results file"),
    (["plot", "RESULTS", "--figure", "correlation"], "two or more"),
    (["plot", "PANEL", "--figure", "profile"], "not a didmem results file"),
    (["report", "missing.parquet"], "No results file"),
    (["report", "RESULTS", "--truth", "missing.parquet"], "No truth file"),
    (["report", "RESULTS", "--labels", "a,b"], "one non-empty name per results file"),
    (["plot", "RESULTS", "--figure", "profile", "--labels", "a"], "--labels names the models"),
])
def test_user_errors_exit_2_with_one_line(args, words, panel_files, results_files, tmp_path):
    args = [str(panel_files[0]) if a == "PANEL" else str(results_files[0]) if a == "RESULTS"
            else str(tmp_path / a) if a.endswith((".parquet", ".csv")) else a for a in args]
    proc = _cli(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"didmem {args[0]}: error:") and words in proc.stderr
