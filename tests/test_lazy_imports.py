"""``import didmem`` and the command line's parser load no heavy dependency.

Each check runs in a fresh interpreter (this process has imported everything already) and
lists the heavy modules found in ``sys.modules`` afterwards; numba, scipy.stats, torch,
transformers and matplotlib load only when the code that needs them runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from didmem.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[1]

HEAVY = ("numba", "scipy.stats", "torch", "transformers", "matplotlib", "ray")


#: What building a command's parser may not load either: ``didmem CMD --help`` has 0.3 s
#: (issue 29), and pandas or scipy alone take longer on a small machine.
HEAVY_FOR_HELP = HEAVY + ("pandas", "scipy")


def heavy_modules_after(code: str, heavy=HEAVY) -> list[str]:
    """The modules of ``heavy`` that running ``code`` in a fresh interpreter imports."""
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {heavy!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    return eval(proc.stdout.strip().splitlines()[-1])


def test_the_probe_sees_a_heavy_import():
    # the check can fail: importing the inference kernels loads numba
    assert heavy_modules_after("import didmem.inference.kernels") == ["numba"]


def test_import_didmem_loads_no_heavy_module():
    assert heavy_modules_after("import didmem") == []


def test_dir_and_all_name_every_public_object_without_importing_it():
    code = ("import didmem\nassert set(didmem.__all__) <= set(dir(didmem))\n"
            "assert 'Panel' in dir(didmem) and 'DiDEstimator' in didmem.__all__")
    assert heavy_modules_after(code) == []


@pytest.mark.parametrize("command", [None, *SUBCOMMANDS])
def test_building_the_parser_loads_no_heavy_module(command):
    commands = "None" if command is None else repr([command])
    code = f"from didmem.cli import build_parser\nbuild_parser({commands})"
    assert heavy_modules_after(code, HEAVY_FOR_HELP) == []


def test_every_public_name_resolves_to_its_object():
    import didmem
    from didmem import _lazy

    for name, module in _lazy._WHERE.items():
        value = getattr(didmem, name)
        home = sys.modules[f"didmem.{module}"]
        assert value is (home if module == name else getattr(home, name)), name
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        didmem.not_a_name  # noqa: B018


def test_the_help_probe_sees_pandas():
    assert "pandas" in heavy_modules_after("import didmem\ndidmem.GroupTimeResult",
                                           HEAVY_FOR_HELP)


def test_a_saved_sensitivity_loads_in_a_fresh_process(tmp_path):
    """load_result imports the module that reads a kind (sensitivity) when the package's lazy
    import has not loaded it yet."""
    import didmem

    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20, n_never_treated=20,
                                           n_times=6, seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    res = didmem.DiDEstimator(base_period="universal", n_bootstrap=0).fit(panel)
    path = didmem.sensitivity(res.aggregate("dynamic")).save(tmp_path / "sens.parquet")
    code = (f"import didmem\nr = didmem.load_result({str(path)!r})\n"
            "print(type(r).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "SensitivityResult"
