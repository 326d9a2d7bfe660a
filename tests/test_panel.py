"""Panel validation: every bad input gets a clear error naming what and where."""

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem import PanelError, cohort_from_sequence_index

from .conftest import staggered_frame


def make(frame, **kw):
    args = dict(unit="unit", time="time", cohort="cohort", outcome="y")
    args.update(kw)
    return didmem.Panel(frame, **args)


@pytest.fixture
def frame():
    return staggered_frame(seed=1, n_units=12, n_times=4)


def test_dense_views(frame):
    panel = make(frame)
    assert panel.n_units == 12 and panel.n_times == 4
    y = panel.outcome_matrix()
    assert y.shape == (12, 4) and not y.flags.writeable
    first = frame[frame["unit"] == panel.units[3]].sort_values("time")["y"].to_numpy()
    np.testing.assert_array_equal(y[3], first)
    assert panel.cohorts.shape == (12,)
    back = panel.to_frame().sort_values(["unit", "time"]).reset_index(drop=True)
    expected = frame.sort_values(["unit", "time"]).reset_index(drop=True)
    np.testing.assert_array_equal(back["y"], expected["y"])
    assert "Panel(12 units x 4 times" in repr(panel)


def test_row_order_does_not_matter(frame):
    a = make(frame)
    b = make(frame.sample(frac=1.0, random_state=0))
    np.testing.assert_array_equal(a.outcome_matrix(), b.outcome_matrix())
    np.testing.assert_array_equal(a.cohorts, b.cohorts)


def test_never_treated_codes(frame):
    coded = frame.assign(cohort=frame["cohort"].replace(np.inf, 0.0))
    nan_coded = frame.assign(cohort=frame["cohort"].replace(np.inf, np.nan))
    base = make(frame)
    np.testing.assert_array_equal(make(coded, never_treated=0).cohorts, base.cohorts)
    np.testing.assert_array_equal(make(nan_coded).cohorts, base.cohorts)
    assert base.never_treated.sum() == np.isinf(base.cohorts).sum() > 0


def test_missing_and_misnamed_columns(frame):
    with pytest.raises(PanelError, match=r"outcome column 'Y' \(did you mean 'y'\?\)"):
        make(frame, outcome="Y")
    with pytest.raises(PanelError, match="cohort column 'first_treat'"):
        make(frame, cohort="first_treat")


def test_duplicate_rows(frame):
    dup = pd.concat([frame, frame.iloc[[0, 5]]])
    with pytest.raises(PanelError, match=r"Duplicate \(unit, time\) rows: 2 .* \(2 extra rows\)"):
        make(dup)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_outcomes(frame, bad):
    frame.loc[[3, 7], "y"] = bad
    with pytest.raises(PanelError, match=r"Outcome column 'y' has 2 NaN or infinite values, e.g. at"):
        make(frame)


def test_cohort_changing_within_unit(frame):
    frame.loc[frame.index[1], "cohort"] = 99.0
    with pytest.raises(PanelError, match=r"'cohort' \(cohort\) must be constant within a unit; .* for 1 units: 0"):
        make(frame)


def test_non_numeric_times(frame):
    frame["time"] = frame["time"].map(lambda t: f"step{int(t)}")
    with pytest.raises(PanelError, match=r"Column 'time' \(time\) must be numeric; .*'step1'"):
        make(frame)


def test_empty_panel(frame):
    with pytest.raises(PanelError, match="empty: the DataFrame has 0 rows"):
        make(frame.iloc[:0])


def test_unbalanced_panel_errors_then_drops(frame):
    holey = frame.drop(index=[2, 9])
    with pytest.raises(PanelError, match=r"unbalanced: 2 \(unit, time\) cells are missing across 2 of 12 units, first .*\(0, 4.0\)"):
        make(holey)
    with pytest.warns(didmem.DataDroppedWarning, match="Dropped 2 of 12 units"):
        panel = make(holey, balance="drop_incomplete_units")
    assert panel.n_units == 10


def test_weights_and_cluster_validation(frame):
    frame["w"] = 1.0
    frame["cl"] = np.repeat(np.arange(6), 8)
    panel = make(frame, weights="w", cluster="cl")
    assert panel.clusters.max() == 5
    frame.loc[0, "w"] = -1.0
    with pytest.raises(PanelError, match="weights.*positive and finite; 1 rows"):
        make(frame, weights="w")
    frame.loc[0, "w"] = 1.0
    frame.loc[1, "cl"] = 5
    with pytest.raises(PanelError, match=r"'cl' \(cluster\) must be constant within a unit"):
        make(frame, cluster="cl")


def test_bad_balance_option(frame):
    with pytest.raises(didmem.ParameterError, match="The 'balance' parameter of Panel must be one of"):
        make(frame, balance="drop")


def test_cohort_from_sequence_index_boundaries():
    # Pythia: 1024 sequences per batch, checkpoints every 1000 steps. Index 0 is in batch 0,
    # trained at step 1 and first seen by step1000; 1_023_999 is the last sequence of batch
    # 999 (step 1000), still cohort 1000; 1_024_000 opens batch 1000 (step 1001): cohort 2000.
    got = cohort_from_sequence_index([0, 1023, 1024, 1_023_999, 1_024_000, 2_047_999, -1, -5])
    np.testing.assert_array_equal(got, [1000, 1000, 1000, 1000, 2000, 2000, np.inf, np.inf])
    np.testing.assert_array_equal(
        cohort_from_sequence_index(np.array([0, 7, 8, 15, 16]), batch_size=2, steps_per_checkpoint=4),
        [4, 4, 8, 8, 12])
    with pytest.raises(didmem.ParameterError):
        cohort_from_sequence_index([0], batch_size=0)
