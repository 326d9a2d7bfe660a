"""Results of :class:`didmem.RandomTimingEstimator`: the cells and their aggregations.

Everything is computed at fit (the estimates, both standard errors, the simultaneous
critical values and the Fisher p-values); the result only selects and lays out rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParameterError

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
class RandomTimingResult:
    """The fit of :class:`didmem.RandomTimingEstimator`.

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
        """The (cohort, time) cells: estimate, std_error, std_error_neyman, beta, band."""
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

    def summary(self) -> str:
        """A short text summary naming the estimator and the randomisation assumption."""
        simple = self.aggregate("simple").overall
        beta = self.params.get("beta")
        lines = [
            f"{self.estimator}: Roth & Sant'Anna's estimator under random timing "
            f"(beta = {'plug-in efficient' if beta is None else beta}, controls "
            f"{self.params.get('control_group')})",
            f"Assumes the cohorts of the {self.randomised} instances were assigned at random "
            "(a shuffled training order).",
            f"{self.n_units} instances, {self.design.cohorts.size} cohorts, "
            f"{self.design.n_times} checkpoints.",
            f"simple: {simple['estimate']:.6g} (design-based SE {simple['std_error']:.3g}, "
            f"Neyman SE {simple['std_error_neyman']:.3g})",
        ]
        if self.tables.n_fisher:
            lines.append(f"Fisher randomisation test ({self.tables.n_fisher} permutations): "
                         f"sup-t over cells p = {self.fisher_sup_pvalue:.4g}")
        return "\n".join(lines)

    def save(self, path):
        """Refused: a random-timing fit has no results-file format yet (``didmem.load_result``
        reads the difference-in-differences kinds only).

        Write its rows instead: ``result.to_frame().to_parquet(path)`` (the cells) and
        ``result.aggregate(name).to_frame()`` for an aggregation.

        Raises
        ------
        ParameterError
            Always, naming the alternative.
        """
        raise ParameterError(
            f"RandomTimingResult has no results-file format (not written: {str(path)!r}); "
            "write its cells with result.to_frame().to_parquet(path) and an aggregation with "
            "result.aggregate(name).to_frame().to_parquet(path).")

    def __repr__(self) -> str:
        return (f"RandomTimingResult({self.n_units} units, {self.design.cohorts.size} cohorts,"
                f" {self.design.n_times} times)")
