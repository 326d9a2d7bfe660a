"""examples/sensitivity_on_the_lab.py runs (quick scale) and sets each interval beside the truth."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sensitivity_on_the_lab.py"


@pytest.mark.slow
def test_example_runs_and_reads_the_truth(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("sensitivity_on_the_lab", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    table = example.main(["--out", str(tmp_path), "--quick"])
    assert set(table["run"]) == set(example.RUNS)
    assert set(table["restriction"]) == {"relative_magnitudes", "smoothness"}
    for (_, _), part in table.groupby(["run", "restriction"]):
        assert part["method"].iloc[0] == "original"
        truth = part["truth"].iloc[0]
        inside = (part["lower"] <= truth) & (truth <= part["upper"])
        np.testing.assert_array_equal(part["covers_truth"], inside)
        assert part["breakdown"].iloc[0] >= 0
    assert (tmp_path / "sensitivity.csv").exists()
    assert len(list(tmp_path.glob("*.png"))) == 4
    assert "exact truth" in capsys.readouterr().out
