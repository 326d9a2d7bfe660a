"""The README and Getting started run as written, and the numbers their prose quotes are true.

Every ```python block of README.md runs, in order, in one namespace (as a reader pastes them),
in a temporary directory; the code-block of docs/getting_started.rst likewise. The block that
plans a study (200 simulated studies per design) is the slow one: it runs under ``-m slow``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("matplotlib")
pytest.importorskip("linearmodels")  # the comparison block's TWFE (didmem[compare])


def _readme_blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def _run(blocks, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"README python block {i}", "exec"), namespace)  # noqa: S102
    return namespace


def _fast(blocks):
    return [b for b in blocks if "power_analysis" not in b]


def test_readme_python_blocks_run_and_their_quoted_numbers_hold(tmp_path, monkeypatch):
    import didmem

    blocks = _readme_blocks()
    assert len(blocks) >= 4 and len(_fast(blocks)) == len(blocks) - 1
    ns = _run(_fast(blocks), tmp_path, monkeypatch)
    assert (tmp_path / "results.parquet").exists() and (tmp_path / "report.html").exists()
    text = (ROOT / "README.md").read_text()
    # the prose after the first block: the two pre-tests and the power it quotes
    first = ns["results"]["did"]
    calibrated, wald = first.pretrend_test(), first.pretest
    assert f"(p = {calibrated.pvalue:.2f})" in text
    assert f"all {wald.df} pre-treatment cells rejects (p = {wald.pvalue:.1g})" in text
    assert f"its power: {calibrated.power:.2f} here" in text
    # the comparison's RMSEs
    table = didmem.compare(ns["results"], truth=ns["truth"]).set_index("estimator")
    assert (f"TWFE has the lower RMSE ({table.loc['twfe', 'rmse']:.3f} against DiD's "
            f"{table.loc['did', 'rmse']:.3f})") in text
    # the covariates block fitted with the covariates it made
    assert ns["res"].params["est_method"] == "dr"
    assert {"length", "log_freq"} <= set(ns["df"].columns)


@pytest.mark.slow
def test_readme_all_python_blocks_run(tmp_path, monkeypatch):
    ns = _run(_readme_blocks(), tmp_path, monkeypatch)
    assert "ev" in ns


def test_getting_started_block_runs(tmp_path, monkeypatch):
    text = (ROOT / "docs" / "getting_started.rst").read_text()
    block = re.search(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", text).group(1)
    code = "\n".join(line[4:] for line in block.splitlines())
    ns = _run([code], tmp_path, monkeypatch)
    assert ns["res"].aggregate("instantaneous").to_frame().shape[0] == 6
