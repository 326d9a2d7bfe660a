"""Every code block of the README and the docs runs as written, in order, in a fresh process.

Each page is one test: its blocks run in order in one new Python process (``python`` blocks in
one namespace, ``bash`` and ``console`` blocks through bash, ``toml`` blocks saved under the
name the page gives them), in a directory of its own. Pages whose shell examples read the
files ``didmem demo`` writes (``didmem-demo/results.parquet``, ``didmem-demo/lab/...``) find
them there: the demo is run once per session, as its first command would. A block that needs
a GPU, the network or a suite's data is marked in the page's source (``didmem-docs: skip``,
see ``tests/_docs_blocks.py``) and reported as skipped with its reason.

Pages that take more than a few seconds are marked ``slow`` (``python -m pytest -m slow``);
the default run executes the others.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ._docs_blocks import console_commands, looks_like_code, read_blocks, shell_script

ROOT = Path(__file__).resolve().parents[1]

#: Every page with code, in the order of the docs' table of contents, and why a page is slow
#: (None: it runs in the default test run). ``demo``: its examples read the demo's files.
PAGES = {
    "README.md": {"slow": "runs didmem demo, fits and plans (minutes)", "demo": True},
    "docs/getting_started.rst": {"slow": "runs didmem demo", "demo": True},
    "docs/user_guide.rst": {"slow": "reads the demo's files; a coverage study of 200 panels",
                            "demo": True},
    "docs/repeated_exposure.rst": {"slow": None, "demo": False},
    "docs/runs.rst": {"slow": None, "demo": False},
    "docs/memorised.rst": {"slow": None, "demo": False},
    "docs/backends.rst": {"slow": None, "demo": False},
    "docs/tracking.rst": {"slow": "trains a tiny model with transformers.Trainer",
                          "demo": False},
    "docs/ray.rst": {"slow": None, "demo": False},
    "docs/study.rst": {"slow": "scores the demo's lab model again as a study", "demo": True},
    "docs/suites.rst": {"slow": None, "demo": False},
    "docs/lab.rst": {"slow": "trains quick lab runs (a few minutes of CPU)",
                     "demo": False},
    "docs/comparison.rst": {"slow": "trains a quick lab run with subset models", "demo": False},
    "docs/heterogeneity.rst": {"slow": None, "demo": False},
    "docs/random_timing.rst": {"slow": None, "demo": False},
    "docs/membership.rst": {"slow": None, "demo": False},
    "docs/power.rst": {"slow": "reads the demo's lab panel; simulates 200 studies per design",
                          "demo": True},
    "docs/sensitivity.rst": {"slow": "sensitivity variants on a grid", "demo": False},
    "docs/pythia.rst": {"slow": None, "demo": False},
}

RUNNABLE = ("python", "bash", "console", "toml")


def _all_pages() -> list:
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.rst"))


def test_every_block_has_a_language_and_every_page_with_code_is_run():
    """A bare ``::`` block that looks like code, or a page with code not listed, fails."""
    unclassified, unlisted = [], []
    for path in _all_pages():
        blocks = read_blocks(path, ROOT)
        page = path.relative_to(ROOT).as_posix()
        for block in blocks:
            if block.lang == "literal" and looks_like_code(block.code):
                unclassified.append(block.where)
            elif block.lang not in RUNNABLE + ("literal", "text", "none"):
                unclassified.append(f"{block.where} ({block.lang})")
        if any(b.lang in RUNNABLE for b in blocks) and page not in PAGES:
            unlisted.append(page)
    assert not unclassified, ("give these blocks a language (.. code-block:: python, bash, "
                              f"console, toml or text): {unclassified}")
    assert not unlisted, f"pages with code that tests/test_docs_run.py does not run: {unlisted}"


def _driver(blocks) -> tuple[str, list]:
    """The script that runs a page's blocks in order, and the blocks it skips."""
    lines = ["import subprocess, sys, tomllib",
             "ns = {'__name__': '__main__'}",
             "def _shell(code, where):",
             "    done = subprocess.run(['bash', '-e', '-o', 'pipefail', '-c', code])",
             "    if done.returncode:",
             "        sys.exit(f'{where}: the shell block stopped with status {done.returncode}')",
             ""]
    skipped = []
    for b in blocks:
        if b.skip:
            skipped.append(f"{b.where} ({b.skip})")
            continue
        lines.append(f"print('@@block {b.where} ({b.lang})', flush=True)")
        if b.lang == "python":
            lines.append(f"exec(compile({b.code!r}, {b.where!r}, 'exec'), ns)")
        elif b.lang == "bash":
            lines.append(f"_shell({shell_script(b.code)!r}, {b.where!r})")
        elif b.lang == "console":
            lines.append(f"_shell({shell_script(console_commands(b.code))!r}, {b.where!r})")
        elif b.lang == "toml":
            lines.append(f"tomllib.loads({b.code!r})")
            if b.file:
                lines.append(f"open({b.file!r}, 'w').write({b.code!r})")
    return "\n".join(lines) + "\n", skipped


@pytest.fixture(scope="session")
def docs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("docs-run")


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["MPLBACKEND"] = "Agg"
    return env


def _demo(docs_dir: Path) -> Path:
    """``didmem demo`` run once in the session's docs directory (its files, as a user has)."""
    demo = docs_dir / "didmem-demo"
    if not (demo / "results.parquet").exists():
        subprocess.run(["didmem", "demo"], cwd=docs_dir, env=_env(), check=True,
                       capture_output=True, timeout=1800)
    return demo


def _params():
    for page, spec in PAGES.items():
        marks = [pytest.mark.slow] if spec["slow"] else []
        yield pytest.param(page, marks=marks, id=page)


@pytest.mark.parametrize("page", list(_params()))
def test_page_runs_as_written(page, docs_dir):
    spec = PAGES[page]
    blocks = read_blocks(ROOT / page, ROOT)
    runnable = [b for b in blocks if b.lang in RUNNABLE]
    assert runnable, f"{page} has no code block; remove it from PAGES"
    script, skipped = _driver(runnable)
    if len(skipped) == len(runnable):
        pytest.skip(f"every block of {page} needs what this machine lacks: {skipped}")
    if spec["demo"]:
        pytest.importorskip("torch")  # didmem[lm]: the demo trains the lab model
        _demo(docs_dir)
    work = docs_dir / page.replace("/", "_")
    work.mkdir()
    if spec["demo"]:
        (work / "didmem-demo").symlink_to(docs_dir / "didmem-demo")
    (work / "run_page.py").write_text(script, encoding="utf-8")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "run_page.py"], cwd=work, env=_env(),
                          capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, (f"{page} stopped after {seconds:.0f} s:\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    ran = done.stdout.count("@@block ")
    assert ran == len(runnable) - len(skipped)
    if skipped:
        print(f"{page}: skipped {skipped}")


def _example_commands():
    """The ``Run::`` command of each example that the gallery does not execute (slow)."""
    import re

    for path in sorted((ROOT / "examples").glob("*.py")):
        if path.name.startswith("plot_"):
            continue  # executed by sphinx-gallery at every docs build
        doc = path.read_text(encoding="utf-8")
        found = re.search(r"Run::\n\n\s+(python examples/\S+\.py[^\n]*)", doc)
        yield pytest.param(path.name, found.group(1) if found else None, id=path.name,
                           marks=[pytest.mark.slow])


@pytest.mark.parametrize(("name", "command"), list(_example_commands()))
def test_example_runs_as_its_docstring_says(name, command, tmp_path):
    """Every example outside the gallery says how to run it, and runs so."""
    assert command, f"examples/{name} has no 'Run::' block with its command"
    pytest.importorskip("torch")  # they train lab models (didmem[lm])
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    done = subprocess.run(["bash", "-e", "-c", command], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
