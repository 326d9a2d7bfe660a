"""The estimator contract: constructors store, ``fit(data)`` validates and returns a result.

Every estimator has the same ``fit(data)``: ``data`` is an instance of the class's
``input_type`` (a :class:`~didmem.Panel`, or for the estimators that read no panel a
:class:`~didmem.estimators.inputs.SubsetModels` or
:class:`~didmem.estimators.inputs.TrainedModel`).

Defaults live in each constructor's signature only; constraints are declared once per class
in ``_constraints`` (``name -> constraint`` of :mod:`didmem._validation`). Every invalid
value is reported at ``fit`` with one message shape::

    The 'control_group' parameter of DiDEstimator must be one of {...}. Got 'never'.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._validation import (
    Alpha,
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
from ..panel import Panel

__all__ = ["BaseEstimator", "Alpha", "Interval", "Integral", "OneOf", "Instance", "Seed"]


class BaseEstimator:
    """Base class: stores keyword arguments, validates them at ``fit``.

    Subclasses take keyword-only parameters with their defaults in ``__init__``, declare
    ``_constraints`` (and ``input_type`` when they read no panel) and implement
    ``_fit(data, params)``. An estimator keeps no fitted state, so one object serves many
    inputs.
    """

    _constraints: ClassVar[dict[str, Constraint]] = {}
    #: The class of the one argument of :meth:`fit`.
    input_type: ClassVar[type] = Panel
    #: How to build an ``input_type``, for the message when ``fit`` gets something else.
    #: Whether :meth:`fit` takes a panel of several runs (``Panel(..., run=...)``).
    _takes_runs: ClassVar[bool] = False
    _input_hint: ClassVar[str] = (
        "Build one with didmem.Panel(df, unit=..., time=..., cohort=..., outcome=...).")

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
        """Set some parameters of this estimator and return it (scikit-learn's ``set_params``).

        Names are checked at once (an unknown one is a :class:`~didmem.errors.ParameterError`
        naming the valid ones); values are validated at :meth:`fit`, as the constructor's
        are. :meth:`with_params` gives a new estimator instead.

        Returns
        -------
        BaseEstimator
            ``self``.
        """
        names = self._parameter_names()
        unknown = sorted(set(params) - set(names))
        if unknown:
            raise ParameterError(f"{type(self).__name__}.set_params got unknown parameter(s) "
                                 f"{unknown}; its parameters are {sorted(names)}.")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def with_params(self, **params) -> "BaseEstimator":
        """A new estimator of the same class with some parameters replaced.

        The estimator itself is left unchanged (unlike :meth:`set_params`).
        """
        merged = self.get_params()
        merged.update(params)
        return type(self)(**merged)

    def _validated_params(self) -> dict[str, Any]:
        return check_all(type(self).__name__, self.get_params(), constraints_of(type(self)))

    def fit(self, data):
        """Estimate on ``data`` (an ``input_type``) and return an immutable result.

        Parameters
        ----------
        data : Panel, SubsetModels or TrainedModel
            The class's ``input_type``. The group-time estimators (:class:`~didmem.DiDEstimator`,
            :class:`~didmem.DifferenceEstimator`) also take a parquet folder read lazily
            (:meth:`didmem.Panel.scan`), a binary panel's pattern counts
            (:class:`~didmem.panel.patterns.PatternPanel`) and per-cohort moments
            (:class:`~didmem.inference.moments.cohort.CohortMoments`), fitted from their moments.

        Raises
        ------
        ParameterError
            When ``data`` is not an ``input_type``, or a parameter is invalid.
        """
        expected = self.input_type
        if not self._accepts(data):
            raise ParameterError(
                f"{type(self).__name__}.fit needs a didmem.{expected.__name__}; got "
                f"{type(data).__name__}. {self._input_hint}")
        if getattr(data, "run_column", None) is not None and not self._takes_runs:
            raise ParameterError(
                f"{type(self).__name__}.fit got a panel of {data.n_runs} runs (column "
                f"{data.run_column!r}). Fit didmem.RunsEstimator for each run's, the pooled "
                "and the within-instance profiles, or one run's panel: panel.run_panel(run).")
        return self._fit(data, self._validated_params())

    def _accepts(self, data) -> bool:
        """Whether :meth:`fit` takes ``data``: an ``input_type`` (the group-time estimators
        take its lazy forms too)."""
        return isinstance(data, self.input_type)

    def _fit(self, data, params):  # pragma: no cover - interface
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
