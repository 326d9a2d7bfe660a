"""CI's check of skips (.ci/check_skips.py) on JUnit reports of real pytest runs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def check_skips():
    spec = importlib.util.spec_from_file_location("check_skips", ROOT / ".ci" / "check_skips.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_MODULE = '''
import pytest

def test_runs():
    assert True

@pytest.mark.gpu
def test_gpu():
    pytest.skip("needs a CUDA device")

def test_browser():
    pytest.skip("no headless browser (Debian: apt-get install chromium)")

{extra}
'''


def run_pytest(tmp_path, extra: str, conftest=True) -> Path:
    """Run pytest on a small module with this repository's conftest; return the JUnit path."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_mod.py").write_text(_MODULE.format(extra=textwrap.dedent(extra)))
    if conftest:
        hook = (ROOT / "tests" / "conftest.py").read_text()
        start = hook.index("def pytest_collection_modifyitems")
        end = hook.index("@pytest.fixture", start)
        (tests / "conftest.py").write_text("import pytest\n\n\n" + hook[start:end])
    junit = tmp_path / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "-o", "markers=gpu\nreference", f"--junitxml={junit}", str(tests)],
        cwd=tmp_path, check=False, capture_output=True, text=True,
    )
    return junit


def test_allowed_skips_pass(tmp_path, check_skips, capsys):
    junit = run_pytest(tmp_path, "")
    assert check_skips.main([str(junit)]) == 0
    out = capsys.readouterr().out
    assert "2 skipped tests" in out and "no forbidden skips" in out
    assert "allowed: tests.test_mod::test_gpu: needs a CUDA device" in out


def test_a_skipped_reference_test_fails_whatever_its_reason(tmp_path, check_skips, capsys):
    junit = run_pytest(tmp_path, '''
        @pytest.mark.reference
        def test_against_r():
            pytest.skip("needs a CUDA device")
    ''')
    assert check_skips.main([str(junit)]) == 1
    out = capsys.readouterr().out
    assert "FORBIDDEN: tests.test_mod::test_against_r" in out
    assert "a test marked reference must never skip" in out


def test_an_unexpected_skip_fails(tmp_path, check_skips, capsys):
    junit = run_pytest(tmp_path, '''
        def test_needs_data():
            pytest.skip("reference data not found at ../shared/reference")

        def test_needs_csdid():
            pytest.importorskip("a_package_that_is_not_installed")
    ''')
    assert check_skips.main([str(junit)]) == 1
    out = capsys.readouterr().out
    assert "2 forbidden skips" in out
    assert "test_needs_data: reference data not found" in out


def test_a_module_skipped_at_import_is_judged_by_its_reason(tmp_path, check_skips, capsys):
    tests = tmp_path / "tests"
    junit = run_pytest(tmp_path, "")
    (tests / "test_whole.py").write_text(
        "import pytest\npytestmark = pytest.mark.reference\n"
        "pytest.importorskip('differences_not_here', reason='differences (GPL-3) is CI-only')\n"
    )
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
                    "markers=gpu\nreference", f"--junitxml={junit}", str(tests)],
                   cwd=tmp_path, check=False, capture_output=True)
    assert check_skips.main([str(junit)]) == 1
    assert ("FORBIDDEN: tests.test_whole: differences (GPL-3) is CI-only (the reason is not on "
            "the allow-list") in capsys.readouterr().out


def test_the_command_line(tmp_path):
    junit = run_pytest(tmp_path, '''
        def test_other():
            pytest.skip("something is missing")
    ''')
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "check_skips.py"), str(junit)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stdout
    assert "FORBIDDEN: tests.test_mod::test_other: something is missing" in done.stdout
    usage = subprocess.run([sys.executable, str(ROOT / ".ci" / "check_skips.py")],
                           capture_output=True, text=True, check=False)
    assert usage.returncode == 2 and "usage" in usage.stderr
    missing = subprocess.run([sys.executable, str(ROOT / ".ci" / "check_skips.py"),
                              str(tmp_path / "none.xml")], capture_output=True, text=True,
                             check=False)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "cannot read the JUnit report" in missing.stderr
