"""Architectural counterfactual memorisation (Zhang et al. 2023; the paper's Estimator 3)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._messages import listing
from ..errors import EstimationError, PanelError, ParameterError
from ..results import CellResult
from ._per_instance import cell_means
from .base import Alpha, BaseEstimator, Instance, OneOf
from .inputs import SubsetModels

__all__ = ["ArchitecturalEstimator", "ARCHITECTURAL_ASSUMPTION"]

ARCHITECTURAL_ASSUMPTION = (
    "Models trained with and without x are draws of the same training algorithm "
    "(architecture, data distribution, optimiser, random seeds), and x is IN or OUT of each "
    "model at random: the estimate is the memorisation of the architecture, averaged over "
    "models, not that of any one trained model."
)


def _membership_long(membership, model: str, unit: str) -> pd.DataFrame:
    if {model, unit, "member"} <= set(membership.columns):
        long = membership
    else:  # wide: index = models, columns = units
        long = membership.rename_axis(index=model, columns=unit).stack().rename("member")
        long = long.reset_index()
    m = long["member"]
    if not m.isin([0, 1, True, False]).all():
        raise ParameterError("membership's 'member' values must be 0/1 or booleans.")
    long = long.assign(member=m.astype(bool))
    if long.duplicated([model, unit]).any():
        raise ParameterError("membership has more than one row for some (model, unit) pairs.")
    return long


class ArchitecturalEstimator(BaseEstimator):
    r"""IN-mean minus OUT-mean per instance, over models trained with and without it.

    With models :math:`m = 1..M`, membership :math:`S_m(x) \in \{0, 1\}` and outcomes
    :math:`Y^m_c(x)`,

    .. math::

        \hat\tau_{\mathrm{arch}}(x, c) = \frac{\sum_m S_m(x) Y^m_c(x)}{\sum_m S_m(x)}
            - \frac{\sum_m (1 - S_m(x)) Y^m_c(x)}{\sum_m (1 - S_m(x))},

    and the cell value :math:`\hat\tau_{\mathrm{arch}}(g, c)` is its mean over the instances
    of cohort ``g`` (the macro-batch in which the IN models saw them).

    The estimand is the memorisation of an *architecture* (a training algorithm), averaged
    over random initialisations and training subsets, not that of one trained model: compare
    it with :class:`DiDEstimator` on the main model's checkpoints (see
    ``examples/architectural_vs_did.py``). It needs many retrained models.

    Parameters
    ----------
    outcome : str, optional
        The outcome column of ``scores`` (needed when it has several).
    alpha : float
        One minus the coverage of the pointwise normal intervals.
    lower_is_better : bool
        Flip the outcome's sign first, so that memorisation is positive.
    model_column, unit_column, time_column : str
        Column names in ``scores`` and ``membership``.

    Notes
    -----
    The per-instance standard error is Welch's,
    ``sqrt(s_in^2 / n_in + s_out^2 / n_out)`` (NaN when either side has a single model); the
    per-cell standard error is ``sd / sqrt(n)`` of the instances' estimates, which covers both
    the instances' spread and each estimate's model noise.

    References
    ----------
    Feldman, V. and Zhang, C. (2020). What neural networks memorize and why. NeurIPS.
    Zhang, C. et al. (2023). Counterfactual memorization in neural language models. NeurIPS.
    Lesci, P. et al. (2024). Causal estimation of memorisation profiles. ACL 2024, App. B.1.
    """

    _constraints = {
        "outcome": Instance(str, allow_none=True),
        "alpha": Alpha(),
        "lower_is_better": OneOf(True, False),
        "model_column": Instance(str),
        "unit_column": Instance(str),
        "time_column": Instance(str),
    }

    def __init__(self, *, outcome=None, alpha=0.05, lower_is_better=False,
                 model_column="model", unit_column="unit", time_column="time"):
        super().__init__(outcome=outcome, alpha=alpha, lower_is_better=lower_is_better,
                         model_column=model_column, unit_column=unit_column,
                         time_column=time_column)

    input_type = SubsetModels
    _input_hint = "Build one with didmem.SubsetModels(scores, membership[, cohorts])."

    def fit(self, data: SubsetModels) -> CellResult:
        """Estimate from several models' scores and their membership matrix.

        Parameters
        ----------
        data : SubsetModels
            The models' scores (the lab's ``subset_scores.parquet``), their membership
            (``membership.parquet``) and optionally the cohort of each unit.

        Returns
        -------
        CellResult
            Cells on the (cohort, time) grid and per-instance estimates in ``units``
            (unit, cohort, time, estimate, std_error, n_in, n_out).

        Raises
        ------
        EstimationError
            When an instance is IN for no model or OUT for no model (naming them).
        """
        return super().fit(data)

    def _fit(self, data: SubsetModels, p) -> CellResult:
        scores, membership, cohorts = data.scores, data.membership, data.cohorts
        mc, uc, tc = p["model_column"], p["unit_column"], p["time_column"]
        missing = [c for c in (mc, uc, tc) if c not in scores.columns]
        if missing:
            raise PanelError(f"scores lacks the columns {missing}; it has {list(scores.columns)}.")
        candidates = [c for c in scores.columns if c not in (mc, uc, tc, "cohort")]
        outcome = p["outcome"]
        if outcome is None:
            if len(candidates) != 1:
                raise ParameterError(f"scores has the outcomes {candidates}; name the one to use "
                                     "with outcome=...")
            outcome = candidates[0]
        elif outcome not in scores.columns:
            raise ParameterError(f"Unknown outcome {outcome!r}; scores has {candidates}.")
        mem = _membership_long(membership, mc, uc)
        data = scores[[mc, uc, tc, outcome]].merge(mem[[mc, uc, "member"]], on=[mc, uc],
                                                   how="left")
        if data["member"].isna().any():
            pairs = data.loc[data["member"].isna(), [mc, uc]].drop_duplicates()
            raise EstimationError(f"membership has no row for {len(pairs)} (model, unit) pairs of "
                                  f"scores, e.g. {listing(list(map(tuple, pairs.to_numpy())))}.")
        data["member"] = data["member"].astype(bool)
        y = data[outcome].to_numpy(np.float64)
        if not np.all(np.isfinite(y)):
            raise PanelError(f"Outcome {outcome!r} has non-finite values.")
        data["y"] = -y if p["lower_is_better"] else y
        models = data.groupby([uc, "member"])[mc].nunique().unstack("member", fill_value=0)
        models = models.reindex(columns=[False, True], fill_value=0)
        for side, col in (("IN", True), ("OUT", False)):
            never = models.index[models[col].to_numpy() == 0]
            if len(never):
                raise EstimationError(
                    f"ArchitecturalEstimator needs every instance IN at least one model and OUT "
                    f"of at least one; {len(never)} instances are never {side}: "
                    f"{listing(list(never))}.")
        stats = data.groupby([uc, tc, "member"])["y"].agg(["mean", "var", "count"])
        stats = stats.unstack("member")
        m_in, m_out = stats[("mean", True)], stats[("mean", False)]
        n_in, n_out = stats[("count", True)], stats[("count", False)]
        se = np.sqrt(stats[("var", True)] / n_in + stats[("var", False)] / n_out)
        units = pd.DataFrame({"unit": stats.index.get_level_values(0),
                              "time": stats.index.get_level_values(1).astype(np.float64),
                              "estimate": (m_in - m_out).to_numpy(),
                              "std_error": se.to_numpy(),
                              "n_in": n_in.to_numpy(np.int64), "n_out": n_out.to_numpy(np.int64)})
        if cohorts is None and "cohort" in mem.columns:
            cohorts = mem.drop_duplicates(uc).set_index(uc)["cohort"]
        if cohorts is None:
            units["cohort"] = np.nan
        else:
            cohorts = pd.Series(cohorts, dtype=np.float64)
            units["cohort"] = units["unit"].map(cohorts).to_numpy(np.float64)
        units = units[["unit", "cohort", "time", "estimate", "std_error", "n_in", "n_out"]]
        if units["cohort"].isna().all():  # no cohorts: one cell per time
            cells = cell_means(units.assign(cohort=0.0))
            cells["cohort"] = np.full(len(cells["time"]), np.nan)
        else:
            cells = cell_means(units)
        return CellResult.from_cells(**cells, alpha=p["alpha"], estimator=type(self).__name__,
                                     params=p, outcome=outcome,
                                     assumption=ARCHITECTURAL_ASSUMPTION, units=units,
                                     extra={"n_models": int(data[mc].nunique())})
