"""The design: data order and cohorts, the analysed sample, twins, exact runs, subsets."""

import numpy as np
import pytest

from didmem.errors import ParameterError
from didmem.lab import build_design, quick_config


@pytest.fixture(scope="module")
def design():
    return build_design(quick_config(n_subset_models=4))


def test_design_is_deterministic():
    a, b = build_design(quick_config(seed=5)), build_design(quick_config(seed=5))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.order, b.order)
    np.testing.assert_array_equal(a.analysed_positions, b.analysed_positions)
    assert a.init_seed == b.init_seed
    c = build_design(quick_config(seed=6))
    assert not np.array_equal(a.tokens[: len(c.tokens)], c.tokens[: len(a.tokens)])


def test_order_and_cohorts(design):
    cfg = design.config
    assert design.order.shape == (cfg.n_positions,)
    pos = np.arange(cfg.n_positions)
    step = pos // cfg.batch_size + 1  # batch b is trained at step b + 1
    expected = np.ceil(step / cfg.checkpoint_every) * cfg.checkpoint_every
    np.testing.assert_array_equal(design.position_cohorts, expected)
    np.testing.assert_array_equal(design.analysed_cohorts,
                                  expected[design.analysed_positions])
    # n_analysed per cohort, each inside its own macro-batch
    counts = {g: int((design.analysed_cohorts == g).sum()) for g in cfg.cohorts}
    assert counts == {g: cfg.n_analysed for g in cfg.cohorts}
    # ids are numbered by first appearance; no duplicates without duplicate_fraction
    np.testing.assert_array_equal(design.order, np.arange(cfg.n_positions))
    assert (design.split[design.order] == "train").all()


def test_last_batch_placement():
    cfg = quick_config(placement="last_batch", n_analysed=5)
    d = build_design(cfg)
    batch = d.analysed_positions // cfg.batch_size
    step = batch + 1
    assert set(step) == set(cfg.cohorts)  # trained at the very step of its checkpoint


def test_validation_never_trained_on(design):
    assert not np.isin(design.validation_ids, design.order).any()
    assert (design.split[design.validation_ids] == "validation").all()


def test_twin_replaces_exactly_the_analysed_instances(design):
    twin = design.twin_order()
    changed = np.flatnonzero(twin != design.order)
    np.testing.assert_array_equal(changed, design.analysed_positions)
    np.testing.assert_array_equal(twin[changed], design.replacement_ids)
    # replacements are fresh: never in the main run, never validation, all distinct
    assert not np.isin(design.replacement_ids, design.order).any()
    assert not np.isin(design.replacement_ids, design.validation_ids).any()
    assert len(np.unique(design.replacement_ids)) == len(design.replacement_ids)
    assert (design.split[design.replacement_ids] == "replacement").all()
    assert len(np.unique(twin)) == len(twin)


def test_exact_order_replaces_one_cohort(design):
    g = design.config.cohorts[1]
    exact = design.exact_order(g)
    changed = np.flatnonzero(exact != design.order)
    np.testing.assert_array_equal(
        changed, design.analysed_positions[design.analysed_cohorts == g])
    np.testing.assert_array_equal(exact[changed], design.twin_order()[changed])


def test_other_replacement_draws_are_fresh_and_the_cohorts_own(design):
    """The extra exact runs (the truth's own noise) replace a cohort with other fresh
    instances: other cohorts' replacements, distinct, of the same domain, never trained on."""
    cfg = design.config
    assert design.other_replacements.shape == (cfg.truth_draws, len(design.analysed_ids))
    for g in cfg.cohorts:
        mine = design.analysed_cohorts == g
        draw = design.exact_order(g, draw=1)
        changed = np.flatnonzero(draw != design.order)
        np.testing.assert_array_equal(changed, design.analysed_positions[mine])
        new = draw[changed]
        assert len(np.unique(new)) == mine.sum()
        assert np.isin(new, design.replacement_ids[~mine]).all()
        assert not np.isin(new, design.order).any()
        np.testing.assert_array_equal(design.domains[new],
                                      design.domains[design.analysed_ids[mine]])


def test_other_replacements_keep_domains_and_need_room():
    design = build_design(quick_config(n_domains=2, truth_draws=2))
    for j in (1, 2):
        for g in design.config.cohorts:
            mine = design.analysed_cohorts == g
            new = design.exact_order(g, draw=j)[design.analysed_positions[mine]]
            np.testing.assert_array_equal(design.domains[new],
                                          design.domains[design.analysed_ids[mine]])
    with pytest.raises(ParameterError, match="truth_draws=1 needs other cohorts"):
        build_design(quick_config(n_steps=24))  # one cohort: no other replacements
    assert build_design(quick_config(n_steps=24, truth_draws=0)).other_replacements.size == 0


def test_balanced_membership(design):
    m = design.config.n_subset_models
    assert design.membership.shape == (m, len(design.analysed_ids))
    np.testing.assert_array_equal(design.membership.sum(axis=0), m // 2)
    assert len(set(design.subset_seeds.tolist())) == m
    for j in range(m):
        order = design.subset_order(j)
        out = ~design.membership[j]
        np.testing.assert_array_equal(
            order[design.analysed_positions],
            np.where(out, design.replacement_ids, design.analysed_ids))


def test_duplicates_are_fillers_only():
    cfg = quick_config(duplicate_fraction=0.25, duplicate_copies=3)
    d = build_design(cfg)
    ids, counts = np.unique(d.order, return_counts=True)
    duplicated = ids[counts > 1]
    assert set(counts) == {1, 3}
    n_fill = cfg.n_positions - len(d.analysed_ids)
    assert len(duplicated) == int(0.25 * n_fill) // 3
    assert not np.isin(d.analysed_ids, duplicated).any()
    # first-appearance numbering
    _, first = np.unique(d.order, return_index=True)
    assert (np.diff(first) > 0).all()
