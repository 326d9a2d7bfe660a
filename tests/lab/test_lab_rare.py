"""Rare instances: a corpus feature that drives memorisation, carried by the panel, and two
models on the same instances (the lab's tests of heterogeneity and compare_profiles)."""

import numpy as np
import pytest

from didmem.errors import ParameterError
from didmem.lab import build_design, quick_config
from didmem.lab.corpus import MarkovCorpus


def test_rare_instances_are_drawn_for_every_split():
    d = build_design(quick_config(rare_share=0.3, n_validation=400))
    rare = d.rare_flags
    train = d.split == "train"
    assert 0.2 < rare[train].mean() < 0.4
    assert 0.2 < rare[d.validation_ids].mean() < 0.4
    # a replacement is rare exactly when the instance it replaces is
    np.testing.assert_array_equal(rare[d.replacement_ids], rare[d.analysed_ids])
    # rare text holds rarer words: higher mean surprisal under the unigram law
    s = d.corpus.surprisal(d.tokens)
    assert s[rare].mean() > s[~rare].mean() + 0.3


def test_without_rare_instances_nothing_changes():
    cfg = quick_config()
    d = build_design(cfg)
    assert d.rare is None and not d.rare_flags.any()
    assert "rare_share" not in cfg.to_dict() and "rare_jump" not in cfg.to_dict()
    assert quick_config(rare_share=0.2).to_dict()["rare_share"] == 0.2


def test_a_shift_per_instance_equal_to_the_scalar_draws_the_same():
    cfg = quick_config()
    corpus = MarkovCorpus(cfg, np.random.default_rng(0))
    for shift in (0.0, 0.4):
        a = corpus.sample(50, np.random.default_rng(3), shift=shift)
        b = corpus.sample(50, np.random.default_rng(3), shift=np.full(50, shift))
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ParameterError, match="shift must be a number or 50 numbers"):
        corpus.sample(50, np.random.default_rng(3), shift=np.zeros(3))


def test_surprisal_is_the_mean_over_the_words():
    cfg = quick_config()
    corpus = MarkovCorpus(cfg, np.random.default_rng(0))
    x = corpus.sample(4, np.random.default_rng(1))
    word_rank = {int(t): r for r, t in enumerate(corpus._word_ids)}
    for row, value in zip(x, corpus.surprisal(x)):
        ranks = [word_rank[int(t)] for t in row if int(t) in word_rank]
        assert len(ranks) == cfg.seq_len - 1 - cfg.secret_len
        assert value == pytest.approx(np.mean(-np.log(corpus.unigram[ranks])), rel=1e-12)


def test_rare_settings_are_checked():
    with pytest.raises(ParameterError, match="'rare_share' parameter of LabConfig"):
        quick_config(rare_share=1.0)
    with pytest.raises(ParameterError, match="'rare_jump' parameter of LabConfig"):
        quick_config(rare_share=0.5, rare_jump=0.0)


@pytest.mark.parametrize("change", [{"learning_rate": 5e-3}, {"hidden_size": 32},
                                    {"n_layers": 1, "intermediate_size": 64}])
def test_two_models_train_on_the_same_instances(change):
    """Changing only the model or its optimiser keeps the whole design: the instances, the
    data order, the cohorts and the replacements (so two such runs pair on their units)."""
    cfg = quick_config(rare_share=0.5)
    a, b = build_design(cfg), build_design(cfg.replace(**change))
    for name in ("tokens", "order", "analysed_ids", "analysed_cohorts", "replacement_ids",
                 "validation_ids", "rare"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.init_seed == b.init_seed


SMALL = dict(n_steps=36, n_validation=96, n_analysed=96, exact_cohorts=(36,),
             truth_draws=0, metrics=("mean_token_loglik",), rare_share=0.5)


@pytest.fixture(scope="module")
def rare_run(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from didmem.lab import run

    return run(tmp_path_factory.mktemp("rare") / "run", quick=True, seed=2, **SMALL)


def test_the_panel_and_tables_carry_the_features(rare_run):
    import pandas as pd

    panel = rare_run.panel
    assert {"rare", "surprisal"} <= set(panel.columns)
    per_unit = panel.groupby("unit")[["rare", "surprisal"]].nunique()
    assert (per_unit == 1).all().all()
    design = build_design(rare_run.config)
    units = panel["unit"].to_numpy()
    np.testing.assert_array_equal(panel["rare"], design.rare[units].astype(int))
    # validation instances have the feature too (heterogeneity needs it for the controls)
    val = panel[panel["cohort"].isna()]
    assert set(val["rare"]) == {0, 1}
    sample = pd.read_parquet(rare_run.out_dir / "sample.parquet")
    instances = pd.read_parquet(rare_run.out_dir / "instances.parquet")
    assert {"rare", "surprisal"} <= set(sample.columns) & set(instances.columns)


def test_heterogeneity_by_the_lab_feature_runs_on_its_panel(rare_run):
    from didmem import Panel, heterogeneity, moderator_slopes

    frame = rare_run.panel
    panel = Panel(frame, unit="unit", time="time", cohort="cohort",
                  outcome="mean_token_loglik", covariates=["rare"])
    het = heterogeneity(panel, by="rare", n_draws=0)
    assert het.groups == [0, 1]
    assert np.isfinite(het.equality("instantaneous")["statistic"]).all()
    slopes = moderator_slopes(Panel(frame, unit="unit", time="time", cohort="cohort",
                                    outcome="mean_token_loglik"),
                              frame.groupby("unit")["surprisal"].first(), n_draws=0)
    assert np.isfinite(slopes.to_frame()["slope"]).all()


def test_truth_controls_hold_the_spillover_instance_by_instance(rare_run):
    import pandas as pd

    controls = pd.read_parquet(rare_run.out_dir / "truth_controls.parquet")
    truth = rare_run.truth
    validation = rare_run.panel.loc[rare_run.panel["cohort"].isna(), "unit"].unique()
    assert set(controls["unit"]) == set(validation)
    assert set(controls["cohort"]) == {36}
    mean = controls.groupby(["cohort", "time", "metric"])["effect"].mean()
    exact = truth[truth["exact"] & (truth["time"] >= truth["cohort"])].set_index(
        ["cohort", "time", "metric"])["spillover"]
    np.testing.assert_allclose(mean.reindex(exact.index).to_numpy(), exact.to_numpy(),
                               rtol=0, atol=1e-12)
