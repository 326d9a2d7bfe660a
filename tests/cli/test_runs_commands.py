"""``didmem estimate --run``, ``didmem report`` and ``didmem plot`` on a panel of several runs."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest

import didmem
from didmem.cli import main

pytest.importorskip("pyarrow")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def runs_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs-cli")
    df, truth = didmem.datasets.simulate_runs(n_runs=3, n_cohorts=3, units_per_cohort=20,
                                              n_never_treated=30, n_times=5, seed=2)
    panel, truth_path, out = tmp / "panel.parquet", tmp / "truth.parquet", tmp / "R.parquet"
    df.rename(columns={"run": "seed"}).to_parquet(panel)
    truth.rename(columns={"run": "seed"}).assign(run=truth["run"]).to_parquet(truth_path)
    assert main(["estimate", str(panel), "--outcome", "y", "--run", "seed", "--n-bootstrap",
                 "99", "--seed", "1", "--out", str(out)]) == 0
    return df, truth_path, out


def test_estimate_run_writes_one_file_with_pooled_and_per_run_rows(runs_files, capsys):
    df, _, out = runs_files
    res = didmem.load_result(out)
    assert isinstance(res, didmem.RunsResult) and res.run_column == "seed"
    frame = pd.read_parquet(out)  # any parquet reader sees the rows
    assert set(frame.loc[frame["run"].isna(), "estimand"]) == {"pooled", "within_instance"}
    assert sorted(frame.loc[frame["run"].notna(), "run"].unique()) == ["0", "1", "2"]
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         run="run")
    fitted = didmem.RunsEstimator(n_bootstrap=99, seed=1).fit(panel)
    pd.testing.assert_frame_equal(res.pooled.to_frame(), fitted.pooled.to_frame())
    assert pickle.loads(pickle.dumps(res)).summary() == res.summary()


def test_report_and_plot_of_a_runs_file(runs_files, tmp_path, capsys):
    _, truth, out = runs_files
    html = tmp_path / "r.html"
    assert main(["report", str(out), "--truth", str(truth), "--out", str(html)]) == 0
    page = html.read_text()
    assert "R: 3 runs compared" in page and "R: run 0" in page
    assert "The pooled band covers the mean truth over runs in" in page
    assert main(["plot", str(out), "--figure", "runs", "--out", str(tmp_path / "a.png")]) == 0
    assert main(["plot", str(out), "--figure", "profile", "--out", str(tmp_path / "b.png")]) == 0
    assert (tmp_path / "a.png").stat().st_size > 0
    assert main(["plot", str(out), "--figure", "residual"]) != 0
    assert "holds several runs" in capsys.readouterr().err


def test_estimate_run_refuses_what_it_cannot_fit(runs_files, tmp_path, capsys):
    df, _, _ = runs_files
    broken = df[~((df["run"] == 1) & (df["time"] == 4.0))]
    path = tmp_path / "broken.parquet"
    broken.to_parquet(path)
    assert main(["estimate", str(path), "--outcome", "y", "--run", "run",
                 "--out", str(tmp_path / "x.parquet")]) != 0
    assert "Run 1 lacks 1 checkpoint(s)" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()
    assert main(["estimate", str(path), "--outcome", "y", "--run", "run", "--estimator",
                 "difference", "--out", str(tmp_path / "y.parquet")]) != 0
    assert "--run fits" in capsys.readouterr().err
