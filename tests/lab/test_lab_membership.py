"""The lab scores the membership-inference metrics and judges them against its truth.

A small run (two cohorts, one exact) with every MIA score and a domain shift between the
training and validation instances; the statistical claims (AUCs, rank correlations over
seeds) are in benchmarks/mia_lab.py, not here.
"""

import json

import numpy as np
import pandas as pd
import pytest

from didmem.errors import ParameterError

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCORES = ("mean_token_loglik", "min_k_logprob", "min_k_plus_plus", "zlib_ratio",
          "reference_ratio")


@pytest.fixture(scope="module")
def mia_run(tmp_path_factory):
    from didmem.lab import run

    return run(tmp_path_factory.mktemp("lab") / "mia", quick=True, seed=2, n_steps=36,
               n_analysed=64, n_validation=96, exact_cohorts=(24,), truth_draws=0, metrics=SCORES,
               n_domains=2, validation_mix=0.0)


def test_lab_scores_the_mia_metrics_against_the_twins_last_checkpoint(mia_run):
    panel, truth = mia_run.panel, mia_run.truth
    assert set(SCORES) <= set(panel.columns) and np.isfinite(panel[list(SCORES)]).all().all()
    manifest = json.loads((mia_run.out_dir / "manifest.json").read_text())
    backend = manifest["derived"]["scoring_backend"]
    assert backend["reference"] == "twin/checkpoints/step36"
    # every run is scored against the same reference model, so the truth of the ratio is
    # the truth of the mean log-likelihood (up to the rounding of the two differences)
    ratio = truth[truth["metric"] == "reference_ratio"].reset_index(drop=True)
    loglik = truth[truth["metric"] == "mean_token_loglik"].reset_index(drop=True)
    np.testing.assert_allclose(ratio["tau"], loglik["tau"], atol=1e-6)
    twin = pd.read_parquet(mia_run.out_dir / "twin_scores.parquet")
    last = twin[twin["time"] == 36]
    np.testing.assert_allclose(last["reference_ratio"], 0.0, atol=1e-6)  # twin vs itself
    # min-k% (k = 0.2) averages the lowest tokens: never above the mean
    assert (panel["min_k_logprob"] <= panel["mean_token_loglik"] + 1e-9).all()
    # the study file re-scores the main run only: no reference model there
    study = (mia_run.out_dir / "study.toml").read_text()
    assert "reference_ratio" not in study and "min_k_logprob" in study


def test_membership_comparison_table(mia_run):
    from didmem.lab import membership_comparison
    from didmem.lab.membership import COMPARISON_COLUMNS

    table = membership_comparison(mia_run)
    assert list(table.columns) == COMPARISON_COLUMNS and list(table["score"]) == list(SCORES)
    for col in ("auc", "auc_untrained"):
        assert table[col].between(0, 1).all()
        assert (table[f"{col}_lower"] <= table[col]).all()
        assert (table[col] <= table[f"{col}_upper"]).all()
    assert table["spearman"].between(-1, 1).all()
    assert np.isfinite(table[["mia_bias", "did_nyt_bias", "did_never_bias"]]).all().all()
    # the ratio's and the loss's DiD see the same truth and differ only by the reference
    # model's score, constant over checkpoints for each instance: DiD cancels it exactly
    by = table.set_index("score")
    assert by.loc["reference_ratio", "did_nyt_bias"] == pytest.approx(
        by.loc["mean_token_loglik", "did_nyt_bias"], abs=1e-6)
    with pytest.raises(ParameterError, match="has no \\['extractable'\\]"):
        membership_comparison(mia_run, scores=["extractable"])
