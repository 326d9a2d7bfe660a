"""The cohort rules of didmem.cohorts: didmem's and the paper's, at and between boundaries."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from didmem import ParameterError, cohort_from_sequence_index
from didmem.backends import FrameBackend
from didmem.orders.pythia import treatment_checkpoint
from didmem.cohorts import (
    PAPER_LAST_STEP,
    cohort_from_step,
    paper_first_epoch,
    step_from_sequence_index,
)
from didmem.errors import DataDroppedWarning


def test_the_two_rules_at_the_boundaries():
    # worked out by hand with B = 1024, S = 1000 (docs/pythia.rst has the same table)
    seq = [-1, 0, 1, 1023, 1024, 1_023_999, 1_024_000, 1_024_001, 2_048_000]
    didmem_rule = [np.inf, 1000, 1000, 1000, 1000, 1000, 2000, 2000, 3000]
    paper_rule = [np.inf, np.inf, 1000, 1000, 1000, 1000, 1000, 2000, 2000]
    np.testing.assert_array_equal(cohort_from_sequence_index(seq), didmem_rule)
    np.testing.assert_array_equal(cohort_from_sequence_index(seq, rule="paper"), paper_rule)
    with pytest.raises(ParameterError, match="The 'rule' parameter of cohort_from_sequence_index"):
        cohort_from_sequence_index(seq, rule="lesci")


def test_cohort_from_step_is_the_first_checkpoint_at_or_after():
    # the contract of the study configuration: step 1000 -> 1000, step 1001 -> 2000
    got = cohort_from_step([1, 999, 1000, 1001, 2000, np.nan], [0, 1000, 2000])
    np.testing.assert_array_equal(got, [1000, 1000, 1000, 2000, 2000, np.inf])
    np.testing.assert_array_equal(cohort_from_step([1, 2, 3, 5], [4, 0, 2, 8]), [2, 2, 4, 8])
    with pytest.raises(ParameterError, match="trained after the last checkpoint 2000"):
        cohort_from_step([2001], [0, 1000, 2000])
    with pytest.raises(ParameterError, match="positive integers; got 0 "):
        cohort_from_step([0], [0, 1000])
    with pytest.raises(ParameterError, match="positive integers; got 1.5 "):
        cohort_from_step([1.5], [0, 1000])
    np.testing.assert_array_equal(step_from_sequence_index([0, 1023, 1024, -3]),
                                  [1, 1, 2, np.nan])


@settings(deadline=None, max_examples=60)
@given(st.lists(st.integers(-5, 10**5), min_size=1, max_size=50),
       st.integers(1, 2048), st.integers(1, 1200))
def test_rules_against_their_definitions(seq, batch, every):
    seq = np.array(seq)
    ours = cohort_from_sequence_index(seq, batch, every)
    # didmem's closed form is the first checkpoint at or after the training step
    steps = step_from_sequence_index(seq, batch)
    grid = np.arange(0, (np.nanmax(steps, initial=0) // every + 2) * every, every)
    np.testing.assert_array_equal(ours, cohort_from_step(steps, grid))
    if (seq >= 0).any():
        np.testing.assert_array_equal(ours, treatment_checkpoint(seq, grid, batch))
    # the paper's rule, written out with math.ceil
    # boundaries are the interesting indices: add the first sequence of a macro-batch
    seq = np.r_[seq, batch * every * (1 + seq[-1] % 3)]
    ours = cohort_from_sequence_index(seq, batch, every)
    steps = step_from_sequence_index(seq, batch)
    grid = np.arange(0, (np.nanmax(steps, initial=0) // every + 2) * every, every)
    np.testing.assert_array_equal(ours, cohort_from_step(steps, grid))
    paper = [math.ceil(math.ceil(i / batch) / every) * every if i > 0 else np.inf for i in seq]
    np.testing.assert_array_equal(cohort_from_sequence_index(seq, batch, every, rule="paper"),
                                  paper)
    # they differ only at the first sequence of a macro-batch
    differ = ours != cohort_from_sequence_index(seq, batch, every, rule="paper")
    assert np.all(seq[differ] % (batch * every) == 0)


def test_frame_backend_paper_rule_keeps_the_first_epoch():
    rows = [(s, t, float(s % 7 + t / 1000)) for s in (0, 1_024_000, 97_280_000, -4)
            for t in (0, 95_000, 96_000)]
    frame = pd.DataFrame(rows, columns=["seq_idx", "step", "sup_seq"])
    with pytest.warns(DataDroppedWarning, match="dropped 4 of 12 rows .* after step 95000"):
        paper = FrameBackend(frame, layout="paper", cohort_rule="paper")
    scored = paper.score()
    assert paper.checkpoints == (0, 95_000)
    cohorts = scored.drop_duplicates("unit").set_index("unit")["cohort"].to_dict()
    # 97,280,000 = 95,000 batches of 1024: cohort 95,000 by the paper, 96,000 by didmem
    assert cohorts == {-4: np.inf, 0: np.inf, 1_024_000: 1000.0, 97_280_000: 95_000.0}
    ours = FrameBackend(frame, layout="paper").score()  # didmem's rule keeps every row
    assert len(ours) == 12 and set(ours["cohort"]) == {np.inf, 1000, 2000, 96_000}
    with pytest.raises(ParameterError, match="The 'cohort_rule' parameter of FrameBackend"):
        FrameBackend(frame, cohort_rule="Paper")
    kept = paper_first_epoch(pd.DataFrame({"time": [0, 1], "cohort": [np.nan, PAPER_LAST_STEP]}))
    assert len(kept) == 2
