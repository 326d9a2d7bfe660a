"""The estimator contract: constructors store, ``fit`` validates and returns a result.

Defaults live in each constructor's signature only; constraints are declared once per class
in ``_constraints`` (``name -> constraint`` of :mod:`didmem._validation`). Every invalid
value is reported at ``fit`` with one message shape::

    The 'control_group' parameter of DiDEstimator must be one of {...}. Got 'never'.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._validation import (
    Constraint,
    Instance,
    Integral,
    Interval,
    OneOf,
    Seed,
    check_all,
    constraints_of,
    defaults_of,
)
from ..errors import ParameterError

__all__ = ["BaseEstimator", "Interval", "Integral", "OneOf", "Instance", "Seed"]


class BaseEstimator:
    """Base class: stores keyword arguments, validates them at ``fit``.

    Subclasses take keyword-only parameters with their defaults in ``__init__``, declare
    ``_constraints`` and implement ``_fit(panel, params)``. An estimator keeps no fitted
    state, so one object serves many panels.
    """

    _constraints: ClassVar[dict[str, Constraint]] = {}

    def __init__(self, **params):
        for name, value in params.items():
            setattr(self, name, value)

    @classmethod
    def _parameter_names(cls) -> tuple[str, ...]:
        return tuple(defaults_of(cls))

    def get_params(self) -> dict[str, Any]:
        """The estimator's parameters as a dict."""
        return {name: getattr(self, name) for name in self._parameter_names()}

    def set_params(self, **params) -> "BaseEstimator":
        """A new estimator with some parameters replaced."""
        merged = self.get_params()
        merged.update(params)
        return type(self)(**merged)

    def _validated_params(self) -> dict[str, Any]:
        return check_all(type(self).__name__, self.get_params(), constraints_of(type(self)))

    def fit(self, panel):
        """Estimate on ``panel`` and return an immutable result."""
        from ..panel import Panel

        if not isinstance(panel, Panel):
            raise ParameterError(
                f"{type(self).__name__}.fit needs a didmem.Panel; got {type(panel).__name__}. "
                "Build one with didmem.Panel(df, unit=..., time=..., cohort=..., outcome=...)."
            )
        return self._fit(panel, self._validated_params())

    def _fit(self, panel, params):  # pragma: no cover - interface
        raise NotImplementedError

    def __repr__(self) -> str:
        defaults = defaults_of(type(self))
        changed = {k: v for k, v in self.get_params().items()
                   if v is not defaults[k] and not _equal(v, defaults[k])}
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in changed.items()) + ")"


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays and other values without a truth value
        return False
