"""The ``didmem`` program itself: :func:`didmem.cli.console_main` around :func:`main`."""

import os
import subprocess
import sys

import pytest

from didmem.cli import console_main


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, check=False)


def test_console_main_returns_main_status_and_freezes_collector(monkeypatch, capsys):
    import gc

    monkeypatch.setattr(sys, "argv", ["didmem", "estimate", "no-such-panel.parquet",
                                      "--outcome", "y", "--out", "x.parquet"])
    before = gc.get_freeze_count()
    try:
        assert console_main() == 2
        assert gc.get_freeze_count() > before
        assert "no-such-panel.parquet" in capsys.readouterr().err
    finally:
        gc.unfreeze()


def test_program_runs_as_module_with_its_exit_status():
    cmd = [sys.executable, "-m", "didmem.cli", "estimate", "missing.parquet", "--outcome", "y",
           "--out", "x.parquet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("didmem estimate: error:")


@pytest.mark.parametrize("setting, expected", [(None, "False"), ("1", "True")])
def test_small_pages_leaves_users_setting(setting, expected):
    code = ("import didmem.cli as c; c._small_pages(); import numpy as np\n"
            "try:\n from numpy._core.multiarray import _get_madvise_hugepage\n"
            "except ImportError:\n from numpy.core.multiarray import _get_madvise_hugepage\n"
            "print(_get_madvise_hugepage())")
    env = {} if setting is None else {"NUMPY_MADVISE_HUGEPAGE": setting}
    if setting is None and "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        pytest.fail("the test's environment sets NUMPY_MADVISE_HUGEPAGE; unset it")
    proc = _python(code, **env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected
