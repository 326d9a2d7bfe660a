"""Results of :class:`didmem.RandomTimingEstimator`: the cells and their aggregations.

Everything is computed at fit (the estimates, both standard errors, the simultaneous
critical values and the Fisher p-values); the result only selects and lays out rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParameterError
from ._table_file import TableFile

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RandomTimingResult", "RandomTimingAggregate"]

_ALIASES = {"simple": "simple", "group": "group", "cohort": "group", "calendar": "calendar",
            "dynamic": "dynamic", "eventstudy": "dynamic", "event_study": "dynamic"}
_KEY_NAMES = {"simple": None, "group": "cohort", "calendar": "time", "dynamic": "event_time"}


def _frame(tables, rows, key_name):
    import pandas as pd

    out = {}
    if key_name == "cell":
        out["cohort"] = tables.cohort[rows]
        out["time"] = tables.time[rows]
    elif key_name is not None:
        out[key_name] = tables.key[rows]
    est, se = tables.estimate[rows], tables.std_error[rows]
    se_n = tables.std_error_neyman[rows]
    crit = tables.critical_value[rows]
    out.update(estimate=est, std_error=se, std_error_neyman=se_n, beta=tables.beta[rows],
               ci_lower=est - crit * se_n, ci_upper=est + crit * se_n)
    if key_name == "cell":  # as a group-time result's cells: the profile figure draws them
        out.update(event_time=out["time"] - out["cohort"], post=out["time"] >= out["cohort"],
                   significant=(out["ci_lower"] > 0) | (out["ci_upper"] < 0))
    if tables.n_fisher:
        out["fisher_pvalue"] = tables.fisher_pvalue[rows]
        out["fisher_pvalue_r"] = tables.fisher_pvalue_r[rows]
    return pd.DataFrame(out)


@dataclass(frozen=True, eq=False)
class RandomTimingAggregate:
    """One aggregation: the overall value (where ``staggered`` has one) and its keys.

    ``to_frame()`` has ``estimate``, ``std_error`` (design-based), ``std_error_neyman``,
    ``beta`` (the coefficient on the pre-treatment difference), the band ``ci_lower`` /
    ``ci_upper`` (``estimate -/+ critical_value * std_error_neyman``, simultaneous over the
    keys, each key's value at its Welch-Satterthwaite t margin) and, with Fisher tests, ``fisher_pvalue`` (exact) and ``fisher_pvalue_r``.
    """

    aggregation: str
    key_name: str | None
    tables: object = field(repr=False)
    overall_row: int | None = field(repr=False)
    key_rows: np.ndarray = field(repr=False)

    @property
    def overall(self):
        """The overall row as a dict (None for ``dynamic``, which has no overall value)."""
        if self.overall_row is None:
            return None
        return _frame(self.tables, np.array([self.overall_row]), None).iloc[0].to_dict()

    def to_frame(self) -> "pd.DataFrame":
        """The overall value (first row, key NaN) then the keys."""
        rows = self.key_rows if self.overall_row is None else np.r_[self.overall_row,
                                                                    self.key_rows]
        return _frame(self.tables, rows, self.key_name)


@dataclass(frozen=True, eq=False)
class RandomTimingResult(TableFile):
    """The fit of :class:`didmem.RandomTimingEstimator`.

    ``save(path)`` writes a results file (every row of the cells and aggregations, the design's
    per-cohort moments and the settings) that :func:`didmem.load_result` reads back as an
    equal result: ``to_frame``, ``aggregate``, ``balance_test``, ``summary`` and the report
    answer the same.

    Attributes
    ----------
    estimator : str
    params : dict
        The estimator's parameters.
    outcome : str
    randomised : str
        Which instances' cohorts the design randomised (``"training"`` or ``"all"``).
    design : TimingDesign
        Cohorts, times, cohort sizes, mean paths and covariance matrices.
    tables : RandomTimingTables
        Every row (cells and aggregations).
    """

    estimator: str
    params: dict
    outcome: str
    randomised: str
    design: object = field(repr=False)
    tables: object = field(repr=False)

    @property
    def n_units(self) -> int:
        return self.design.n_units

    @property
    def fisher_sup_pvalue(self) -> float:
        """Exact p-value of the sup-t over all cells (NaN without Fisher permutations)."""
        return self.tables.fisher_sup_pvalue

    def to_frame(self) -> "pd.DataFrame":
        """The (cohort, time) cells: estimate, std_error, std_error_neyman, beta, the band
        (``ci_lower``, ``ci_upper``, simultaneous over the cells), ``event_time`` (c - g),
        ``post`` (c >= g), ``significant`` (the band excludes zero) and, with Fisher tests,
        ``fisher_pvalue`` and ``fisher_pvalue_r``."""
        return _frame(self.tables, np.flatnonzero(self.tables.kind == "cell"), "cell")

    def aggregate(self, aggregation: str = "simple") -> RandomTimingAggregate:
        """An aggregation: ``simple``; ``group`` (``cohort``); ``calendar``; ``dynamic``
        (``eventstudy``), with ``staggered``'s cells and weights (see the docs)."""
        name = _ALIASES.get(aggregation)
        if name is None:
            raise ParameterError(
                f"The 'aggregation' parameter of RandomTimingResult.aggregate must be one of "
                f"{sorted(_ALIASES)}. Got {aggregation!r}.")
        rows = np.flatnonzero(self.tables.kind == name)
        overall = rows[np.isnan(self.tables.key[rows])]
        keys = rows[~np.isnan(self.tables.key[rows])]
        return RandomTimingAggregate(aggregation=name, key_name=_KEY_NAMES[name],
                                     tables=self.tables,
                                     overall_row=int(overall[0]) if overall.size else None,
                                     key_rows=keys)

    def balance_test(self, event_times=(0,)) -> "pd.DataFrame":
        """Balance of the pre-treatment outcomes across cohorts (R ``staggered``'s
        ``balance_checks`` with ``estimand = "all"``): one row per estimand's pre-treatment
        difference (``x_hat``, ``std_error``, ``t``, ``pvalue``) and the joint Wald test in
        ``attrs`` (``wald``, ``df``, ``pvalue_wald``). Small p-values speak against random
        timing (see the docs' *Random timing* page)."""
        import pandas as pd

        from ..inference.random_timing.balance import balance_test

        test = balance_test(self.design, event_times=event_times,
                            last_treated=self.params.get("control_group") == "last_treated")
        frame = pd.DataFrame({"estimand": list(test.rows), "x_hat": test.x_hat,
                              "std_error": test.std_error, "t": test.t,
                              "pvalue": test.pvalue})
        frame.attrs.update(wald=test.wald, df=test.df, pvalue_wald=test.pvalue_wald)
        return frame

    @property
    def estimator_words(self) -> str:
        """The estimator in words: Roth & Sant'Anna's, with its beta and controls."""
        beta = self.params.get("beta")
        named = {None: "the plug-in efficient beta", 0: "beta = 0: the difference in means",
                 1: "beta = 1: Callaway & Sant'Anna's comparison"}
        which = named[beta] if beta in named else f"beta = {beta:g}"
        controls = ("the last-treated cohort" if self.params.get("control_group")
                    == "last_treated" else "the not-yet-treated cohorts")
        return (f"Roth & Sant'Anna's estimator under random timing ({which}; controls "
                f"{controls})")

    @property
    def assumption(self) -> str:
        """The randomisation the inference rests on, in words (the summary's and the
        report's)."""
        if self.randomised == "all":
            who = ("every instance's cohort, the validation (never-treated) instances' "
                   "included, was assigned at random (the training order's shuffle and a "
                   "random validation split)")
        else:
            who = ("the training instances' cohorts were assigned at random among them (the "
                   "training order's shuffle, as in Pythia, PolyPythias and OLMo); the "
                   "validation (never-treated) instances are not assumed randomised and keep "
                   "their label in the Fisher test")
        return (f"Random timing: {who}. The standard errors are design-based: their "
                "randomness is that assignment (Roth & Sant'Anna 2023), not the sampling of "
                "instances, and they do not rest on parallel trends; a curriculum or "
                "data-mixing schedule breaks the assumption.")

    def summary(self) -> str:
        """A short text summary naming the estimator and the randomisation assumption."""
        simple = self.aggregate("simple").overall
        lines = [
            f"{self.estimator}: {self.estimator_words}",
            f"Assumes: {self.assumption}",
            f"{self.n_units} instances, {self.design.cohorts.size} cohorts, "
            f"{self.design.n_times} checkpoints; outcome {self.outcome or '(unnamed)'}.",
            f"simple: {simple['estimate']:.6g} (design-based SE {simple['std_error']:.3g}, "
            f"Neyman SE {simple['std_error_neyman']:.3g}; interval [{simple['ci_lower']:.4g}, "
            f"{simple['ci_upper']:.4g}])",
        ]
        if self.tables.n_fisher:
            lines.append(f"Fisher randomisation test ({self.tables.n_fisher} permutations, "
                         f"exact under the sharp null of no effect): sup-t over cells p = "
                         f"{self.fisher_sup_pvalue:.4g}; simple p = "
                         f"{simple['fisher_pvalue']:.4g}")
        else:
            lines.append("No Fisher randomisation test (n_fisher=0).")
        return "\n".join(lines)

    # the results file (a didmem.load_result kind): every row of the tables and the design
    FILE_KIND, FILE_WHAT = "random_timing", "random-timing results"

    def _file_contents(self):
        from ._random_timing_file import file_contents

        return file_contents(self)

    @classmethod
    def _from_file(cls, frame, settings: dict) -> "RandomTimingResult":
        from ._random_timing_file import from_file

        return from_file(cls, frame, settings)

    def __repr__(self) -> str:
        return (f"RandomTimingResult({self.n_units} units, {self.design.cohorts.size} cohorts,"
                f" {self.design.n_times} times)")
