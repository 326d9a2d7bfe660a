"""didmem compare: two models' panels (paired), subgroups of one panel, and its refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.cli import main

pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def panels(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare")
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=30,
                                           n_never_treated=60, seed=0)
    df["domain"] = np.where(df["unit"] % 2 == 0, "code", "prose")
    other = df.copy()
    other["y"] = df["y"] + np.random.default_rng(1).normal(0.0, 0.3, len(df))
    a, b = d / "big.parquet", d / "small.parquet"
    df.to_parquet(a)
    other.to_parquet(b)
    return a, b


def test_compare_two_panels_prints_the_paired_difference(panels, tmp_path, capsys):
    out = tmp_path / "diff.csv"
    assert main(["compare", str(panels[0]), str(panels[1]), "--outcome", "y",
                 "--labels", "1.4B,410M", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1.4B's instantaneous memorisation is" in text and "paired on all instances" in text
    cells = pd.read_csv(out)
    a, b = (didmem.DiDEstimator(n_bootstrap=0).fit(
        didmem.Panel(pd.read_parquet(p), unit="unit", time="time", cohort="cohort",
                     outcome="y")) for p in panels)
    expected = didmem.compare_profiles(a, b).to_frame()
    np.testing.assert_allclose(cells["std_error"], expected["std_error"], rtol=1e-10)
    assert np.all(cells["std_error"] < cells["unpaired_std_error"])


def test_compare_by_feature_tests_equality_across_subgroups(panels, capsys):
    assert main(["compare", str(panels[0]), "--by", "domain", "--outcome", "y"]) == 0
    text = capsys.readouterr().out
    assert "Memorisation by 'domain': 2 subgroups" in text and "estimate_code" in text


def test_compare_refuses_results_files_and_wrong_counts(panels, tmp_path, capsys):
    result = tmp_path / "r.parquet"
    assert main(["estimate", str(panels[0]), "--outcome", "y", "--n-bootstrap", "0",
                 "--out", str(result)]) == 0
    capsys.readouterr()
    assert main(["compare", str(result), str(panels[1]), "--outcome", "y"]) == 2
    assert "results file" in capsys.readouterr().err
    assert main(["compare", str(panels[0]), "--outcome", "y"]) == 2
    assert "two panel files" in capsys.readouterr().err
