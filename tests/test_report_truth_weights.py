"""The truth beside an aggregation is averaged over cohorts as the estimate is.

If every cell's truth were its own estimate, the true persistent profile would be the
estimated one: the property holds only when the truth takes the estimator's cohort weights
(R did's pg), which differ from the cells' treated counts under sampling weights and holes.
"""

from pathlib import Path

import numpy as np
import pytest

import didmem
from didmem.datasets import simulate_panel
from didmem.report._truth import cells_with_truth, cohort_weights, true_aggregate


def _weighted_panel():
    data, _ = simulate_panel(n_cohorts=4, units_per_cohort=30, n_never_treated=60, n_times=7,
                             seed=3)
    rng = np.random.default_rng(0)
    unit_weight = rng.uniform(0.2, 3.0, data["unit"].nunique())
    data["w"] = unit_weight[data["unit"].astype(int).to_numpy() % unit_weight.size]
    return didmem.Panel(data, unit="unit", time="time", cohort="cohort", outcome="y",
                        weights="w")


def _holes_panel():
    data, _ = simulate_panel(n_cohorts=4, units_per_cohort=30, n_never_treated=60, n_times=7,
                             seed=4)
    keep = np.random.default_rng(1).random(len(data)) > 0.15
    return didmem.Panel(data[keep], unit="unit", time="time", cohort="cohort", outcome="y",
                        balance="keep")


@pytest.mark.parametrize("make, counts_differ", [(_weighted_panel, True), (_holes_panel, False)],
                         ids=["weights", "holes"])
def test_truth_equal_to_estimates_aggregates_to_the_estimate(make, counts_differ):
    result = didmem.DiDEstimator(n_bootstrap=0).fit(make())
    frame = result.to_frame()
    truth = frame[["cohort", "time"]].assign(tau=frame["estimate"])
    cells = cells_with_truth(result, truth)
    agg = result.aggregate("persistent").to_frame().set_index("event_time")["estimate"]

    weights = cohort_weights(result)
    assert weights is not None and len(weights) == 4
    matched = true_aggregate(cells, "persistent", "event_time", weights)
    np.testing.assert_allclose(matched.reindex(agg.index), agg, rtol=1e-12, atol=1e-14)

    # the cells' treated counts: the cohorts' sizes with holes, not their weighted shares
    by_counts = true_aggregate(cells, "persistent", "event_time")
    gap = float(np.max(np.abs(by_counts.reindex(agg.index) - agg)))
    assert (gap > 1e-6) if counts_differ else (gap < 1e-12)


def test_saved_result_keeps_the_cohort_weights(tmp_path):
    """A saved result sets the same truth beside its aggregations as the fitted one (results
    format 3 keeps the weights; a file of format 2 has none, and falls back to the counts)."""
    result = didmem.DiDEstimator(n_bootstrap=0).fit(_weighted_panel())
    loaded = didmem.load_result(result.save(tmp_path / "r.parquet"))
    assert cohort_weights(loaded) == cohort_weights(result)
    older = Path(__file__).parent / "data" / "results_files" / "results_format2.parquet"
    assert cohort_weights(didmem.load_result(older)) is None
