"""Replicated lab runs: the summary over runs against hand computations, and a tiny replication."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from didmem.errors import ParameterError
from didmem.lab.replication import summarise_cells


def _cells(errors_by_seed, width=0.5):
    rows = []
    for seed, errors in enumerate(errors_by_seed):
        for j, e in enumerate(errors):
            tau = 0.1 * j
            rows.append({"seed": seed, "estimator": "a", "cohort": 1.0, "time": float(j + 1),
                         "estimate": tau + e, "ci_lower": tau + e - width,
                         "ci_upper": tau + e + width, "tau": tau})
    return pd.DataFrame(rows)


def test_summary_against_hand_computation():
    errors = [[0.1, 0.3, 0.2], [0.0, -0.2, 0.8], [0.6, 0.6, 0.0], [-0.1, 0.1, 0.3]]
    summary, runs = summarise_cells(_cells(errors))
    per_run = np.array([np.mean(e) for e in errors])
    row = summary.iloc[0]
    assert row["n_runs"] == 4 and row["n_cells"] == 3
    assert row["mean_error"] == pytest.approx(per_run.mean())
    se = per_run.std(ddof=1) / 2
    assert row["mc_se"] == pytest.approx(se)
    assert row["t"] == pytest.approx(per_run.mean() / se)
    assert row["p_value"] == pytest.approx(2 * stats.t.sf(abs(per_run.mean() / se), 3))
    assert row["rmse"] == pytest.approx(np.sqrt(np.mean(np.square(errors))))
    # width 0.5: the cells with |error| > 0.5 are not covered
    inside = np.abs(np.array(errors)) <= 0.5
    assert row["coverage"] == pytest.approx(inside.mean(axis=1).mean())
    assert row["covers_all"] == pytest.approx(inside.all(axis=1).mean())
    np.testing.assert_allclose(runs["mean_error"], per_run)
    corr = [np.corrcoef(0.1 * np.arange(3) + np.array(e), 0.1 * np.arange(3))[0, 1]
            for e in errors]
    assert row["corr"] == pytest.approx(np.mean(corr))
    assert row["corr_mc_se"] == pytest.approx(np.std(corr, ddof=1) / 2)


def test_estimators_without_intervals_have_no_coverage():
    cells = _cells([[0.1, 0.2], [0.3, 0.1]]).assign(ci_lower=np.nan, ci_upper=np.nan)
    summary, _ = summarise_cells(cells)
    assert np.isnan(summary.loc[0, "coverage"]) and np.isnan(summary.loc[0, "covers_all"])


def test_bad_arguments(tmp_path):
    from didmem.lab import replicate

    with pytest.raises(ParameterError, match="'n_seeds' parameter of replicate"):
        replicate(tmp_path, n_seeds=1)
    with pytest.raises(ParameterError, match="'truth' parameter of replicate"):
        replicate(tmp_path, n_seeds=2, truth="twin")


def test_tiny_replication(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import didmem
    from didmem.lab import replicate

    tiny = {"n_steps": 36, "n_validation": 32, "n_analysed": 8, "metrics": ("mean_token_loglik",)}
    rep = replicate(tmp_path, n_seeds=2, estimators={
        "did": didmem.DiDEstimator(n_bootstrap=99, seed=0),
        "difference": didmem.DifferenceEstimator()}, **tiny)
    assert sorted((tmp_path / f"seed{s}" / "manifest.json").is_file() for s in (0, 1)) == [True] * 2
    assert list(rep.summary["estimator"]) == ["did", "difference"]
    assert set(rep.runs["seed"]) == {0, 1}
    # the cells are each run's post-treatment cells against its exact truth
    truth = pd.read_parquet(tmp_path / "seed1" / "truth.parquet")
    truth = truth[(truth["metric"] == "mean_token_loglik") & (truth["time"] >= truth["cohort"])]
    did1 = rep.cells[(rep.cells["seed"] == 1) & (rep.cells["estimator"] == "did")]
    assert len(did1) == len(truth)
    merged = did1.merge(truth, on=["cohort", "time"], suffixes=("", "_file"))
    np.testing.assert_array_equal(merged["tau"], merged["tau_file"])
    row = rep.summary.set_index("estimator").loc["did"]
    means = rep.runs[rep.runs["estimator"] == "did"]["mean_error"]
    assert row["mean_error"] == pytest.approx(means.mean())
    assert "mc_se" in rep.to_text() and "2 lab runs" in rep.to_text()
