#!/usr/bin/env python3
"""Check didmem's module graph and its parameter defaults.

Four checks, all static (the package is parsed with :mod:`ast`, never imported):

1. **Import cycles.** Every ``import``/``from ... import`` statement in ``didmem/`` counts,
   including those inside functions and methods; only ``if TYPE_CHECKING:`` blocks are left
   out (they never run). An edge ``a -> b`` joins two modules of the package: ``from .x
   import name`` points at module ``x`` (or at submodule ``x.name`` where that exists), and
   importing a subpackage points at its ``__init__``. Edges from a package's ``__init__`` to
   its own submodules are ordinary edges, so ``pkg/__init__ -> pkg/x -> pkg/__init__`` is a
   cycle like any other; the implicit import of parent packages is not counted (every
   module would otherwise sit in a cycle with ``didmem/__init__``). Strongly connected
   components of more than one module are reported, with one concrete cycle. Loads by name
   (see 3) are left out of this check only: they run when their function runs.
2. **Defaults written twice.** A keyword default of a class's ``__init__`` (or of a
   dataclass field) must not be repeated in the same module as a literal of a
   ``"name": value`` entry of a dict or a ``default=`` keyword for the same name: the
   signature is the one place a default lives (read it with :func:`inspect.signature`).

3. **Layers and wings.** :data:`LAYERS` is didmem's architecture as rules: each layer names
   its modules (by prefix) and the layers it builds on; a module may import from its own layer
   and from every layer its layer builds on, directly or through others, never from any
   other. The estimation wing (panel -> inference -> results -> estimators -> analyses ->
   report) and the scoring wing (backends, orders -> runners) share only the foundation and
   the panel layer; ``study`` and ``lab`` join them; the faces sit on top. Loads by name
   count as imports: ``importlib.import_module("didmem.x")`` (any string constant naming a
   module of the package, in a module that calls ``import_module``) and the lazy tables of
   ``didmem._lazy.attach(__name__, TABLE)``. A load by name against the rules is allowed
   only where :data:`LOADS_BY_NAME` lists it with its reason. A module that no layer holds,
   and a prefix that names no module, are reported too, so a new module is placed on purpose.
   :func:`architecture_rst` renders the table for ``docs/architecture.rst``; the page holds
   it verbatim (``tests/test_check_imports.py`` checks that, and that every path the page
   names exists); ``python tools/check_imports.py --write-docs`` rewrites it.
4. **Choice lists written twice.** The values a parameter may take are declared once, in a
   ``OneOf(...)`` constraint (literal strings, or ``*NAME`` of a module-level tuple of
   strings); a list or tuple literal of two or more strings with the same values anywhere
   else in the package (a ``choices=[...]`` of the command line, a hand-written check) is
   reported: take the values from the declaration (:func:`didmem._validation.choices_of`).

Usage: ``python tools/check_imports.py [package_dir]``; exits 1 and prints each finding when
something is wrong. ``python tools/check_imports.py --write-docs`` rewrites the generated
table of ``docs/architecture.rst`` from :data:`LAYERS`.
"""

from __future__ import annotations

import ast
import itertools
import sys
from pathlib import Path


#: didmem's layers, bottom first: (name, module prefixes, the layers it builds on, what it
#: holds). A module belongs to the layer of its longest matching prefix; the bare package name
#: matches only the package's ``__init__`` (a face), so a new top-level module must be placed
#: here on purpose. A layer may import from itself and from every layer it builds on,
#: transitively; nothing else. The two wings share only ``foundation`` and ``panel``.
LAYERS: tuple[tuple[str, tuple[str, ...], tuple[str, ...], str], ...] = (
    ("foundation", ("didmem._version", "didmem.errors", "didmem._messages", "didmem._arrays",
                    "didmem._validation", "didmem._lazy", "didmem._outcomes",
                    "didmem._progress"), (),
     "the exceptions, the one validation module, messages, array helpers, lazy imports, "
     "the progress line"),
    ("panel", ("didmem.panel", "didmem.panel.checks", "didmem.panel.exposures", "didmem.panel.runs",
               "didmem.panel.scan", "didmem.panel.scan_dense", "didmem.panel.patterns",
               "didmem.cohorts", "didmem.suites", "didmem.datasets"),
     ("foundation",),
     "the validated long table and its dense views; a parquet folder read as unit paths; a "
     "binary panel as its patterns' counts; the "
     "cohort rules; the suites' published facts; simulated panels"),
    # the estimation wing
    ("inference", ("didmem.inference", "didmem.inference.pretrend", "didmem.inference.drdid",
                   "didmem.inference.covariates", "didmem.inference.exposure",
                   "didmem.inference.moments", "didmem.inference.random_timing"), ("panel",),
     "R's pre-processing; the one choice of a route (``routes.py``); the influence of the "
     "cells; numba kernels beside their numpy oracles (``kernels.py``, ``reference.py``); the "
     "one bootstrap loop (``bootstrap.py``); bands; and one subpackage per family: the "
     "pre-tests, doubly robust cells, covariates, repeated exposure, per-cohort moments, "
     "random timing"),
    # every result's .plot() draws through didmem.results.plotting, which reads results only
    ("results", ("didmem.results", "didmem.results.plotting"), ("inference",),
     "immutable results that hold their inference; their resolved settings "
     "(``didmem/results/_settings.py``), kept by saving and loading so that a saved result reads as "
     "the fitted one; comparison; truth scoring, written once (``didmem/results/_truth.py``); "
     "figures"),
    ("estimators", ("didmem.estimators",), ("results",),
     "what is estimated: one estimator per module, one small contract"),
    ("analyses", ("didmem.honest", "didmem.power", "didmem.montecarlo", "didmem.contrasts"),
     ("estimators",),
     "what takes results or runs estimators: sensitivity, power analysis, Monte Carlo, "
     "contrasts of profiles (differences between models and subgroups, moderator slopes)"),
    ("report", ("didmem.report",), ("analyses",),
     "the HTML report of results, their figures and sensitivity"),
    # the scoring wing
    ("orders", ("didmem.orders",), ("panel",),
     "the suites' published training orders read into exposures per instance"),
    ("backends", ("didmem.backends",), ("panel",),
     "outcome backends that score checkpoints (torch and transformers imported lazily)"),
    ("runners", ("didmem.runners",), ("backends",),
     "execution of a scoring plan: local and Ray"),
    # where the wings meet
    # the tracker scores through the backends' forward pass and gives the profile so far
    # (DiDEstimator on the folder), so it builds on both wings, as study does
    ("track", ("didmem.track",), ("estimators", "backends"),
     "memorisation measured while the model trains: the tracker of any training loop and "
     "the transformers Trainer callback (the live model scored through the backends' "
     "forward pass; the profile so far fitted by the estimators)"),
    ("study", ("didmem.study",), ("report", "orders", "runners"),
     "the one owner of a study: its configuration, designs, score -> estimate -> report"),
    ("lab", ("didmem.lab",), ("study", "track"),
     "tiny language models trained here, with their counterfactual truth"),
    ("faces", ("didmem.cli", "didmem"), ("lab",),
     "the command line (one module per subcommand) and the public names of didmem"),
)

#: The two wings: layers that never import from each other (the checker derives this from
#: :data:`LAYERS`; the table is here so that the rule reads as the design states it).
WINGS: dict[str, tuple[str, ...]] = {
    "estimation": ("inference", "results", "estimators", "analyses", "report"),
    "scoring": ("orders", "backends", "runners"),
}

#: Loads by name that point where an import may not, each allowed on purpose: (module,
#: loaded module) -> why. A saved file names its kind; the results layer reads the kinds that
#: analyses write by loading their class when such a file is read (a static import would
#: be a cycle). Any other such load is reported, and so is an entry that no longer matches.
LOADS_BY_NAME: dict[tuple[str, str], str] = {
    ("didmem.results.saving", "didmem.honest.result"):
        "load_result reads a saved sensitivity file with its class",
    ("didmem.results.saving", "didmem.power"):
        "load_result reads a saved power analysis with its class",
}


def module_name(path: Path, root: Path) -> str:
    """Dotted name of the module at ``path`` inside the package rooted at ``root``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST):
    """Every import statement that can run, at any depth (skips ``if TYPE_CHECKING:``)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """Modules of the package that the module ``name`` (file ``path``) imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def resolve(target: str) -> str | None:
        # the longest prefix of target that is a module of the package
        while target:
            if target in modules:
                return target
            target = target.rpartition(".")[0]
        return None

    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                hit = resolve(alias.name)
                if hit:
                    found.add(hit)
            continue
        if node.level:
            base = here
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        for alias in node.names:
            hit = resolve(f"{base}.{alias.name}")
            if hit:
                found.add(hit)
    return found


def _module_tables(tree: ast.AST) -> dict[str, dict]:
    """Module-level ``NAME = {"key": "value", ...}`` dict literals of string values."""
    tables = {}
    for node in getattr(tree, "body", ()):
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            else getattr(node, "target", None) if isinstance(node, ast.AnnAssign) else None
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            ok, table = _literal(value)
            if ok and all(isinstance(v, str) for v in table.values()):
                tables[target.id] = table
    return tables


def loads_by_name(path: Path, name: str, modules: set[str],
                  files: dict[str, Path] | None = None) -> set[str]:
    """Modules of the package that the module ``name`` loads by name at run time.

    Two shapes: a string constant that names a module of the package (``"didmem.x.y"``) in a
    module that calls ``import_module`` or ``__import__``, and the lazy table of
    ``attach(__name__, TABLE)`` (``didmem._lazy``), whose values are modules relative to the
    package: ``TABLE`` a dict literal of this module, or ``mod.TABLE`` of a module it imports
    (``files`` maps module names to their files, to read it).
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]

    def called(func: ast.AST, *names: str) -> bool:
        return getattr(func, "attr", None) in names or getattr(func, "id", None) in names

    found: set[str] = set()
    if any(called(c.func, "import_module", "__import__") for c in calls):
        found |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                  and isinstance(n.value, str) and n.value in modules and n.value != name}
    local = _module_tables(tree)
    for call in calls:
        if not (called(call.func, "attach") and len(call.args) == 2
                and getattr(call.args[0], "id", None) == "__name__"):
            continue
        table = call.args[1]
        if isinstance(table, ast.Name):
            values = local.get(table.id, {}).values()
        elif isinstance(table, ast.Attribute) and isinstance(table.value, ast.Name) and files:
            owner = f"{package}.{table.value.id}"
            owner_tree = ast.parse(files[owner].read_text()) if owner in files else None
            values = _module_tables(owner_tree).get(table.attr, {}).values() if owner_tree else ()
        else:
            values = ()
        found |= {f"{name}.{v}" for v in values if f"{name}.{v}" in modules}
    return found


def import_graph(root: Path, by_name: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Edges of the package's import graph: module -> modules it imports or loads by name.

    ``by_name``, when given, is filled with the edges that are loads by name only (for the
    messages and :data:`LOADS_BY_NAME`).
    """
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    modules = set(files)
    graph = {}
    for name, path in files.items():
        static = imports_of(path, name, modules)
        dynamic = loads_by_name(path, name, modules, files) - static
        graph[name] = static | dynamic
        if by_name is not None and dynamic:
            by_name[name] = dynamic
    return graph


def without_loads_by_name(graph: dict[str, set[str]],
                          by_name: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph of import statements only (what the cycle check reads): a load by name
    runs when its function runs, after both modules are imported, as in a registry that
    loads its entries by name (``backends._spec``); the layer check reads every edge."""
    return {m: targets - by_name.get(m, set()) for m, targets in graph.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with a cycle (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(sorted(component))
    return found


def _shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete cycle through the component's first module, for the message."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if child not in previous:
                    previous[child] = node
                    nxt.append(child)
        frontier = nxt
    return component


def layer_of(module: str, layers=LAYERS) -> str | None:
    """Name of the layer that holds ``module`` (its longest matching prefix), else None."""
    best, best_len = None, -1
    for name, prefixes, *_ in layers:
        for prefix in prefixes:
            below = "." in prefix and module.startswith(prefix + ".")
            if (module == prefix or below) and len(prefix) > best_len:
                best, best_len = name, len(prefix)
    return best


def reachable(layers=LAYERS) -> dict[str, set[str]]:
    """Each layer -> the layers it may import from: itself and what it builds on, transitively."""
    builds_on = {name: set(below) for name, _, below, *_ in layers}
    reach = {}
    for name in builds_on:
        seen, todo = {name}, list(builds_on[name])
        while todo:
            layer = todo.pop()
            if layer not in seen:
                seen.add(layer)
                todo.extend(builds_on.get(layer, ()))
        reach[name] = seen
    return reach


def table_problems(layers=LAYERS, wings=WINGS, modules: set[str] | None = None) -> list[str]:
    """Faults of the table itself: an unknown layer built on, a cycle of layers, two wings
    that reach each other, a prefix that names no module (``modules``, when given)."""
    names = [name for name, *_ in layers]
    problems = [f"layer {name!r} builds on {below!r}, which is no layer"
                for name, _, builds_on, *_ in layers for below in builds_on if below not in names]
    reach = reachable(layers)
    problems += [f"layer {name!r} builds on itself through "
                 f"{sorted(reach[name] & set(names) - {name})}"
                 for name, _, builds_on, *_ in layers
                 if any(name in reach.get(b, ()) for b in builds_on)]
    for (wing_a, members_a), (wing_b, members_b) in itertools.combinations(wings.items(), 2):
        problems += [f"the {wing_a} wing's layer {a!r} and the {wing_b} wing's layer {b!r} "
                     f"reach each other" for a in members_a for b in members_b
                     if b in reach.get(a, ()) or a in reach.get(b, ())]
    if modules is not None:
        problems += [f"LAYERS names {prefix}, which is no module of the package"
                     for _, prefixes, *_ in layers for prefix in prefixes
                     if not any(m == prefix or m.startswith(prefix + ".") for m in modules)]
    return problems


def layer_violations(graph: dict[str, set[str]], layers=LAYERS,
                     by_name: dict[str, set[str]] | None = None,
                     allowed: dict[tuple[str, str], str] | None = None) -> list[str]:
    """Imports (and loads by name) against the rules, and modules that no layer holds.

    ``by_name`` marks the edges that are loads by name; ``allowed`` (default
    :data:`LOADS_BY_NAME` when ``layers`` is :data:`LAYERS`) lists those allowed on purpose;
    an allowed entry that matches no such load is reported too.
    """
    by_name = by_name or {}
    if allowed is None:
        allowed = LOADS_BY_NAME if layers is LAYERS else {}
    reach = reachable(layers)
    problems, used = [], set()
    for module in sorted(graph):
        here = layer_of(module, layers)
        if here is None:
            problems.append(f"{module} is in no layer of LAYERS (tools/check_imports.py)")
            continue
        for target in sorted(graph[module]):
            there = layer_of(target, layers)
            if there is None or there in reach[here]:
                continue
            dynamic = target in by_name.get(module, ())
            if dynamic and (module, target) in allowed:
                used.add((module, target))
                continue
            how = "loads by name" if dynamic else "imports"
            problems.append(f"{module} (layer {here!r}) {how} {target} (layer {there!r}, "
                            f"which {here!r} does not build on)")
    problems += [f"LOADS_BY_NAME allows {a} -> {b}, which is no load against the rules"
                 for a, b in sorted(set(allowed) - used)]
    return problems


#: The lines that enclose the table in ``docs/architecture.rst``.
DOCS_BEGIN = ".. BEGIN LAYERS (generated by tools/check_imports.py --write-docs; do not edit)"
DOCS_END = ".. END LAYERS"


def _path_of(prefix: str, root: Path) -> str:
    """The file or folder of a module prefix, relative to the package's parent."""
    relative = Path(*prefix.split("."))
    if prefix == root.name:
        return f"{root.name}/__init__.py"
    if (root.parent / relative).is_dir():
        return f"{relative.as_posix()}/"
    return f"{relative.as_posix()}.py"


def architecture_rst(root: Path, layers=LAYERS, wings=WINGS) -> str:
    """The layer table as reStructuredText, for ``docs/architecture.rst``: one item per layer
    with its paths, what it holds and the layers it builds on, bottom first."""
    wing_of = {layer: wing for wing, members in wings.items() for layer in members}
    lines = [DOCS_BEGIN, ""]
    for number, (name, prefixes, builds_on, what) in enumerate(layers):
        paths = ", ".join(f"``{_path_of(p, root)}``" for p in prefixes)
        wing = f" ({wing_of[name]} wing)" if name in wing_of else ""
        below = ", ".join(f"*{b}*" for b in builds_on) or "nothing"
        item = (f"{number}. **{name}**{wing}: {paths}. {what[0].upper()}{what[1:]}. "
                f"Builds on: {below}.")
        words, line = item.split(" "), ""
        for word in words:  # wrap at 95 columns, items indented under their number
            if line and len(line) + 1 + len(word) > 95:
                lines.append(line)
                line = " " * (len(str(number)) + 2) + word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    lines += ["", DOCS_END]
    return "\n".join(lines)


def generated_block(text: str) -> str | None:
    """The generated table of a page (its enclosing lines included), or None."""
    if DOCS_BEGIN not in text or DOCS_END not in text:
        return None
    start = text.index(DOCS_BEGIN)
    return text[start:text.index(DOCS_END, start) + len(DOCS_END)]


def write_docs(root: Path, page: Path) -> None:
    """Replace the generated table of ``page`` with :func:`architecture_rst`."""
    text = page.read_text()
    block = generated_block(text)
    if block is None:
        raise SystemExit(f"{page} has no {DOCS_BEGIN!r} ... {DOCS_END!r} block")
    page.write_text(text.replace(block, architecture_rst(root)))


def _literal(node: ast.AST):
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _signature_defaults(tree: ast.AST) -> dict[str, object]:
    """Literal keyword defaults of each class's ``__init__`` and dataclass fields."""
    defaults: dict[str, object] = {}

    def keep(name, node):
        ok, value = _literal(node)
        if ok and value is not None and not isinstance(value, bool):
            defaults[name] = value

    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for item in cls.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                args = item.args
                positional = args.posonlyargs + args.args
                pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
                pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
                for arg, default in pairs:
                    keep(arg.arg, default)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value:
                keep(item.target.id, item.value)
    return defaults


def _function_defaults(tree: ast.AST) -> dict[str, object]:
    """Literal keyword defaults of every function and method (compared with CLI options)."""
    defaults: dict[str, object] = {}
    for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        args = func.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            ok, value = _literal(default)
            if ok and value is not None and not isinstance(value, bool):
                defaults.setdefault(arg.arg, value)
    return defaults


def _same(node: ast.AST, default) -> bool:
    ok, value = _literal(node)
    return ok and type(value) is type(default) and value == default


def repeated_defaults(path: Path, defaults: dict[str, object],
                      function_defaults: dict[str, object] | None = None) -> list[str]:
    """Places in ``path`` that write a signature default of the package a second time.

    Two shapes are found: a dict entry ``"name": default`` or ``"name": (default, ...)``
    (a hand-kept table of defaults) and an ``add_argument("--name", default=default)`` of
    the command line (compared also with the defaults of functions, ``function_defaults``).
    """
    options = {**(function_defaults or {}), **defaults}
    tree = ast.parse(path.read_text(), filename=str(path))
    findings = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if not (isinstance(key, ast.Constant) and key.value in defaults):
                    continue
                default = defaults[key.value]
                if isinstance(value, ast.Tuple) and value.elts:
                    value = value.elts[0]
                if _same(value, default):
                    findings.append(f"{path}:{value.lineno}: default of {key.value!r} "
                                    f"({default!r}) written again (it lives in a signature)")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "add_argument" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            name = node.args[0].value.lstrip("-").replace("-", "_")
            for keyword in node.keywords:
                if (keyword.arg == "default" and name in options
                        and _same(keyword.value, options[name])):
                    findings.append(f"{path}:{keyword.value.lineno}: default of --{name} "
                                    f"({options[name]!r}) written again (it lives in a signature)")
    return findings


def _strings(node: ast.AST) -> tuple | None:
    """The strings of a list or tuple literal of two or more strings, else None."""
    if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) >= 2 and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return tuple(e.value for e in node.elts)
    return None


def declared_choices(trees: dict[Path, ast.AST]) -> dict[frozenset, tuple[Path, int]]:
    """Each ``OneOf`` declaration's string values, and where it is (file, line)."""
    constants: dict[tuple[Path, str], tuple] = {}
    for path, tree in trees.items():
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and _strings(node.value)):
                constants[(path, node.targets[0].id)] = (_strings(node.value), node.lineno)
    declared: dict[frozenset, tuple[Path, int]] = {}
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "OneOf"):
                continue
            values, line = [], node.lineno
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    values.append(arg.value)
                elif isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name) \
                        and (path, arg.value.id) in constants:
                    found, line = constants[(path, arg.value.id)]
                    values.extend(found)
            if len(values) >= 2:
                declared.setdefault(frozenset(values), (path, line))
    return declared


def repeated_choices(path: Path, tree: ast.AST,
                     declared: dict[frozenset, tuple[Path, int]]) -> list[str]:
    """List or tuple literals in ``path`` that repeat a declared choice list."""
    findings = []
    for node in ast.walk(tree):
        values = _strings(node)
        if values is None or frozenset(values) not in declared:
            continue
        where, line = declared[frozenset(values)]
        if (where, line) == (path, node.lineno):
            continue  # the declaration itself (a module-level tuple of its values)
        findings.append(f"{path}:{node.lineno}: choice list {list(values)} written again "
                        f"(declared at {where}:{line}; use choices_of)")
    return findings


def main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[1] == "--write-docs":
        repo = Path(__file__).resolve().parent.parent
        write_docs(repo / "didmem", repo / "docs" / "architecture.rst")
        return 0
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "didmem"
    by_name: dict[str, set[str]] = {}
    graph = import_graph(root, by_name)
    static = without_loads_by_name(graph, by_name)
    problems = []
    for component in cycles(static):
        path = " -> ".join(_shortest_cycle(static, component))
        problems.append(f"import cycle among {', '.join(component)}: {path}")
    if root.name == "didmem":
        problems.extend(table_problems(modules=set(graph)))
        problems.extend(layer_violations(graph, by_name=by_name))
    files = sorted(root.rglob("*.py"))
    defaults: dict[str, object] = {}
    function_defaults: dict[str, object] = {}
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        defaults.update(_signature_defaults(tree))
        function_defaults.update(_function_defaults(tree))
    for path in files:
        problems.extend(repeated_defaults(path, defaults, function_defaults))
    trees = {path: ast.parse(path.read_text(), filename=str(path)) for path in files}
    declared = declared_choices(trees)
    for path, tree in trees.items():
        problems.extend(repeated_choices(path, tree, declared))
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in {root}")
        return 1
    print(f"{root}: {len(graph)} modules, no import cycle, "
          "every import and load by name within the layers' rules, every module placed, "
          "no default or choice list written twice")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
