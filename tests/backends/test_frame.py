"""FrameBackend: didmem's long layout and the paper's published layout."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from didmem import PanelError
from didmem.backends import FrameBackend, InstanceError
from didmem.errors import ParameterError


def paper_frame() -> pd.DataFrame:
    seq_idx = np.array([5, 1_024_000, 2_047_999, -1, -2])
    steps = [0, 1000, 2000, 3000]
    rows = [
        {
            "seq_idx": s,
            "step": t,
            "sup_seq": 9.0 - t / 1000 - 0.1 * i,
            "acc_seq": 0.1 * i,
            "avg_rank": 3.0 + i,
            "entr_seq": 5.0,
            "note": "x",
        }
        for t in steps
        for i, s in enumerate(seq_idx)
    ]
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0)  # any row order


def test_paper_layout_maps_seq_idx_to_cohort_and_validation_to_never_treated():
    backend = FrameBackend(paper_frame())
    assert backend.layout == "paper"
    assert backend.checkpoints == (0, 1000, 2000, 3000)
    assert backend.default_metrics == ("sup_seq", "acc_seq", "avg_rank", "entr_seq")
    frame = backend.score(unit_ids=[1_024_000, -2, 5, 2_047_999])
    assert list(frame.columns) == [
        "unit",
        "time",
        "cohort",
        "sup_seq",
        "acc_seq",
        "avg_rank",
        "entr_seq",
    ]
    first = frame[frame["time"] == 0]
    assert first["unit"].tolist() == [1_024_000, -2, 5, 2_047_999]
    assert first["cohort"].tolist() == [2000.0, np.inf, 1000.0, 2000.0]
    assert frame.loc[(frame["unit"] == 5) & (frame["time"] == 2000), "sup_seq"].item() == 7.0


def test_paper_layout_from_parquet_with_subsets(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "panel.parquet"
    paper_frame().to_parquet(path)
    frame = FrameBackend(path).score(metrics=["acc_seq"], checkpoints=[3000, 1000])
    assert frame["time"].tolist() == [1000] * 5 + [3000] * 5
    assert frame["unit"].tolist()[:5] == [-2, -1, 5, 1_024_000, 2_047_999]
    assert list(frame.columns) == ["unit", "time", "cohort", "acc_seq"]


def test_didmem_layout_round_trips_a_scored_frame():
    scored = pd.DataFrame(
        {
            "unit": ["a", "b", "a", "b"],
            "time": [0, 0, 5, 5],
            "mean_token_loglik": [-3.0, -4.0, -2.0, -3.5],
            "extractable": [False, False, True, False],
        }
    )
    backend = FrameBackend(scored)
    assert backend.layout == "didmem" and backend.checkpoints == (0, 5)
    pd.testing.assert_frame_equal(backend.score(), scored)
    batch_scores = backend.score_batch(5, backend_batch(["b", "a"]), ("extractable",))
    assert batch_scores["extractable"].tolist() == [False, True]


def backend_batch(units):
    from didmem.backends import InstanceBatch

    return InstanceBatch(units=np.array(units, dtype=object), token_ids=None)


def test_cohort_column_is_passed_through():
    data = pd.DataFrame(
        {
            "id": [1, 1, 2, 2],
            "t": [0, 1, 0, 1],
            "g": [1, 1, np.nan, np.nan],
            "y": [0.0, 1.0, 0.0, 0.1],
        }
    )
    frame = FrameBackend(data, unit="id", time="t", cohort="g").score()
    assert frame["cohort"].tolist() == [1.0, np.inf, 1.0, np.inf]


def test_frame_backend_errors():
    with pytest.raises(InstanceError, match=r"no row for 4 \(unit, time\) cells, e.g. \(7, 0\)"):
        FrameBackend(paper_frame()).score(unit_ids=[7, 5])
    dup = pd.concat([paper_frame(), paper_frame().iloc[:2]])
    with pytest.raises(PanelError, match=r"2 duplicate \('seq_idx', 'step'\) rows"):
        FrameBackend(dup)
    with pytest.raises(PanelError, match="missing columns \\['unit'\\]"):
        FrameBackend(pd.DataFrame({"time": [0], "y": [1.0]}))
    with pytest.raises(ParameterError, match="Unknown metrics \\['loss'\\]"):
        FrameBackend(paper_frame()).score(metrics=["loss"])
    with pytest.raises(ParameterError, match="'layout' parameter of FrameBackend"):
        FrameBackend(paper_frame(), layout="wide")
    with pytest.raises(InstanceError, match="Duplicate unit ids"):
        FrameBackend(paper_frame()).score(unit_ids=[5, 5])
