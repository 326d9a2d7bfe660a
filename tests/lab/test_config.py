"""Settings of the lab: checks of impossible configurations and the learning-rate schedule."""

import itertools
import math

import pytest

from didmem.errors import ParameterError
from didmem.lab import LabConfig, demo_config, quick_config
from didmem.lab.trainer import learning_rate


def test_presets_are_valid_and_consistent():
    for cfg in (demo_config(), quick_config()):
        assert cfg.n_steps % cfg.checkpoint_every == 0
        assert cfg.checkpoints[0] == 0 and cfg.checkpoints[-1] == cfg.n_steps
        assert cfg.cohorts == cfg.checkpoints[1 + cfg.burn_in:]
        assert set(cfg.exact_cohort_steps) <= set(cfg.cohorts)
        assert cfg.seq_len <= cfg.max_positions


def test_round_trip_through_dict():
    cfg = quick_config(seed=3, exact_cohorts=(24,), text_files=())
    assert LabConfig.from_dict(cfg.to_dict()) == cfg
    assert LabConfig.from_dict(demo_config().to_dict()) == demo_config()


def test_unknown_setting_is_refused():
    with pytest.raises(ParameterError, match="Unknown LabConfig settings"):
        LabConfig.from_dict({"n_stepz": 3})


def test_more_analysed_than_a_batch_holds():
    with pytest.raises(ParameterError, match="do not fit in a batch, which holds 16"):
        quick_config(placement="last_batch", n_analysed=17)
    # spread placement: the capacity is the whole macro-batch
    with pytest.raises(ParameterError, match="macro-batch, which holds 192"):
        quick_config(placement="spread", n_analysed=193)
    quick_config(placement="last_batch", n_analysed=16)


def test_burn_in_must_leave_a_cohort():
    assert quick_config(burn_in=0).cohorts == (12, 24, 36, 48, 60)
    assert quick_config(burn_in=4).cohorts == (60,)
    with pytest.raises(ParameterError, match="burn_in=5 leaves no cohort"):
        quick_config(burn_in=5)


def test_checkpoints_must_divide_steps():
    with pytest.raises(ParameterError, match="checkpoint_every=12 does not divide n_steps=50"):
        quick_config(n_steps=50)


def test_sequence_beyond_model_positions():
    with pytest.raises(ParameterError, match="seq_len=40 exceeds the model's max_positions=32"):
        quick_config(seq_len=40)


def test_other_impossible_settings():
    with pytest.raises(ParameterError, match="must be even"):
        quick_config(n_subset_models=3)
    with pytest.raises(ParameterError, match="not cohorts of this run"):
        quick_config(exact_cohorts=(13,))
    with pytest.raises(ParameterError, match="'placement' parameter of LabConfig must be one of"):
        quick_config(placement="middle")
    with pytest.raises(ParameterError, match="too short for a secret"):
        quick_config(seq_len=10, secret_digits=8)
    with pytest.raises(ParameterError, match=r"'batch_size' parameter of LabConfig must be an "
                                             r"integer in \[1, inf\]. Got 0"):
        quick_config(batch_size=0)
    with pytest.raises(ParameterError, match="multiple of n_heads"):
        quick_config(hidden_size=30, n_heads=4)


def test_exact_cohorts_all_and_auto():
    for cfg in (demo_config(), quick_config()):
        assert cfg.exact_cohorts == "all" and cfg.exact_cohort_steps == cfg.cohorts
    assert demo_config(n_steps=320, checkpoint_every=32, burn_in=0,
                       exact_cohorts="auto").exact_cohort_steps == (96, 192, 288)
    assert quick_config(n_steps=48, checkpoint_every=12, burn_in=0,
                        exact_cohorts="auto").exact_cohort_steps == (12, 24, 48)
    assert quick_config(exact_cohorts="all").to_dict()["exact_cohorts"] == "all"
    assert quick_config(exact_cohorts=()).exact_cohort_steps == ()
    assert quick_config(exact_cohorts="auto").to_dict()["exact_cohorts"] == "auto"


def test_learning_rate_schedule():
    cfg = quick_config(learning_rate=0.01, warmup_steps=4, min_lr_ratio=0.1)
    lrs = [learning_rate(s, cfg) for s in range(1, cfg.n_steps + 1)]
    assert lrs[:4] == pytest.approx([0.0025, 0.005, 0.0075, 0.01])
    assert max(lrs) == pytest.approx(0.01)
    assert lrs[-1] == pytest.approx(0.001)
    after = lrs[3:]
    assert all(a >= b for a, b in itertools.pairwise(after))  # cosine decay is monotone
    mid = 4 + (cfg.n_steps - 4) // 2
    assert learning_rate(mid, cfg) == pytest.approx(0.001 + 0.009 * 0.5 * (1 + math.cos(math.pi * 0.5)))
