"""Parameter checks declared once, for the whole package.

A class declares its constraints in a ``_constraints`` mapping (``name -> constraint``) and
keeps its defaults in its signature only; :func:`defaults_of` reads them with
:func:`inspect.signature`, as scikit-learn does. The estimators, backends, runners, the lab
configuration and the command line all check with :func:`check`, so every invalid value is
reported with one message shape::

    The 'control_group' parameter of DiDEstimator must be one of {...}. Got 'never'.

The command line builds its choices, types and defaults from the same declarations
(:func:`add_option`), so a default is never written a second time.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import os
import sys
from typing import Any, Callable, Mapping

import numpy as np

from .errors import ParameterError

__all__ = [
    "Constraint", "OneOf", "Interval", "Integral", "Instance", "Boolean",
    "Seed", "Satisfies", "check", "check_all", "constraints_of", "defaults_of", "add_option",
    "validate_params", "choices_of", "Count", "MAX_COUNT", "check_fits_memory",
]


class Constraint:
    """A rule a value must follow; ``description`` completes "must be ..."."""

    description: str = "valid"

    def __call__(self, value) -> bool:  # pragma: no cover - interface
        raise NotImplementedError


class OneOf(Constraint):
    """One of a few values (compared by value and type, so ``1`` is not ``True``)."""

    def __init__(self, *values):
        self.values = values
        self.description = "one of {" + ", ".join(repr(v) for v in values) + "}"

    def __call__(self, value) -> bool:
        return any(value == v and type(value) is type(v) for v in self.values)


def Boolean() -> OneOf:
    """True or False (not 0 or 1)."""
    return OneOf(True, False)


class Interval(Constraint):
    """A finite real number in [low, high] (either bound may be open, or None for none)."""

    def __init__(self, low=None, high=None, *, closed="both", integer=False, allow_none=False):
        self.low, self.high, self.closed, self.integer = low, high, closed, integer
        self.allow_none = allow_none
        noun = "an integer" if integer else "a number"
        lo = "(" if closed in ("right", "neither") else "["
        hi = ")" if closed in ("left", "neither") else "]"
        self.description = (f"{noun} in {lo}{'-inf' if low is None else low}, "
                            f"{'inf' if high is None else high}{hi}"
                            + (" or None" if allow_none else ""))

    def __call__(self, value) -> bool:
        if value is None:
            return self.allow_none
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.integer and not isinstance(value, numbers.Integral):
            return False
        try:  # a Python int too large for a float is not a usable number either
            if not np.isfinite(float(value)):
                return False
        except OverflowError:
            return False
        if self.low is not None:
            if value < self.low or (value == self.low and self.closed in ("right", "neither")):
                return False
        if self.high is not None:
            if value > self.high or (value == self.high and self.closed in ("left", "neither")):
                return False
        return True

    @property
    def python_type(self) -> type:
        return int if self.integer else float


def Integral(low=None, high=None, *, allow_none=False) -> Interval:
    """An integer in [low, high]."""
    return Interval(low, high, integer=True, allow_none=allow_none)


MAX_COUNT = 1_000_000
"""The most things computed one by one that a parameter may ask for: simulated studies and
Monte Carlo replications (each a whole fit, so a million already takes weeks), draws of a
least-favourable critical value, grid points of a test inversion. A larger count is a slip
of the keyboard, refused by name before numpy is asked for the arrays
(``n_simulations=10**12`` asked for 7 TiB)."""


def Count(low: int = 1) -> Interval:
    """A count of things computed one by one: an integer in [low, :data:`MAX_COUNT`]."""
    return Integral(low, MAX_COUNT)


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (None where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):  # not a POSIX system
        return None


def check_fits_memory(owner: str, name: str, value, need_bytes: float, what: str) -> None:
    """Refuse a parameter whose value makes an array larger than this machine's memory, in
    the one message shape, before numpy fails with its own message (or, where memory is
    overcommitted, exhausts the machine): ``what`` says what the value sizes."""
    have = machine_memory()
    if have is not None and need_bytes > have:
        raise ParameterError(
            f"The {name!r} parameter of {owner} must leave room for {what}: about "
            f"{need_bytes / 2**30:,.3g} GiB, more than this machine's {have / 2**30:,.1f} GiB "
            f"of memory. Got {value!r}.")


SMALLEST_ALPHA = 1e-12
"""The smallest significance level: below it ``1 - alpha / 2`` rounds to 1 in floating point
and the normal quantile is infinite (``alpha = 1e-300`` failed inside ``statistics``)."""


def Alpha(*, allow_none=False) -> Interval:
    """A significance level in [1e-12, 1)."""
    return Interval(SMALLEST_ALPHA, 1, closed="left", allow_none=allow_none)


class Instance(Constraint):
    """An instance of one of ``types`` (or None when ``allow_none``).

    A type may be named ``"module:Class"`` (``"didmem.estimators.did:DiDEstimator"``), so a
    light declaration need not import the class: a value cannot be an instance of a class whose
    module nobody has imported, so the module is looked up in ``sys.modules``, never imported.
    """

    def __init__(self, *types, description: str | None = None, allow_none=False):
        self.types, self.allow_none = types, allow_none
        names = " or ".join(t.rpartition(":")[2] if isinstance(t, str) else t.__name__
                            for t in types)
        self.description = description or (f"an instance of {names}"
                                            + (" or None" if allow_none else ""))

    def _loaded_types(self) -> tuple:
        loaded = []
        for t in self.types:
            if isinstance(t, str):
                module, _, name = t.partition(":")
                t = getattr(sys.modules.get(module), name, None)
            if t is not None:
                loaded.append(t)
        return tuple(loaded)

    def __call__(self, value) -> bool:
        return (value is None and self.allow_none) or isinstance(value, self._loaded_types())


class Seed(Constraint):
    """A random seed as numpy takes it: None, a non-negative integer or a Generator."""

    description = "None, a non-negative int or a numpy Generator"

    def __call__(self, value) -> bool:
        if value is None or isinstance(value, np.random.Generator):
            return True
        return (isinstance(value, numbers.Integral) and not isinstance(value, bool)
                and value >= 0)


class Satisfies(Constraint):
    """A value for which ``predicate(value)`` is true; ``description`` completes "must be"."""

    def __init__(self, predicate: Callable[[Any], bool], description: str):
        self.predicate, self.description = predicate, description

    def __call__(self, value) -> bool:
        try:
            return bool(self.predicate(value))
        except (TypeError, ValueError, OverflowError):
            return False


def finite_number(value) -> bool:
    """Is ``value`` a finite real number (not a bool)?"""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) \
        and bool(np.isfinite(value))


def validate_params(constraints: Mapping[str, Constraint], owner: str | None = None):
    """Declare a function's constraints once and check them at every call.

    The decorated function keeps its signature (the one source of its defaults); each
    argument that has a constraint is checked with :func:`check` before the body runs, so a
    bad value is refused in the package's one message shape, naming the function and the
    argument. :func:`constraints_of` and :func:`add_option` read the same declaration, so the
    command line takes its choices from it. (scikit-learn's ``validate_params`` is the model.)
    """
    def decorate(func):
        signature = inspect.signature(func)
        name = owner or func.__qualname__.replace(".<locals>", "")
        unknown = set(constraints) - set(signature.parameters)
        if unknown:  # pragma: no cover - a programming error, caught at import
            raise TypeError(f"constraints for parameters {sorted(unknown)} that "
                            f"{func.__qualname__} does not take")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            for arg, constraint in constraints.items():
                if arg in bound.arguments:
                    check(name, arg, bound.arguments[arg], constraint)
            return func(*args, **kwargs)

        wrapper._constraints = dict(constraints)
        return wrapper
    return decorate


def check(owner: str, name: str, value, constraint: Constraint | Callable[[Any], bool]):
    """Return ``value`` when it meets ``constraint``; raise :class:`ParameterError` otherwise.

    ``owner`` names the class (or command) the parameter belongs to.
    """
    if not constraint(value):
        description = getattr(constraint, "description", "valid")
        raise ParameterError(
            f"The {name!r} parameter of {owner} must be {description}. Got {value!r}."
        )
    return value


def check_all(owner: str, values: Mapping[str, Any],
              constraints: Mapping[str, Constraint]) -> dict[str, Any]:
    """Check every value that has a constraint; return them as a new dict."""
    for name, constraint in constraints.items():
        if name in values:
            check(owner, name, values[name], constraint)
    return dict(values)


def constraints_of(cls) -> dict[str, Constraint]:
    """The ``_constraints`` a class declares, merged along its bases (subclasses win), or
    those a function declares with :func:`validate_params`."""
    if not isinstance(cls, type):
        return dict(getattr(cls, "_constraints", {}))
    merged: dict[str, Constraint] = {}
    for base in reversed(cls.__mro__):
        merged.update(vars(base).get("_constraints", {}))
    return merged


def defaults_of(func_or_cls) -> dict[str, Any]:
    """Keyword defaults from a signature (a class means its ``__init__``); the one source."""
    target = func_or_cls.__init__ if isinstance(func_or_cls, type) else func_or_cls
    return {
        name: p.default for name, p in inspect.signature(target).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def choices_of(owner, name: str) -> list:
    """The values other than None that ``owner`` declares for ``name`` (a :class:`OneOf`)."""
    constraint = constraints_of(owner).get(name)
    if not isinstance(constraint, OneOf):
        raise KeyError(f"{owner!r} declares no list of choices for {name!r}")
    return [v for v in constraint.values if v is not None]


def add_option(parser, owner, name: str, *flags: str, help: str = "",
               default=inspect.Parameter.empty, **kwargs):
    """Add ``--name`` to an argparse parser from ``owner``'s declaration of ``name``.

    ``owner`` is the class (or function) the option configures. The default comes from its
    signature (or ``default=`` where the command line deliberately differs, such as a fixed
    seed), the choices from a :class:`OneOf`, the type from an :class:`Interval`; the value
    is checked again when ``owner`` is built or called.
    """
    constraint = constraints_of(owner).get(name)
    if default is inspect.Parameter.empty:
        default = defaults_of(owner)[name]
    flags = flags or ("--" + name.replace("_", "-"),)
    options: dict[str, Any] = {"default": default, "dest": name}
    choices = [v for v in constraint.values if v is not None] \
        if isinstance(constraint, OneOf) else []
    if choices and all(isinstance(v, str) for v in choices):
        options["choices"] = choices
    elif isinstance(constraint, Interval):
        options["type"] = constraint.python_type
    options.update(kwargs)
    shown = "" if default is None else " (default: %(default)s)"
    return parser.add_argument(*flags, help=help + shown, **options)
