"""The custom-backend example of docs/backends.rst runs and does what the page says."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

DOC = Path(__file__).resolve().parents[2] / "docs" / "backends.rst"


def test_custom_backend_example_runs(capsys):
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", DOC.read_text())
    example = next(b for b in blocks if "class UnigramBackend" in b)
    namespace = {}
    exec(compile("\n".join(line[3:] for line in example.splitlines()), str(DOC), "exec"), namespace)
    frame = namespace["frame"]
    assert list(frame.columns) == ["unit", "time", "mean_token_loglik"]
    assert frame["time"].tolist() == [0] * 4 + [50] * 4 + [100] * 4
    wide = frame.pivot(index="unit", columns="time", values="mean_token_loglik")
    np.testing.assert_allclose(wide[0], np.log(1 / 100))  # uniform before training
    assert (wide[50] > wide[0]).all()
    assert "time" in capsys.readouterr().out
