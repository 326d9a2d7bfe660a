"""The estimator contract: constructors store, ``fit`` validates and returns a result.

Parameters are declared once per class in ``_parameters`` as ``name: (default, check)``;
``check`` is a tuple of allowed values or a predicate with a description. Every invalid
value is reported with one message shape::

    The 'control_group' parameter of DiDEstimator must be one of {...}. Got 'never'.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, ClassVar

import numpy as np

from ..errors import ParameterError

__all__ = ["BaseEstimator", "Interval", "Integral", "OneOf", "Instance", "Seed"]


class _Check:
    description: str

    def __call__(self, value) -> bool:  # pragma: no cover - interface
        raise NotImplementedError


class OneOf(_Check):
    def __init__(self, *values):
        self.values = values
        self.description = "one of {" + ", ".join(repr(v) for v in values) + "}"

    def __call__(self, value) -> bool:
        return any(value == v and type(value) is type(v) for v in self.values)


class Interval(_Check):
    """A real number in [low, high] (either bound may be open or None)."""

    def __init__(self, low=None, high=None, *, closed="both", integer=False):
        self.low, self.high, self.closed, self.integer = low, high, closed, integer
        kind = "an integer" if integer else "a number"
        lo = "(" if closed in ("right", "neither") else "["
        hi = ")" if closed in ("left", "neither") else "]"
        self.description = (f"{kind} in {lo}{'-inf' if low is None else low}, "
                            f"{'inf' if high is None else high}{hi}")

    def __call__(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.integer and not isinstance(value, numbers.Integral):
            return False
        if not np.isfinite(value):
            return False
        if self.low is not None:
            if value < self.low or (value == self.low and self.closed in ("right", "neither")):
                return False
        if self.high is not None:
            if value > self.high or (value == self.high and self.closed in ("left", "neither")):
                return False
        return True


def Integral(low=None, high=None):
    return Interval(low, high, integer=True)


class Instance(_Check):
    def __init__(self, *types, description: str | None = None, allow_none=False):
        self.types, self.allow_none = types, allow_none
        names = " or ".join(t.__name__ for t in types)
        self.description = description or (f"an instance of {names}" + (" or None" if allow_none else ""))

    def __call__(self, value) -> bool:
        return (value is None and self.allow_none) or isinstance(value, self.types)


class Seed(_Check):
    """A random seed as numpy takes it: None, a non-negative integer or a Generator."""

    description = "None, a non-negative int or a numpy Generator"

    def __call__(self, value) -> bool:
        if value is None or isinstance(value, np.random.Generator):
            return True
        return (isinstance(value, numbers.Integral) and not isinstance(value, bool)
                and value >= 0)


class BaseEstimator:
    """Base class: stores keyword arguments, validates them at ``fit``.

    Subclasses declare ``_parameters`` and implement ``_fit(panel, params)``. An estimator
    keeps no fitted state, so one object serves many panels.
    """

    _parameters: ClassVar[dict[str, tuple[Any, Callable]]] = {}

    def __init__(self, **params):
        unknown = set(params) - set(self._parameters)
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unexpected parameters {sorted(unknown)}; "
                f"it takes {sorted(self._parameters)}."
            )
        for name, (default, _) in self._parameters.items():
            setattr(self, name, params.get(name, default))

    def get_params(self) -> dict[str, Any]:
        """The estimator's parameters as a dict."""
        return {name: getattr(self, name) for name in self._parameters}

    def set_params(self, **params) -> "BaseEstimator":
        """A new estimator with some parameters replaced."""
        merged = self.get_params()
        merged.update(params)
        return type(self)(**merged)

    def _validated_params(self) -> dict[str, Any]:
        params = self.get_params()
        for name, (_, check) in self._parameters.items():
            if not check(params[name]):
                raise ParameterError(
                    f"The {name!r} parameter of {type(self).__name__} must be "
                    f"{check.description}. Got {params[name]!r}."
                )
        return params

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
        changed = {k: v for k, v in self.get_params().items() if v is not self._parameters[k][0]
                   and v != self._parameters[k][0]}
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in changed.items()) + ")"
