"""``didmem estimate DIR`` on a folder of parquet files equals ``didmem estimate FILE`` on the
same rows in one file, cell for cell (1e-9), for every group-time estimator, and refuses what
moments cannot give."""

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.cli import main

from ..test_panel_scan import _write


@pytest.fixture(scope="module")
def frame():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=20, n_never_treated=40,
                                           n_times=6, seed=21)
    return df


def _estimate(source, out, *extra):
    assert main(["estimate", str(source), "--outcome", "y", "--out", str(out), *extra]) == 0
    return didmem.load_result(out).to_frame()


@pytest.mark.parametrize("estimator", ["did", "difference"])
@pytest.mark.parametrize("extra", [("--n-bootstrap", "0"), ("--n-bootstrap", "0", "--control",
                                                              "not_yet_treated"), ()])
def test_folder_equals_file(tmp_path, frame, extra, estimator, capsys):
    extra = (*extra, "--estimator", estimator)
    folder = _write(tmp_path / "data", frame, n_files=8)
    one = tmp_path / "one.parquet"
    frame.to_parquet(one)
    got = _estimate(folder, tmp_path / "a.parquet", *extra)
    ref = _estimate(one, tmp_path / "b.parquet", *extra)
    columns = ["estimate", "std_error"] + (["ci_lower", "ci_upper"] if len(extra) > 2 else [])
    assert got[["cohort", "time"]].equals(ref[["cohort", "time"]])
    for col in columns:
        np.testing.assert_allclose(got[col], ref[col], rtol=1e-9, atol=1e-12, err_msg=col)


def test_folder_refuses_what_moments_cannot_give_and_a_file_refuses_ray(tmp_path, frame,
                                                                         capsys):
    folder = _write(tmp_path / "data", frame, n_files=2)
    out = str(tmp_path / "r.parquet")
    assert main(["estimate", str(folder), "--outcome", "y", "--out", out,
                 "--exposure", "2"]) == 2
    assert "fitted from moments" in capsys.readouterr().err
    one = tmp_path / "one.parquet"
    frame.to_parquet(one)
    assert main(["estimate", str(one), "--outcome", "y", "--out", out, "--runner", "ray"]) == 2
    assert "folder of parquet" in capsys.readouterr().err
    assert main(["estimate", str(folder), "--outcome", "y", "--out", out, "--n-bootstrap", "50",
                 "--r-inference"]) == 2  # Rademacher multipliers need each unit
    assert "Gaussian multipliers only" in capsys.readouterr().err


def test_a_bad_folder_names_the_file(tmp_path, frame, capsys):
    folder = _write(tmp_path / "data", frame, n_files=3)
    bad = pd.read_parquet(folder / "part-001.parquet").rename(columns={"cohort": "g"})
    bad.to_parquet(folder / "part-001.parquet")
    out = tmp_path / "r.parquet"
    assert main(["estimate", str(folder), "--outcome", "y", "--out", str(out)]) == 2
    assert "part-001.parquet" in capsys.readouterr().err
    assert not out.exists()
