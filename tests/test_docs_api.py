"""Every public name appears in the API reference (docs/api.rst)."""

import importlib
import re
from pathlib import Path

import pytest

API = Path(__file__).resolve().parents[1] / "docs" / "api.rst"
MODULES = [("didmem", ""), ("didmem.backends", ""), ("didmem.track", ""), ("didmem.lab", ""), ("didmem.results.plotting", ""),
           ("didmem.report", ""), ("didmem.orders", ""), ("didmem.orders.pythia", "pythia."),
           ("didmem.cohorts", ""),
           ("didmem.study", ""), ("didmem.study.designs", "")]
SUBMODULES = {"datasets", "montecarlo", "plotting", "report"}  # listed function by function


@pytest.mark.parametrize("module, prefix", MODULES)
def test_every_public_name_is_in_api_rst(module, prefix):
    text = API.read_text()
    mod = importlib.import_module(module)
    listed = set(re.findall(r"^ {3}([\w.]+)\s*$", text, re.M))
    missing = [n for n in mod.__all__ if not n.startswith("__") and n not in SUBMODULES
               and n not in listed and prefix + n not in listed]
    assert not missing, f"add to docs/api.rst: {missing}"


def test_every_key_of_a_study_file_is_in_the_study_page():
    """docs/study.rst is the configuration reference: it names every key of every table."""
    from didmem.study import DESIGNS
    from didmem.study.config import INSTANCES_KEYS, TOP_KEYS, runner_keys
    from didmem.study.estimate import ESTIMATORS, estimate_keys, report_keys

    text = (API.parent / "study.rst").read_text()
    keys = {*TOP_KEYS, *INSTANCES_KEYS, *runner_keys("local"), *runner_keys("ray"),
            *report_keys(), *(k for e in ESTIMATORS for k in estimate_keys(e)),
            *(k for kind in DESIGNS.values() for k in kind.keys())}
    missing = sorted(k for k in keys if f"``{k}``" not in text and f"{k} = " not in text)
    missing += [f"kind = {k!r}" for k in DESIGNS if f'kind = "{k}"' not in text]
    assert not missing, f"add to docs/study.rst: {missing}"
