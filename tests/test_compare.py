"""didmem.compare against a truth built by hand, and without a truth."""

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem import ParameterError

TRUTH = pd.DataFrame({"cohort": [1, 1, 2, 2, 2], "time": [1, 2, 1, 2, 3],
                      "tau": [1.0, 2.0, 0.0, 3.0, 5.0]})


def _est(values, width=None):
    f = pd.DataFrame({"cohort": [1, 1, 2, 2, 2], "time": [1, 2, 1, 2, 3],
                      "estimate": values})
    if width is not None:
        f["ci_lower"], f["ci_upper"] = f["estimate"] - width, f["estimate"] + width
    return f


def test_compare_against_hand_truth():
    a = _est([1.5, 2.5, 9.0, 3.5, 5.5], width=0.6)   # post cells: errors 0.5 each, all covered
    b = _est([0.0, 1.0, 0.0, 1.0, 1.0])               # post cells errors -1, -1, -2, -4
    table = didmem.compare({"a": a, "b": b}, truth=TRUTH)
    assert list(table.columns) == ["estimator", "n_cells", "bias", "rmse", "corr", "coverage",
                                   "reference"]
    ra, rb = table.iloc[0], table.iloc[1]
    assert ra["n_cells"] == 4  # (2, 1) is pre-treatment and left out
    assert ra["bias"] == pytest.approx(0.5) and ra["rmse"] == pytest.approx(0.5)
    assert ra["corr"] == pytest.approx(1.0) and ra["coverage"] == 1.0
    assert rb["bias"] == pytest.approx((-1 - 1 - 2 - 4) / 4)
    assert rb["rmse"] == pytest.approx(np.sqrt((1 + 1 + 4 + 16) / 4))
    assert rb["corr"] == pytest.approx(np.corrcoef([0, 1, 1, 1], [1, 2, 3, 5])[0, 1])
    assert np.isnan(rb["coverage"])
    narrow = didmem.compare({"a": _est([1.5, 2.5, 9.0, 3.5, 5.5], width=0.4)}, truth=TRUTH)
    assert narrow.loc[0, "coverage"] == 0.0
    every = didmem.compare({"a": a}, truth=TRUTH, cells="all")
    assert every.loc[0, "n_cells"] == 5 and every.loc[0, "bias"] == pytest.approx((0.5 * 4 + 9.0) / 5)
    inst = didmem.compare({"a": a}, truth=TRUTH, cells="instantaneous")
    assert inst.loc[0, "n_cells"] == 2


def test_compare_metric_column_and_results():
    truth = pd.concat([TRUTH.assign(metric="m1"), TRUTH.assign(metric="m2", tau=0.0)])
    with pytest.raises(ParameterError, match="several metrics"):
        didmem.compare({"a": _est([0.0] * 5)}, truth=truth)
    t = didmem.compare({"a": _est([0.0] * 5)}, truth=truth, metric="m2")
    assert t.loc[0, "rmse"] == 0.0
    df, truth_sim = didmem.datasets.simulate_panel(seed=1)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    res = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    table = didmem.compare({"did": res}, truth=truth_sim[["cohort", "time", "tau"]])
    assert table.loc[0, "n_cells"] > 0 and abs(table.loc[0, "bias"]) < 0.5


def test_compare_without_truth_is_agreement():
    a, b, c = _est([1.0] * 5), _est([2.0] * 5), _est([3.0] * 5)
    table = didmem.compare({"a": a, "b": b, "c": c})
    assert list(table["reference"]) == ["others"] * 3
    assert list(table["bias"]) == pytest.approx([-1.5, 0.0, 1.5])
    with pytest.raises(ParameterError, match="at least two"):
        didmem.compare({"a": a})
    with pytest.raises(ParameterError, match="'cells' parameter of compare"):
        didmem.compare({"a": a, "b": b}, cells="pre")


def test_plot_comparison_panels():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = didmem.plot_comparison({"a": _est([1.5, 2.5, 9.0, 3.5, 5.5], width=0.6),
                                        "b": _est([0.0] * 5)}, truth=TRUTH)
    assert axes.size == 2 and axes.ravel()[0].get_title() == "a"
    plt.close(fig)
    fig, axes = didmem.plot_comparison({"a": _est([1.0] * 5), "b": _est([2.0] * 5)})
    assert axes.ravel()[1].get_xlabel() == "mean of the others"
    plt.close(fig)
