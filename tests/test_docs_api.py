"""Every public name appears in the API reference (docs/api.rst)."""

import importlib
import re
from pathlib import Path

import pytest

API = Path(__file__).resolve().parents[1] / "docs" / "api.rst"
MODULES = [("didmem", ""), ("didmem.backends", ""), ("didmem.lab", ""), ("didmem.plotting", ""),
           ("didmem.report", ""), ("didmem.backends.pythia", "pythia."), ("didmem.cohorts", ""),
           ("didmem.runners.design", "")]
SUBMODULES = {"datasets", "montecarlo", "plotting", "report"}  # listed function by function


@pytest.mark.parametrize("module, prefix", MODULES)
def test_every_public_name_is_in_api_rst(module, prefix):
    text = API.read_text()
    mod = importlib.import_module(module)
    listed = set(re.findall(r"^ {3}([\w.]+)\s*$", text, re.M))
    missing = [n for n in mod.__all__ if not n.startswith("__") and n not in SUBMODULES
               and n not in listed and prefix + n not in listed]
    assert not missing, f"add to docs/api.rst: {missing}"
