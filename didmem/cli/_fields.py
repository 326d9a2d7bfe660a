"""Command-line options generated from a dataclass: one flag per field.

Each field of the dataclass becomes ``--field-name`` (or the name given in ``flags``): its
type and choices come from the class's ``_constraints`` (through
:func:`didmem._validation.add_option`), its help from the numpydoc ``Parameters`` section of
the class's docstring, and the default it shows from the dataclass. A field whose values
are not one number or word (a tuple, a list of files) says how it is parsed in ``special``.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

from .._validation import Interval, add_option, constraints_of

__all__ = ["docstring_parameters", "add_dataclass_options", "field_changes"]

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def docstring_parameters(obj) -> dict[str, str]:
    """``name -> description`` from the numpydoc ``Parameters`` section of ``obj``'s docstring.

    An entry naming several parameters (``a, b : int``) gives each the same description.
    Descriptions are joined into one line of plain text (reST literals and roles unwrapped).
    """
    lines = inspect.cleandoc(obj.__doc__ or "").splitlines()
    try:
        start = next(i for i in range(len(lines) - 1)
                     if lines[i].strip() == "Parameters" and set(lines[i + 1].strip()) == {"-"})
    except StopIteration:
        return {}
    entries: dict[str, list[str]] = {}
    names: list[str] = []
    for i in range(start + 2, len(lines)):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and set(lines[i + 1].strip()) == {"-"}:
            break  # the next section's title
        if line and not line[0].isspace():
            names = [n.strip() for n in line.split(" : ")[0].split(",")]
            for name in names:
                entries[name] = []
        elif line.strip():
            for name in names:
                entries[name].append(line.strip())
    return {name: _plain(" ".join(words)) for name, words in entries.items()}


def _plain(text: str) -> str:
    text = _ROLE.sub(lambda m: m.group(1).rpartition(".")[2], text)
    return _LITERAL.sub(r"\1", text)


def _shown(value) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value)) if value else "none"
    return str(value)


def add_dataclass_options(parser, cls, *, flags=None, special=None, scales=None,
                          keep_default=(), exclude=()) -> None:
    """Add one option per field of the dataclass ``cls`` to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser or argument group
    cls : type
        A dataclass with a numpydoc ``Parameters`` section describing every field.
    flags : dict, optional
        ``field -> flag`` where the flag is not ``--field-name`` (names users already have).
    special : dict, optional
        ``field -> argparse keywords`` (``type``, ``action``, ``metavar``, extra ``help``)
        for fields that are not one number or word.
    scales : dict, optional
        ``label -> instance of cls``: the values each named scale gives a field, shown in
        the help where it differs from the dataclass default.
    keep_default : iterable of str
        Fields whose parsed default is the dataclass default; every other field parses to
        ``None`` when not given, meaning "unchanged" (see :func:`field_changes`).
    exclude : iterable of str
        Fields that get no option.

    Raises
    ------
    ValueError
        When a field has no description in the docstring (so help cannot drift silently).
    """
    flags, special, scales = flags or {}, special or {}, scales or {}
    described = docstring_parameters(cls)
    for field in dataclasses.fields(cls):
        name = field.name
        if name in exclude or not field.init:
            continue
        if name not in described:
            raise ValueError(f"{cls.__name__}'s docstring does not describe its field {name!r}.")
        default = (field.default if field.default is not dataclasses.MISSING
                   else field.default_factory())
        extra = dict(special.get(name, {}))
        note = extra.pop("help", "")
        shown = [f"default: {_shown(default)}"]
        shown += [f"{label}: {_shown(getattr(value, name))}" for label, value in scales.items()
                  if getattr(value, name) != default]
        text = " ".join(filter(None, [described[name], note])).replace("%", "%%")
        if name not in keep_default:
            text += f" ({'; '.join(shown)})"
        constraint = constraints_of(cls).get(name)
        if isinstance(constraint, Interval) and not {"type", "action"} & set(extra):
            extra.setdefault("metavar", "N" if constraint.integer else "X")
        add_option(parser, cls, name, flags.get(name, "--" + name.replace("_", "-")),
                   help=text, **({} if name in keep_default else {"default": None}), **extra)


def field_changes(args, cls, exclude=()) -> dict:
    """The fields of ``cls`` that parsed options set (every option not left at ``None``)."""
    changes = {}
    for field in dataclasses.fields(cls):
        value = getattr(args, field.name, None)
        if field.name not in exclude and value is not None:
            changes[field.name] = tuple(value) if isinstance(value, list) else value
    return changes
