"""Combining the twin's and the exact runs' instance effects into the truth (no torch)."""

import numpy as np
import pandas as pd
import pytest

from didmem.lab.truth import cohort_truth, combine_effects


def _effects(cohorts=(1, 2), times=(0, 1, 2), units_per=2, metric="m"):
    rows = []
    unit = 0
    for g in cohorts:
        for _ in range(units_per):
            for t in times:
                rows.append({"unit": unit, "cohort": g, "time": t, "metric": metric,
                             "effect": 0.1 * unit + 0.01 * t})
            unit += 1
    return pd.DataFrame(rows)


def test_exact_cohorts_take_the_exact_value_and_zero_before():
    twin = _effects()
    exact2 = twin[(twin["cohort"] == 2) & (twin["time"] >= 2)].assign(effect=[5.0, 7.0])
    out = combine_effects(twin, {2: exact2})
    assert list(out.columns) == ["unit", "cohort", "time", "metric", "effect", "effect_twin",
                                 "exact"]
    np.testing.assert_array_equal(out["effect_twin"], twin["effect"])
    g2 = out[out["cohort"] == 2]
    assert g2["exact"].all() and not out.loc[out["cohort"] == 1, "exact"].any()
    np.testing.assert_array_equal(g2.loc[g2["time"] < 2, "effect"], 0.0)
    np.testing.assert_array_equal(g2.loc[g2["time"] == 2, "effect"], [5.0, 7.0])
    g1 = out[out["cohort"] == 1]
    np.testing.assert_array_equal(g1["effect"], g1["effect_twin"])
    truth = cohort_truth(out)
    assert list(truth.columns) == ["cohort", "time", "metric", "tau", "tau_twin", "exact", "sd",
                                   "n_units"]
    cell = truth[(truth["cohort"] == 2) & (truth["time"] == 2)].iloc[0]
    assert cell["tau"] == 6.0 and cell["exact"] and cell["n_units"] == 2
    assert cell["tau_twin"] == pytest.approx(np.mean([0.22, 0.32]))
    assert cell["sd"] == pytest.approx(np.std([5.0, 7.0], ddof=1))


def test_missing_exact_score_is_an_error():
    twin = _effects()
    exact2 = twin[(twin["cohort"] == 2) & (twin["time"] >= 2)].iloc[:1]
    with pytest.raises(ValueError, match="exact run of cohort 2 lacks the score of unit 3"):
        combine_effects(twin, {2: exact2})


def test_without_exact_runs_the_truth_is_the_twins():
    twin = _effects()
    truth = cohort_truth(combine_effects(twin, {}))
    np.testing.assert_array_equal(truth["tau"], truth["tau_twin"])
    assert not truth["exact"].any()
