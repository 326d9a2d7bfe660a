"""Combining the twin's and the exact runs' instance effects into the truth (no torch)."""

import numpy as np
import pandas as pd
import pytest

from didmem.lab.truth import (cohort_truth, combine_effects, direct_effects, draw_noise,
                               instance_effects, mean_effect, not_yet_treated_effect)


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


def _scores(units, times, value):
    """Long scores ``unit``, ``time``, ``m`` with ``m = value(unit, time)``."""
    return pd.DataFrame([{"unit": u, "time": t, "m": float(value(u, t))}
                         for u in units for t in times])


def test_spillover_is_the_mean_effect_on_the_never_treated_and_the_direct_effect_subtracts_it():
    times = (2, 3)
    main = _scores(range(6), times, lambda u, t: u + t)
    # the counterfactual run: treated units 0, 1 lose 1.0; every unit drifts by 0.1 * t
    cf = _scores(range(6), times, lambda u, t: u + t - (1.0 if u < 2 else 0.0) - 0.1 * t)
    spill = mean_effect(main, cf, [4, 5], ["m"])
    np.testing.assert_allclose(spill.loc[("m", 2)], 0.2)
    np.testing.assert_allclose(spill.loc[("m", 3)], 0.3)
    total = instance_effects(main, cf, pd.Series([2, 2], index=[0, 1]), ["m"])
    direct = direct_effects(total, spill)
    np.testing.assert_allclose(direct["effect"], 1.0)  # the drift is gone
    np.testing.assert_allclose(direct["effect"] + direct["spillover"], total["effect"])
    # a time the spillover lacks (before the cohort) counts as zero
    early = total.assign(time=[0, 1, 0, 1])
    np.testing.assert_array_equal(direct_effects(early, spill)["spillover"], 0.0)


def test_not_yet_treated_spillover_pools_the_never_treated_with_later_cohorts():
    times = (2, 3)
    main = _scores(range(4), times, lambda u, t: 0.0)
    cf = _scores(range(4), times, lambda u, t: -float(u))  # effect on unit u is u
    # never-treated units 0, 1; unit 2 treated at 3, unit 3 at 4
    nyt = not_yet_treated_effect(main, cf, [0, 1], pd.Series([3, 4], index=[2, 3]), ["m"])
    np.testing.assert_allclose(nyt.loc[("m", 2)], np.mean([0, 1, 2, 3]))  # both not yet
    np.testing.assert_allclose(nyt.loc[("m", 3)], np.mean([0, 1, 3]))  # cohort 3 treated at 3


def test_draw_noise_pools_the_variance_over_draws_by_event_time():
    rows = []
    for g, values in ((2, (1.0, 3.0)), (3, (0.0, 4.0))):
        for j, v in enumerate(values):
            rows.append({"draw": j, "cohort": g, "time": g, "metric": "m", "tau": v})
    rows.append({"draw": 0, "cohort": 2, "time": 3, "metric": "m", "tau": 5.0})
    rows.append({"draw": 1, "cohort": 2, "time": 3, "metric": "m", "tau": 5.0})
    noise = draw_noise(pd.DataFrame(rows)).set_index("event_time")
    # event time 0: variances 2 and 8, pooled 5 with 2 degrees of freedom
    assert noise.loc[0, "tau_se"] == pytest.approx(np.sqrt(5.0)) and noise.loc[0, "df"] == 2
    assert noise.loc[1, "tau_se"] == 0.0 and noise.loc[1, "df"] == 1
    assert draw_noise(pd.DataFrame(rows).query("draw == 0")).empty
