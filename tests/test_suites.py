"""Each suite's checkpoint grid as published (didmem/data/checkpoints, with its source)."""

from __future__ import annotations

import pytest

from didmem.orders.pythia import PYTHIA_STEPS
from didmem.suites import SUITES, get_suite, read_checkpoint_grid


@pytest.mark.parametrize("name", sorted(SUITES))
def test_every_grid_is_sorted_with_tokens_and_a_source(name):
    suite = get_suite(name)
    steps = suite.checkpoints
    assert list(steps) == sorted(set(steps)) and steps[0] >= 0
    per_step = suite.batch_size * (2048 if suite.design_kind != "olmo"
                                   else suite.tokens_per_instance)
    assert suite.tokens == tuple(s * per_step for s in steps)
    assert "source: https://github.com/" in suite.source


def test_pythia_grid_is_the_readmes_154():
    assert get_suite("pythia-1.4b-deduped").checkpoints == tuple(PYTHIA_STEPS)
    assert len(PYTHIA_STEPS) == 154
    # the README: 299,892,736,000 tokens at step 143,000
    assert get_suite("pythia-70m").tokens[-1] == 299_892_736_000


def test_olmo_grids_are_allenais_published_lists():
    olmo = get_suite("olmo-7b")
    # checkpoints/official/OLMo-7B.csv at 206da7c7: 527 rows (557000 twice, from two runs),
    # from step 5000 (then 40000: the list has no step between) to 558223
    assert (len(olmo.checkpoints), olmo.checkpoints[:2], olmo.last_step) == (
        526, (5000, 40000), 558_223)
    assert "206da7c76bd7b6871726d8942155c19da87cb2a4/checkpoints/official/OLMo-7B.csv" in (
        olmo.source)
    olmo2 = get_suite("olmo-2-1124-7b")
    assert olmo2.checkpoints[:3] == (0, 150, 600) and olmo2.checkpoints[-2:] == (928_000,
                                                                                928_646)
    assert "README.md: stage1-step928646-tokens3896B" in olmo2.source
    # the README's revision names round the tokens up: 3,895.02e9 -> 'tokens3896B'
    assert olmo2.tokens[-1] == 3_895_023_632_384
    assert get_suite("olmo-2-0425-1b").last_step == 1_907_359


def test_grid_files_are_read_once():
    assert read_checkpoint_grid("pythia") is read_checkpoint_grid("pythia")
