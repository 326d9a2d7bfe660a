"""From (unit, step) exposure rows to cohort, cohort_2, ... columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from didmem.orders.exposures import cohort_column, exposure_cohorts
from didmem.errors import ParameterError


def test_cohorts_by_exposure():
    table = pd.DataFrame({"unit": ["a", "a", "a", "b", "c", "c"],
                          "step": [25, 3, 12, 30, 7, 8]})
    out = exposure_cohorts(table, ["a", "b", "c", "v"], [10, 20, 30])
    assert list(out.columns) == ["unit", "cohort", "cohort_2", "cohort_3", "exposures"]
    expected = pd.DataFrame({
        "unit": ["a", "b", "c", "v"],
        "cohort": [10.0, 30.0, 10.0, np.nan],
        "cohort_2": [20.0, np.nan, 10.0, np.nan],  # two exposures in one macro-batch share it
        "cohort_3": [30.0, np.nan, np.nan, np.nan],
        "exposures": [3, 1, 2, 0],
    })
    pd.testing.assert_frame_equal(out, expected)


def test_later_exposures_after_the_last_checkpoint_have_not_happened():
    table = pd.DataFrame({"unit": [1, 1, 1], "step": [5, 15, 99]})
    out = exposure_cohorts(table, [1], [10, 20])
    assert out.loc[0, "cohort"] == 10 and out.loc[0, "cohort_2"] == 20
    assert "cohort_3" not in out.columns and out.loc[0, "exposures"] == 2


def test_first_exposure_after_the_last_checkpoint_is_refused():
    table = pd.DataFrame({"unit": [1, 2], "step": [5, 21]})
    with pytest.raises(ParameterError, match=r"order.csv: 1 units are first trained on after "
                                             r"the last checkpoint \(20\), e.g. unit 2 at step 21"):
        exposure_cohorts(table, [1, 2], [10, 20], where="order.csv")


def test_max_exposures_and_columns():
    table = pd.DataFrame({"unit": [1, 1, 1], "step": [1, 2, 3]})
    out = exposure_cohorts(table, [1], [1, 2, 3], max_exposures=2)
    assert list(out.columns) == ["unit", "cohort", "cohort_2", "exposures"]
    assert out.loc[0, "exposures"] == 3
    assert [cohort_column(k) for k in (1, 2, 3)] == ["cohort", "cohort_2", "cohort_3"]


def test_bad_steps_name_the_source():
    with pytest.raises(ParameterError, match=r"^x: Training steps must be positive integers"):
        exposure_cohorts(pd.DataFrame({"unit": [1], "step": [0.5]}), [1], [10], where="x")
    with pytest.raises(ParameterError, match="it lacks 'step'"):
        exposure_cohorts(pd.DataFrame({"unit": [1]}), [1], [10])
