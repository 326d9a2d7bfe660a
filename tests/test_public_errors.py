"""Every error didmem raises on purpose is a DidmemError (static: the package is parsed).

A ``raise`` of a built-in exception class (``ValueError``, ``TypeError``, ``KeyError``, ...)
anywhere in ``didmem/`` is a finding, except ``NotImplementedError`` (interface methods) and
the places listed in ``ALLOWED`` with their reason. Every exception class that didmem
defines derives from :class:`didmem.DidmemError`.
"""

from __future__ import annotations

import ast
import builtins
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "didmem"

BUILTIN_ERRORS = {name for name, obj in vars(builtins).items()
                  if isinstance(obj, type) and issubclass(obj, BaseException)}

#: (file relative to the repository, exception): why a built-in class is right there.
ALLOWED = {
    ("didmem/orders/indexed.py", "IndexError"):
        "Python's sequence protocol: iterating an MMapIndexedDataset stops at IndexError",
    ("didmem/cli/_fields.py", "ValueError"):
        "a programming error found when the CLI is built (a dataclass field without a "
        "docstring entry), never caused by a user's input",
    ("didmem/_validation.py", "TypeError"):
        "validate_params given constraints for parameters the function does not take: a "
        "programming error raised when the module is imported, never caused by a user",
    ("didmem/_validation.py", "KeyError"):
        "choices_of asked for a parameter without a OneOf: a programming error raised when the "
        "command line is built, never caused by a user's input",
    ("didmem/panel/core.py", "AttributeError"):
        "Panel.__getattr__ (a panel of several runs names its per-run attributes): hasattr, "
        "getattr with a default and pickling need AttributeError for any other name",
    ("didmem/orders/neox_checks.py", "AssertionError"):
        "the finders of the first offending entry are called only after a vectorised check "
        "found one: reaching the end is a programming error, never caused by a user",
    ("didmem/results/membership.py", "ValueError"):
        "MembershipResult._from_file, called only by load_result, which turns it into a "
        "ResultFileError naming the file (a malformed alpha in an altered file)",
    ("didmem/results/_random_timing_file.py", "ValueError"):
        "RandomTimingResult._from_file, called only by load_result, which turns it into a "
        "ResultFileError naming the file (an altered file's table or design)",
    ("didmem/_lazy.py", "AttributeError"):
        "the module __getattr__ protocol: hasattr, getattr with a default and 'from package "
        "import submodule' need AttributeError for a name the package does not have",
}


def _raised_name(node: ast.Raise) -> str | None:
    exc = node.exc
    if isinstance(exc, ast.Call):
        exc = exc.func
    return exc.id if isinstance(exc, ast.Name) else None


def builtin_raises(root: Path, base: Path) -> list[tuple[str, int, str]]:
    """``(file, line, exception)`` of every ``raise`` of a built-in exception class."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None:
                name = _raised_name(node)
                if name in BUILTIN_ERRORS and name != "NotImplementedError":
                    found.append((path.relative_to(base).as_posix(), node.lineno, name))
    return sorted(found)


def exception_classes(root: Path) -> dict[str, list[str]]:
    """Every class of the package that derives from an exception (not a warning)."""
    classes: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                                      for b in node.bases]

    def is_exception(name, seen=()):
        if name in BUILTIN_ERRORS:
            return not issubclass(getattr(builtins, name), Warning)
        return name in classes and name not in seen and any(
            is_exception(b, (*seen, name)) for b in classes[name])

    return {name: bases for name, bases in classes.items()
            if any(is_exception(b) for b in bases)}


def _derives_from_didmem_error(name: str, classes: dict[str, list[str]]) -> bool:
    return name == "DidmemError" or any(
        _derives_from_didmem_error(b, classes) for b in classes.get(name, ()))


def test_no_builtin_exception_is_raised_outside_the_allowed_places():
    findings = [f"{file}:{line}: raise {name}" for file, line, name in
                builtin_raises(PACKAGE, ROOT) if (file, name) not in ALLOWED]
    assert findings == [], "raise a DidmemError subclass instead:\n" + "\n".join(findings)


def test_every_allowed_place_still_raises_what_it_is_allowed():
    raised = {(file, name) for file, _, name in builtin_raises(PACKAGE, ROOT)}
    assert set(ALLOWED) <= raised, "remove stale entries of ALLOWED"


def test_every_exception_class_of_the_package_is_a_didmem_error():
    classes = exception_classes(PACKAGE)
    assert {"DidmemError", "ParameterError", "ResultFileError", "ScoringError"} <= set(classes)
    outside = sorted(name for name in classes if not _derives_from_didmem_error(name, classes))
    assert outside == []


def test_the_scan_finds_raises_and_classes(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text(textwrap.dedent("""
        class DidmemError(Exception):
            pass

        class Good(DidmemError, ValueError):
            pass

        class Bad(KeyError):
            pass

        def f(x):
            if x:
                raise ValueError("leaks")
            if x is None:
                raise Good("fine")
            raise NotImplementedError

        def g():
            try:
                f(1)
            except Good:
                raise
            raise TypeError
        """))
    assert builtin_raises(pkg, tmp_path) == [("pkg/m.py", 13, "ValueError"),
                                             ("pkg/m.py", 23, "TypeError")]
    classes = exception_classes(pkg)
    assert set(classes) == {"DidmemError", "Good", "Bad"}
    assert [n for n in classes if not _derives_from_didmem_error(n, classes)] == ["Bad"]
