"""A report leaves out the figures whose aggregation a result does not have (issue 40,
item 5: a two-checkpoint study wrote its results and then failed on the report with
"Unknown or unavailable aggregation 'persistent'")."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import didmem
from didmem.report import write_report

pytest.importorskip("matplotlib")


def _two_checkpoints():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=1, units_per_cohort=40, n_never_treated=60,
                                           seed=0)
    times = sorted(df["time"].unique())[-2:]
    df = df[df["time"].isin(times)].copy()
    treated = np.isfinite(df["cohort"].astype(float))
    df.loc[treated, "cohort"] = times[-1]  # treated between the two checkpoints
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", didmem.errors.DidmemWarning)
        return didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(panel)


@pytest.mark.parametrize("saved", [False, True])
def test_two_checkpoints_report_without_the_persistent_figure(tmp_path, saved):
    result = _two_checkpoints()
    with pytest.raises(didmem.errors.DidmemError):
        result.aggregate("persistent")  # a single cell, c = g: nothing after treatment
    if saved:
        pytest.importorskip("pyarrow")
        result = didmem.load_result(result.save(tmp_path / "r.parquet"))
    path = write_report({"y": result}, tmp_path / "report.html")
    text = path.read_text()
    assert "persistent figure" not in text
    assert "instantaneous figure" in text and "residual figure" in text
    assert "Persistent memorisation" in text and "Not available" in text
