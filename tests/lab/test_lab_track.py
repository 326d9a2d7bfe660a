"""``didmem lab --track``: the main run scored while it trains gives the same panel as
scoring its saved checkpoints afterwards."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def test_tracked_lab_run_gives_the_same_panel(quick_run, tmp_path):
    from didmem.cli import main
    from didmem.lab import load

    assert main(["lab", "--quick", "--seed", "0", "--track", "--out",
                 str(tmp_path / "tracked")]) == 0
    tracked = load(tmp_path / "tracked")
    assert tracked.config.track and not quick_run.config.track
    a, b = quick_run.panel, tracked.panel
    assert list(a.columns) == list(b.columns)
    metrics = list(quick_run.config.metrics)
    others = [c for c in a.columns if c not in metrics]
    pd.testing.assert_frame_equal(a[others], b[others])
    for m in metrics:
        np.testing.assert_allclose(b[m], a[m], rtol=1e-6, atol=1e-6, err_msg=m)
    np.testing.assert_allclose(tracked.truth["tau"], quick_run.truth["tau"], rtol=1e-6,
                               atol=1e-6)
    # the tracker's folder: one part per checkpoint (and step 0), read by `didmem estimate`
    parts = sorted((tmp_path / "tracked" / "track").glob("part-t*.parquet"))
    assert len(parts) == len(tracked.config.checkpoints)


def test_track_refuses_the_reference_ratio():
    from didmem.errors import ParameterError
    from didmem.lab import LabConfig

    with pytest.raises(ParameterError, match="drop 'reference_ratio'"):
        LabConfig(track=True, metrics=("mean_token_loglik", "reference_ratio"))
