"""The ``[estimate]`` and ``[report]`` tables of a study.

Their keys are derived from what they fill, never kept by hand: ``[estimate]`` takes the
fields of :class:`EstimateSettings` and the keywords of the estimator it names (from its
signature); ``[report]`` takes the keywords of :func:`didmem.report.render_report`.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import ClassVar

from .._validation import OneOf, check_all, constraints_of, defaults_of
from ..errors import ConfigError, ParameterError
from ..estimators import DiDEstimator, DifferenceEstimator, RandomTimingEstimator
from ..panel import Panel
from ._tables import closest, string_list, unknown_keys

__all__ = ["ESTIMATORS", "FIXED_SEED", "EstimateSettings", "estimate_keys", "report_keys",
           "report_options"]

ESTIMATORS = {"did": DiDEstimator, "difference": DifferenceEstimator,
              "random-timing": RandomTimingEstimator}
"""The estimators that ``--estimator`` and ``[estimate] estimator`` name (random timing's
result is a :class:`~didmem.results.random_timing.RandomTimingResult`, which a study saves,
reads back and reports as it does a group-time result)."""
ONE_EXPOSURE_ESTIMATORS = ("random-timing",)
"""The estimators of :data:`ESTIMATORS` that take one exposure per instance (no
``cohort_2``): a design that trains an instance several times is refused."""
COVARIATE_ESTIMATORS = ("did",)
"""The estimators of :data:`ESTIMATORS` that adjust for covariates."""
FIXED_SEED = 0
"""The seed of a study (and of every subcommand) unless ``seed`` is given, so that a
study run twice gives the same output."""

#: Estimator keywords that the study sets per outcome, not from the table.
_PER_OUTCOME = ("outcome", "lower_is_better")
#: render_report keywords that a file cannot give (Python objects such as a pandas Series,
#: the truth's DataFrame).
_NOT_IN_FILES = ("figure_options", "truth")


def _keywords(func) -> set[str]:
    return {name for name, p in inspect.signature(func).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY}


@dataclass(frozen=True)
class EstimateSettings:
    """The ``[estimate]`` table: which outcomes to estimate, and how.

    Parameters
    ----------
    outcomes : tuple of str, optional
        Outcomes (scored metrics) to estimate; default every scored metric.
    estimator : {"did", "difference", "random-timing"}
        Difference-in-differences, the plain difference, or Roth & Sant'Anna's efficient
        estimator under random timing (:class:`~didmem.RandomTimingEstimator`: ``beta``,
        ``randomised``, ``n_fisher``, ...; one exposure per instance, no covariates).
    covariates : tuple of str
        Instance covariates of the panel to condition on (``did`` only).
    lower_is_better : tuple of str
        Outcomes where lower is better (surprisal, rank): their sign is flipped.
    balance : str
        What :class:`~didmem.Panel` does with an unbalanced panel (its ``balance``; the
        choices are the Panel's own). Default ``"keep"``: a study estimates with every score
        it has (R did's ``allow_unbalanced_panel``), and its log says how many
        (instance, checkpoint) rows are missing and where.
    options : dict
        Keywords of the estimator: every other key of the table (``control_group``,
        ``n_bootstrap``, ``alpha``, ...). ``seed`` is :data:`FIXED_SEED` unless given.
    """

    outcomes: tuple | None = None
    estimator: str = "did"
    covariates: tuple = ()
    lower_is_better: tuple = ()
    balance: str = "keep"
    options: dict = field(default_factory=dict)

    _constraints: ClassVar[dict] = {"estimator": OneOf(*ESTIMATORS)}

    @classmethod
    def from_table(cls, table: dict | None, where: str) -> EstimateSettings:
        """Check the ``[estimate]`` table; ``where`` starts each error message."""
        table = dict(table or {})
        estimator = table.get("estimator", defaults_of(cls)["estimator"])
        if not constraints_of(cls)["estimator"](estimator):
            raise ConfigError(f"{where} estimator must be "
                              f"{' or '.join(repr(k) for k in ESTIMATORS)}; got "
                              f"{estimator!r}{closest(estimator, ESTIMATORS)}.")
        allowed = estimate_keys(estimator)
        every = set().union(*map(estimate_keys, ESTIMATORS))
        unknown = sorted(set(table) - every)
        if unknown:
            raise ConfigError(f"{where} unknown key {unknown[0]!r}{closest(unknown[0], every)}; "
                              f"allowed: {', '.join(sorted(allowed))}.")
        settings = {"estimator": estimator}
        for name in ("outcomes", "covariates", "lower_is_better"):
            if name in table:
                settings[name] = string_list(table[name], name, where)
                twice = sorted({v for v in settings[name] if settings[name].count(v) > 1})
                if twice:
                    raise ConfigError(f"{where} {name} lists {', '.join(map(repr, twice))} "
                                      "more than once.")
        if settings.get("outcomes") == ():
            raise ConfigError(f"{where} outcomes is empty; leave it out to estimate every "
                              "scored metric.")
        if "balance" in table:
            rule = constraints_of(Panel)["balance"]
            if not rule(table["balance"]):
                raise ConfigError(f"{where} balance must be {rule.description}; got "
                                  f"{table['balance']!r}.")
            settings["balance"] = table["balance"]
        elsewhere = sorted(set(table) - allowed)
        if settings.get("covariates") and estimator not in COVARIATE_ESTIMATORS:
            elsewhere = sorted({*elsewhere, "covariates"})
        if elsewhere:
            fits = [k for k in ESTIMATORS if set(elsewhere) <= estimate_keys(k)
                    and ("covariates" not in elsewhere or k in COVARIATE_ESTIMATORS)]
            raise ConfigError(f"{where} {' and '.join(elsewhere)} "
                              f"{'goes' if len(elsewhere) == 1 else 'go'} with estimator = "
                              f"{' or '.join(repr(k) for k in fits)}.")
        names = {f.name for f in dataclasses.fields(cls)}
        options = {k: v for k, v in table.items() if k not in names}
        options.setdefault("seed", FIXED_SEED)
        est = ESTIMATORS[estimator]
        try:
            check_all(est.__name__, options, constraints_of(est))
        except ParameterError as exc:
            raise ConfigError(f"{where} {exc}") from None
        return cls(**settings, options=options)

    def estimator_for(self, outcome: str):
        """The estimator of one outcome."""
        return ESTIMATORS[self.estimator](**self.options,
                                          lower_is_better=outcome in self.lower_is_better)

    def option(self, name: str):
        """The estimator's value of keyword ``name``: the table's, else its default."""
        return self.options.get(name, defaults_of(ESTIMATORS[self.estimator]).get(name))


def estimate_keys(estimator: str) -> set[str]:
    """The keys of ``[estimate]`` with ``estimator``: the fields of :class:`EstimateSettings`
    but ``options``, and the estimator's keywords but those set per outcome."""
    fields = {f.name for f in dataclasses.fields(EstimateSettings)} - {"options"}
    return fields | (_keywords(ESTIMATORS[estimator]) - set(_PER_OUTCOME))


def report_keys() -> set[str]:
    """The keys of ``[report]``: the keywords of :func:`~didmem.report.render_report`."""
    from ..report import render_report  # the report's dependencies load when it is asked for

    return _keywords(render_report) - set(_NOT_IN_FILES)


def report_options(table: dict | None, where: str) -> dict:
    """Check the ``[report]`` table; return the keywords for :func:`~didmem.report.write_report`.

    A key whose default is a string takes a string; the others a list of strings.
    """
    table = dict(table or {})
    unknown_keys(table, report_keys(), where)
    from ..report import render_report

    defaults = defaults_of(render_report)
    for key, value in table.items():
        if isinstance(defaults[key], str):
            if not isinstance(value, str):
                raise ConfigError(f"{where} {key} must be a string; got {value!r}.")
        else:
            string_list(value, key, where)
    try:  # the report's own declaration (before anything is scored)
        check_all("render_report", table, constraints_of(render_report))
    except ParameterError as exc:
        raise ConfigError(f"{where} {exc}") from None
    from ..results.plotting import PLOTS

    unknown = [f for f in table.get("figures", ()) if f not in PLOTS]
    if unknown:
        raise ConfigError(f"{where} figures names {unknown[0]!r}{closest(unknown[0], PLOTS)}, "
                          f"which is not a figure; choose from {', '.join(PLOTS)}.")
    return table
