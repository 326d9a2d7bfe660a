"""tools/check_imports.py: import cycles (counting imports inside functions) and defaults."""

from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def checker():
    spec = importlib.util.spec_from_file_location("check_imports", ROOT / "tools" / "check_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_didmem_has_no_import_cycle(checker):
    by_name = {}
    graph = checker.import_graph(ROOT / "didmem", by_name)
    assert "didmem.results.aggregations" in graph["didmem.results.cells"]
    assert checker.cycles(checker.without_loads_by_name(graph, by_name)) == []


def test_didmem_writes_no_default_twice(checker):
    assert checker.main(["check_imports", str(ROOT / "didmem")]) == 0


def test_a_cycle_through_an_import_inside_a_function_is_found(checker, tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from .b import g\n",
        "b.py": "def g():\n    from .a import f\n    return f\n",
        "c.py": "import pkg.a\n",
    })
    graph = checker.import_graph(root)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    assert checker.cycles(graph) == [["pkg.a", "pkg.b"]]
    assert checker.main(["check_imports", str(root)]) == 1


def test_type_checking_imports_and_subpackages(checker, tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "from .sub import x\n",
        "sub/__init__.py": "from .x import value\n",
        "sub/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import y\n"
                    "value = 1\n",
        "y.py": "from .sub import x\n",
    })
    graph = checker.import_graph(root)
    assert graph["pkg"] == {"pkg.sub.x"}
    assert graph["pkg.sub.x"] == set()
    assert graph["pkg.y"] == {"pkg.sub.x"}
    assert checker.cycles(graph) == []


def test_a_default_written_twice_is_found(checker, tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "est.py": """
            class Est:
                _parameters = {"alpha": (0.05, None), "draws": (None, None)}

                def __init__(self, *, alpha=0.05, draws=None):
                    self.alpha = alpha
            """,
        "cli.py": """
            def build(parser):
                parser.add_argument("--alpha", type=float, default=0.05)
                parser.add_argument("--other", default=0.05)
            """,
    })
    findings = [f for p in sorted(root.rglob("*.py"))
                for f in checker.repeated_defaults(p, {"alpha": 0.05})]
    assert len(findings) == 2
    assert "cli.py:3" in findings[0] and "--alpha" in findings[0]
    assert "est.py:3" in findings[1] and "'alpha'" in findings[1]


def test_didmem_imports_within_the_rules_of_its_layers(checker):
    by_name = {}
    graph = checker.import_graph(ROOT / "didmem", by_name)
    assert checker.layer_violations(graph, by_name=by_name) == []
    assert checker.table_problems(modules=set(graph)) == []
    # the table places the modules as the code has them: results below estimators
    reach = checker.reachable()
    estimators = checker.layer_of("didmem.estimators.did")
    assert checker.layer_of("didmem.results.cells") in reach[estimators]
    assert checker.layer_of("didmem.inference.prepared") in reach["results"]
    assert checker.layer_of("didmem") == checker.layer_of("didmem.cli.run") == "faces"
    # the wings: scoring and estimation never import from each other; study joins them
    assert checker.layer_of("didmem.orders.pythia") == "orders"
    assert not reach["orders"] & set(checker.WINGS["estimation"])
    assert not reach["report"] & set(checker.WINGS["scoring"])
    assert set(checker.WINGS["scoring"]) | set(checker.WINGS["estimation"]) <= reach["study"]
    # loads by name are seen: results.saving reads a saved sensitivity by its class
    assert "didmem.honest.result" in by_name["didmem.results.saving"]
    assert "didmem.estimators.did" in by_name["didmem.estimators"]  # a lazy attach table


_RULES = (("bottom", ("pkg.low",), (), "low"), ("middle", ("pkg.mid",), ("bottom",), "mid"),
          ("side", ("pkg.side",), ("bottom",), "a wing of its own"),
          ("top", ("pkg.high", "pkg"), ("middle", "side"), "top"))


def test_an_import_from_a_higher_layer_is_found_even_inside_a_function(checker, tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "low.py": "def f():\n    from .high import g\n    return g\n",
        "mid.py": "from .low import f\nfrom .side import s\n",
        "side.py": "from .low import f\ns = 1\n",
        "high.py": "from .low import f\nfrom .mid import *\ng = 1\n",
        "stray.py": "",
    })
    graph = checker.import_graph(root)
    assert checker.layer_violations(graph, _RULES) == [
        "pkg.low (layer 'bottom') imports pkg.high (layer 'top', which 'bottom' does not "
        "build on)",
        # a layer beside, not below: middle does not build on side
        "pkg.mid (layer 'middle') imports pkg.side (layer 'side', which 'middle' does not "
        "build on)",
        # the bare package name holds its __init__ only: a new top-level module is unplaced
        "pkg.stray is in no layer of LAYERS (tools/check_imports.py)",
    ]
    assert checker.layer_of("pkg", _RULES) == "top"
    assert checker.layer_of("pkg.stray", _RULES) is None


def test_an_upward_load_by_name_is_found(checker, tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "low.py": "import importlib\n_KINDS = {'x': ('pkg.high', 'G')}\n"
                  "def f(kind):\n    module, name = _KINDS[kind]\n"
                  "    return getattr(importlib.import_module(module), name)\n",
        "side.py": "def h():\n    return __import__('pkg.mid')\n",
        "mid.py": "",
        "high.py": "from .low import f\ng = 1\n",
    })
    by_name = {}
    graph = checker.import_graph(root, by_name)
    assert by_name == {"pkg.low": {"pkg.high"}, "pkg.side": {"pkg.mid"}}
    # a cycle only through a load by name is no import cycle; the layers see the load
    assert checker.cycles(checker.without_loads_by_name(graph, by_name)) == []
    assert checker.layer_violations(graph, _RULES, by_name=by_name) == [
        "pkg.low (layer 'bottom') loads by name pkg.high (layer 'top', which 'bottom' does "
        "not build on)",
        "pkg.side (layer 'side') loads by name pkg.mid (layer 'middle', which 'side' does not "
        "build on)",
    ]
    # allowed on purpose: listed with its reason; a listed load that is gone is reported
    allowed = {("pkg.low", "pkg.high"): "reads a file of that kind",
               ("pkg.mid", "pkg.high"): "gone"}
    assert checker.layer_violations(graph, _RULES, by_name=by_name, allowed=allowed) == [
        "pkg.side (layer 'side') loads by name pkg.mid (layer 'middle', which 'side' does not "
        "build on)",
        "LOADS_BY_NAME allows pkg.mid -> pkg.high, which is no load against the rules",
    ]


def test_a_lazy_attach_table_is_a_load_by_name(checker, tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "from . import _lazy\n"
                       "__getattr__, __dir__ = _lazy.attach(__name__, _lazy._WHERE)\n",
        "_lazy.py": "_WHERE = {'G': 'high'}\ndef attach(package, where):\n    return None, None\n",
        "high.py": "g = 1\n",
        "sub/__init__.py": "from .._lazy import attach\n_WHERE = {'F': 'f'}\n"
                           "__getattr__, __dir__ = attach(__name__, _WHERE)\n",
        "sub/f.py": "F = 1\n",
    })
    by_name = {}
    graph = checker.import_graph(root, by_name)
    assert by_name == {"pkg": {"pkg.high"}, "pkg.sub": {"pkg.sub.f"}}
    assert {"pkg.high", "pkg._lazy"} <= graph["pkg"]


def test_the_table_itself_is_checked(checker):
    assert checker.table_problems(_RULES, {"one": ("middle",), "two": ("side",)},
                                  {"pkg", "pkg.low", "pkg.mid", "pkg.side", "pkg.high"}) == []
    crossing = (*_RULES[:2], ("side", ("pkg.side",), ("middle",), "leans on the other wing"),
                *_RULES[3:])
    assert checker.table_problems(crossing, {"one": ("middle",), "two": ("side",)}) == [
        "the one wing's layer 'middle' and the two wing's layer 'side' reach each other"]
    looping = (("a", ("pkg.a",), ("b",), ""), ("b", ("pkg.b",), ("a", "c"), ""))
    assert checker.table_problems(looping, {}, {"pkg.a"}) == [
        "layer 'b' builds on 'c', which is no layer",
        "layer 'a' builds on itself through ['b']",
        "layer 'b' builds on itself through ['a']",
        "LAYERS names pkg.b, which is no module of the package",
    ]


def test_the_architecture_page_is_the_table_and_names_only_paths_that_exist(checker):
    page = (ROOT / "docs" / "architecture.rst").read_text()
    assert checker.generated_block(page) == checker.architecture_rst(ROOT / "didmem"), (
        "run: python tools/check_imports.py --write-docs")
    for name, *_ in checker.LAYERS:
        assert f"**{name}**" in page
    named = re.findall(r"``((?:didmem|tools|tests|docs)/[\w./]*)``", page)
    assert "didmem/orders/" in named and "didmem/results/saving.py" in named
    missing = [p for p in named if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.rst names paths that do not exist: {missing}"


def test_a_choice_list_written_twice_is_found(checker, tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "decl.py": 'KINDS = ("a", "b")\n'
                   "def f(kind):\n    return OneOf(*KINDS)\n"
                   'def g(x):\n    return OneOf("x", "y", None)\n',
        "cli.py": 'def add(p):\n    p.add_argument("--kind", choices=["b", "a"])\n',
        "fine.py": 'def add(p):\n    p.add_argument("--kind", choices=choices_of(f, "kind"))\n'
                   'OTHER = ("a", "c")\n',
        "hand.py": 'def check(v):\n    return v in ("y", "x")\n',
    })
    declared = checker.declared_choices(
        {p: checker.ast.parse(p.read_text()) for p in sorted(root.rglob("*.py"))})
    assert set(declared) == {frozenset({"a", "b"}), frozenset({"x", "y"})}
    assert checker.main(["check_imports", str(root)]) == 1
    found = [f for p in sorted(root.rglob("*.py"))
             for f in checker.repeated_choices(p, checker.ast.parse(p.read_text()), declared)]
    assert len(found) == 2
    assert any("cli.py:2" in f and "decl.py:1" in f for f in found)
    assert any("hand.py:2" in f for f in found)
