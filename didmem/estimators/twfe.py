"""The two-way fixed-effects event-study regression, the practitioners' baseline."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import EstimationError, optional_import
from ..results import CellResult
from .base import Alpha, BaseEstimator, Instance, Integral, OneOf

__all__ = ["TWFEEstimator", "TWFE_ASSUMPTION"]

TWFE_ASSUMPTION = (
    "Parallel trends, no anticipation and effects that depend on event time only (the same "
    "path for every cohort): with effects that differ across cohorts the regression "
    "compares cohorts with each other and its coefficients are biased weighted averages "
    "(Sun & Abraham 2021)."
)


class TWFEEstimator(BaseEstimator):
    r"""Event-study regression with unit and time fixed effects and unit-clustered SEs.

    .. math::

        Y_{it} = \alpha_i + \lambda_t + \sum_{e \ne r} \beta_e \, 1\{k(t) - k(g_i) = e\}
                 + \varepsilon_{it},

    where ``k(.)`` is the position of a time among the panel's times (``k(g)`` that of the
    first time at or after ``g``), so event times ``e`` count checkpoints; never-treated units
    have every indicator at 0 and ``r`` (``reference``, by default -1, the last checkpoint
    before treatment) is left out. It is fitted by ``linearmodels.PanelOLS`` with
    ``entity_effects`` and ``time_effects`` and standard errors clustered by unit (or by the
    panel's cluster column).

    On the (cohort, time) grid the cell ``(g, c)`` gets ``beta_e`` with ``e = k(c) - k(g)``:
    the regression assumes every cohort has the same path. The event-study coefficients are
    in ``extra["event_study"]`` and the fitted ``PanelOLS`` result in ``extra["fit"]``.

    Parameters
    ----------
    reference : int
        Event time (in checkpoints) left out as the reference.
    alpha : float
        One minus the coverage of the pointwise normal intervals.
    outcome : str, optional
        Which of the panel's outcomes to use.
    lower_is_better : bool
        Flip the outcome's sign first.
    cluster : {"unit", "panel"}
        Cluster by unit, or by the panel's cluster column.

    Notes
    -----
    Needs ``linearmodels`` (``pip install 'didmem[compare]'``). With one treated cohort, two
    periods and ``reference=-1`` (the 2 x 2 design), ``beta_0`` is the difference in
    differences of the four means. With staggered cohorts and heterogeneous effects the
    coefficients mix cohorts with weights that can be negative; use :class:`DiDEstimator`.
    Sampling weights are used as regression weights. The clustered covariance is the
    sandwich of the two-way demeaned regression scaled by ``G / (G - 1) * (N - 1) / N``
    (``G`` clusters, ``N`` observations; ``linearmodels``' ``group_debias``), without a
    degrees-of-freedom charge for the fixed effects, which are nested in the unit clusters.

    References
    ----------
    Sun, L. and Abraham, S. (2021). Estimating dynamic treatment effects in event studies
    with heterogeneous treatment effects. Journal of Econometrics 225(2), 175-199.
    """

    _constraints = {
        "reference": Integral(),
        "alpha": Alpha(),
        "outcome": Instance(str, allow_none=True),
        "lower_is_better": OneOf(True, False),
        "cluster": OneOf("unit", "panel"),
    }

    def __init__(self, *, reference=-1, alpha=0.05, outcome=None, lower_is_better=False,
                 cluster="unit"):
        super().__init__(reference=reference, alpha=alpha, outcome=outcome,
                         lower_is_better=lower_is_better, cluster=cluster)

    def _fit(self, panel, params) -> CellResult:
        lm = optional_import("linearmodels", "compare")
        name = panel.resolve_outcome(params["outcome"])
        y = np.asarray(panel.outcome_matrix(name), dtype=np.float64)
        if params["lower_is_better"]:
            y = -y
        times, cohorts = panel.times.astype(np.float64), panel.cohorts
        n, t = y.shape
        treated = ~panel.never_treated
        if not treated.any():
            raise EstimationError("TWFEEstimator needs treated units (a finite cohort).")
        k_g = np.where(treated, np.searchsorted(times, np.where(treated, cohorts, 0.0)), 0)
        rel = np.arange(t)[None, :] - k_g[:, None]  # n x t event times in checkpoints
        events = np.unique(rel[treated])
        events = events[events != params["reference"]]
        if params["reference"] not in np.unique(rel[treated]):
            raise EstimationError(
                f"The reference event time {params['reference']} is not observed for any "
                f"treated unit; event times are {np.unique(rel[treated]).tolist()}.")
        unit_idx = np.repeat(np.arange(n), t)
        time_idx = np.tile(np.arange(t), n)
        index = pd.MultiIndex.from_arrays([unit_idx, time_idx], names=["unit", "time"])
        names = [f"e{e:+d}" for e in events]
        x = np.zeros((n * t, len(events)))
        flat_rel, flat_tr = rel.ravel(), np.repeat(treated, t)
        for j, e in enumerate(events):
            x[:, j] = (flat_rel == e) & flat_tr
        exog = pd.DataFrame(x, index=index, columns=names)
        dep = pd.Series(y.ravel(), index=index, name=name)
        weights = None
        if panel.has_weights:
            weights = pd.Series(np.repeat(panel.weights, t), index=index)
        model = lm.PanelOLS(dep, exog, entity_effects=True, time_effects=True, weights=weights,
                            drop_absorbed=True, check_rank=False)
        if params["cluster"] == "panel":
            if panel.clusters is None:
                raise EstimationError("cluster='panel' needs a panel built with cluster=...")
            groups = pd.Series(np.repeat(panel.clusters, t), index=index)
        else:
            groups = pd.Series(unit_idx, index=index)
        fit = model.fit(cov_type="clustered", clusters=groups.to_frame("cluster"),
                        auto_df=False, count_effects=False, debiased=False,
                        group_debias=True)
        beta = fit.params.reindex(names)
        se = fit.std_errors.reindex(names)
        study = pd.DataFrame({"event_time": events, "estimate": beta.to_numpy(),
                              "std_error": se.to_numpy()})
        ref_row = pd.DataFrame({"event_time": [params["reference"]], "estimate": [0.0],
                                "std_error": [np.nan]})
        study = pd.concat([study, ref_row]).sort_values("event_time").reset_index(drop=True)
        lookup = study.set_index("event_time")
        gs, sizes = np.unique(cohorts[treated], return_counts=True)
        gg, tt = np.repeat(gs, t), np.tile(times, gs.size)
        e_cell = np.arange(t)[None, :] - np.searchsorted(times, gs)[:, None]
        e_cell = e_cell.ravel()
        return CellResult.from_cells(
            cohort=gg, time=tt, estimate=lookup["estimate"].reindex(e_cell).to_numpy(),
            std_error=lookup["std_error"].reindex(e_cell).to_numpy(),
            n_units=np.repeat(sizes, t), alpha=params["alpha"], estimator=type(self).__name__,
            params=params, outcome=name, assumption=TWFE_ASSUMPTION, units=None,
            extra={"event_study": study, "fit": fit},
        )
