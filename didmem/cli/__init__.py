"""The ``didmem`` command line: one module per subcommand, mounted in one loop.

``didmem demo`` runs the main job on the embedded default and prints where its outputs are.
User errors (a missing file, an unknown column, an invalid option) exit with status 2 and a
one-line reason, without a stack trace; warnings are printed as one line each.

Every subcommand is a module of this package with the same four names:

``HELP``
    The one line that ``didmem --help`` lists.
``DESCRIPTION``
    The paragraph that ``didmem COMMAND --help`` shows.
``add_arguments(parser)``
    Adds the subcommand's options to its :class:`argparse.ArgumentParser`. Options that
    configure a class or a function are built from its declarations
    (:func:`didmem._validation.add_option`: default from the signature, choices and type from
    ``_constraints``), so no default is written twice; the options several subcommands share
    (``--seed``, ``--n-bootstrap``, the panel's columns) are in :mod:`didmem.cli._options`.
``run(args) -> int``
    Does the work with the parsed :class:`argparse.Namespace` and returns the exit status.
    It raises :class:`~didmem.errors.DidmemError` (or ``FileNotFoundError``, ``KeyError``)
    for a user's mistake; :func:`main` prints it on one line and exits with status 2.

To add a subcommand ``didmem sensitivity``: write ``didmem/cli/sensitivity.py`` with those
four names (import torch, transformers, ray and the heavier parts of the package inside
``run``, so that ``import didmem.cli`` stays light), import it below and add it to
:data:`SUBCOMMANDS` in the place it should take in ``didmem --help``; then add its tests
to ``tests/cli/``. Nothing else changes.
"""

from __future__ import annotations

import os
import sys

from ..errors import DidmemError
from . import compare, demo, estimate, lab, plot, power, report, run, score, sensitivity

__all__ = ["main", "console_main", "build_parser", "SUBCOMMANDS"]

SUBCOMMANDS = {
    "demo": demo,
    "estimate": estimate,
    "plot": plot,
    "report": report,
    "lab": lab,
    "score": score,
    "power": power,
    "sensitivity": sensitivity,
    "compare": compare,
    "run": run,
}
"""Subcommand name -> its module, in the order ``didmem --help`` lists them."""


def build_parser(commands=None):
    """The ``didmem`` parser with the subcommands of :data:`SUBCOMMANDS` mounted.

    Every subcommand is listed (with its ``HELP`` and ``DESCRIPTION``), but only those in
    ``commands`` (default: all) get their options, so that a command line pays for the
    imports of the one subcommand it runs.
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="didmem",
        description="Causal memorisation profiles of language models by difference-in-differences.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in SUBCOMMANDS.items():
        command = sub.add_parser(name, help=module.HELP, description=module.DESCRIPTION)
        if commands is None or name in commands:
            module.add_arguments(command)
        command.set_defaults(func=module.run)
    return parser


def _chosen(argv) -> list[str]:
    """The subcommand that ``argv`` runs (its first word that is not an option), as a list."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return [first] if first in SUBCOMMANDS else []


def _cli_message(command: str, exc: BaseException, flags: dict | None = None) -> str:
    """The error's message on one line, with the library's advice in terms of CLI flags.

    ``flags`` maps the command's option destinations to their flags: a library message that
    names a parameter the command sets from a flag of the same name ("The 'grid_points'
    parameter of sensitivity ...") names the flag instead ("The option --grid-points ...").
    """
    import re

    message = " ".join(str(exc).split())
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        message = str(exc.args[0])
    if command == "estimate":
        message = estimate.cli_message(message)
    # a sentence that ends in another's message ending in a period ("...: {exc}.") ends once
    message = re.sub(r"(?<!\.)\.\.(?=\s|$)", ".", message)

    def as_flag(match):
        flag = (flags or {}).get(match.group(1))
        return f"The option {flag}" if flag else match.group(0)

    return re.sub(r"The '(\w+)' parameter of (?:didmem [\w-]+|[\w.]+)", as_flag, message)


def _flags(parser, command: str) -> dict:
    """``dest -> --flag`` of the options of ``command`` (its first long option string)."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            flags = {}
            for a in action.choices[command]._actions:  # the first option of a dest wins
                if a.option_strings:  # (--n-bootstrap, not its deprecated alias --draws)
                    flags.setdefault(a.dest, next((o for o in a.option_strings
                                                   if o.startswith("--")), a.option_strings[0]))
            return flags
    return {}


_OUT_IS = {"demo": "directory", "lab": "directory", "power": "directory", "run": "directory",
           "score": "directory", "estimate": "file", "plot": "file", "report": "file",
           "sensitivity": "file", "compare": "file"}
"""What each subcommand's ``--out`` names."""


def _check_out(command: str, out) -> None:
    """Refuse an ``--out`` that cannot be what the command writes, before any work."""
    from pathlib import Path

    from ..errors import ParameterError

    out_is = _OUT_IS.get(command)
    if out is None or out_is is None:
        return
    path = Path(out)
    blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise ParameterError(f"The option --out {out!r} lies under {str(blocked)!r}, which is a "
                             "file, not a directory; choose another path.")
    if out_is == "directory" and path.exists() and not path.is_dir():
        raise ParameterError(f"The option --out names the existing file {out!r}; didmem "
                             f"{command} writes a directory there (created if missing). Choose "
                             "another path, or move the file away.")
    if out_is == "file" and path.is_dir():
        raise ParameterError(f"The option --out names the directory {out!r}; didmem {command} "
                             f"writes a file. Give a file's path, such as "
                             f"{str(path / ('results.parquet' if command == 'estimate' else 'out'))!r}.")


def _os_message(exc: OSError) -> str:
    """An operating-system error on one line, naming the file."""
    names = " -> ".join(repr(str(n)) for n in (exc.filename, exc.filename2) if n is not None)
    reason = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    return f"{reason}: {names}" if names else reason


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings on the command line: one line, without the package's file and source line."""
    text = " ".join(str(message).split())
    print(f"didmem: warning: {text}", file=sys.stderr if file is None else file)


def main(argv=None) -> int:
    """Run ``didmem`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    import warnings

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_chosen(argv))
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            _check_out(args.command, getattr(args, "out", None))
            return args.func(args)
        except (DidmemError, FileNotFoundError, KeyError) as exc:
            message = _cli_message(args.command, exc, _flags(parser, args.command))
            print(f"didmem {args.command}: error: {message}",
                  file=sys.stderr)
            return 2
        except OSError as exc:  # the disk's or the system's: a full disk, a read-only path
            print(f"didmem {args.command}: error: {_os_message(exc)}", file=sys.stderr)
            return 2


def _small_pages() -> None:
    """Let numpy's large arrays take ordinary pages in this process, not huge pages.

    numpy asks the kernel for transparent huge pages on every array of 4 MB or more; where
    the kernel compacts memory to grant them (``defrag = madvise``, the common default),
    the first touch of a fresh 70 MB array costs 0.1 s instead of 0.03 s. A command that
    runs a few seconds and allocates each large array once pays that on every one: 0.25 s
    of ``didmem estimate`` at the paper's scale (``benchmarks/cli_speed.py``). A user's own
    ``NUMPY_MADVISE_HUGEPAGE`` setting is left as it is.
    """
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # numpy < 2
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            return
    _set_madvise_hugepage(False)


def console_main() -> int:
    """The ``didmem`` program: :func:`main` on ``sys.argv``, then a quick exit.

    Large arrays are given ordinary pages (see :func:`_small_pages`). The interpreter's
    last act is to tear down every module and collect the garbage of
    pandas, scipy and numba: about 0.2-0.3 s of a command that takes 2 s at the paper's
    scale. Freezing the collector once the work is done and the output flushed skips that
    collection; nothing is left to write (files are closed, atexit handlers still run).
    """
    import gc

    _small_pages()
    try:
        return main()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()
