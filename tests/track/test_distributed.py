"""Data parallel: two gloo processes, each observing its share; one writes; the panel equals
the single-process one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]


def _run(out: Path, world: int) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.track._distributed_worker", str(out),
                           str(world)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow  # three fresh interpreters importing torch and transformers: ~25 s of CPU
def test_two_gloo_processes_give_the_single_process_panel(tmp_path):
    from didmem.track._store import TrackerFolder

    _run(tmp_path / "ddp", 2)
    _run(tmp_path / "one", 0)
    states = [json.loads((tmp_path / "ddp" / f"rank{r}.json").read_text()) for r in (0, 1)]
    single = json.loads((tmp_path / "one" / "rank0.json").read_text())
    # every rank holds the whole order (its share and the other's, gathered)
    assert states[0] == states[1]
    assert states[0]["first_step"] == single["first_step"]
    assert states[0]["evaluations"] == single["evaluations"] == [0, 2, 3]
    read = [pd.read_parquet(TrackerFolder(tmp_path / d / "track").part(s)) for d in ("ddp", "one")
            for s in (0, 2, 3)]
    ddp, one = pd.concat(read[:3]), pd.concat(read[3:])
    pd.testing.assert_frame_equal(ddp[["unit", "time", "cohort"]], one[["unit", "time", "cohort"]])
    for m in ("mean_token_loglik", "token_accuracy"):
        np.testing.assert_allclose(ddp[m], one[m], rtol=1e-6, atol=1e-6)
    # the trained instances: 3 steps x 8 = all 24; validation never treated
    assert sorted(ddp.groupby("unit")["cohort"].first().value_counts().items()) == [
        (2.0, 16), (3.0, 8), (np.inf, 4)]
