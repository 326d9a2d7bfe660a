#!/usr/bin/env python3
"""Check didmem's module graph and its parameter defaults.

Three checks, all static (the package is parsed with :mod:`ast`, never imported):

1. **Import cycles.** Every ``import``/``from ... import`` statement in ``didmem/`` counts,
   including those inside functions and methods; only ``if TYPE_CHECKING:`` blocks are left
   out (they never run). An edge ``a -> b`` joins two modules of the package: ``from .x
   import name`` points at module ``x`` (or at submodule ``x.name`` where that exists), and
   importing a subpackage points at its ``__init__``. Edges from a package's ``__init__`` to
   its own submodules are ordinary edges, so ``pkg/__init__ -> pkg/x -> pkg/__init__`` is a
   cycle like any other; the implicit import of parent packages is not counted (every
   module would otherwise sit in a cycle with ``didmem/__init__``). Strongly connected
   components of more than one module are reported, with one concrete cycle.
2. **Defaults written twice.** A keyword default of a class's ``__init__`` (or of a
   dataclass field) must not be repeated in the same module as a literal of a
   ``"name": value`` entry of a dict or a ``default=`` keyword for the same name: the
   signature is the one place a default lives (read it with :func:`inspect.signature`).

3. **Layers.** :data:`LAYERS` lists didmem's layers from the bottom up; a module may import
   from its own layer and the layers below, never from a higher one (imports inside
   functions count, as for cycles). A module that no layer names is reported too, so a new
   module is placed on purpose. ``docs/architecture.rst`` draws the same table.
4. **Choice lists written twice.** The values a parameter may take are declared once, in a
   ``OneOf(...)`` constraint (literal strings, or ``*NAME`` of a module-level tuple of
   strings); a list or tuple literal of two or more strings with the same values anywhere
   else in the package (a ``choices=[...]`` of the command line, a hand-written check) is
   reported: take the values from the declaration (:func:`didmem._validation.choices_of`).

Usage: ``python tools/check_imports.py [package_dir]``; exits 1 and prints each finding when
something is wrong.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


#: didmem's layers, bottom first: (name, module prefixes). A module belongs to the layer of
#: its longest matching prefix; the bare package name matches only the package's
#: ``__init__`` (a face), so a new top-level module must be placed here on purpose (some
#: entries name modules other branches add: _lazy, _outcomes, panel_exposures, suites, study).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("didmem._version", "didmem.errors", "didmem._messages", "didmem._arrays",
                    "didmem._validation", "didmem._lazy", "didmem._outcomes",
                    "didmem._progress")),
    ("panel", ("didmem.panel", "didmem.panel_exposures", "didmem.cohorts", "didmem.suites",
               "didmem.datasets")),
    ("inference", ("didmem.inference",)),
    # every result's .plot() draws through didmem.plotting, which reads results only
    ("results", ("didmem.results", "didmem.plotting")),
    ("estimators", ("didmem.estimators",)),
    ("analyses", ("didmem.honest", "didmem.planning", "didmem.montecarlo")),
    ("report", ("didmem.report",)),
    ("backends", ("didmem.backends", "didmem.runners")),
    ("study", ("didmem.study",)),
    ("lab", ("didmem.lab",)),
    ("faces", ("didmem.cli", "didmem")),
)


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


def import_graph(root: Path) -> dict[str, set[str]]:
    """Edges of the package's import graph: module -> modules it imports."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    modules = set(files)
    return {name: imports_of(path, name, modules) for name, path in files.items()}


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


def layer_of(module: str, layers=LAYERS) -> int | None:
    """Index of the layer that holds ``module`` (its longest matching prefix), else None."""
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            below = "." in prefix and module.startswith(prefix + ".")
            if (module == prefix or below) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def layer_violations(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Imports from a higher layer, and modules that no layer holds."""
    problems = []
    for module in sorted(graph):
        here = layer_of(module, layers)
        if here is None:
            problems.append(f"{module} is in no layer of LAYERS (tools/check_imports.py)")
            continue
        for target in sorted(graph[module]):
            there = layer_of(target, layers)
            if there is not None and there > here:
                problems.append(f"{module} (layer {layers[here][0]!r}) imports {target} "
                                f"(higher layer {layers[there][0]!r})")
    return problems


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
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "didmem"
    graph = import_graph(root)
    problems = []
    for component in cycles(graph):
        path = " -> ".join(_shortest_cycle(graph, component))
        problems.append(f"import cycle among {', '.join(component)}: {path}")
    if root.name == "didmem":
        problems.extend(layer_violations(graph))
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
    print(f"{root}: {len(graph)} modules, no import cycle, no import from a higher layer, "
          "no default or choice list written twice")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
