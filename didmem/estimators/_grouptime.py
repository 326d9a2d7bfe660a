"""The fitting pipeline shared by the group-time estimators (DiD and difference).

The design, the kernels and the inference are imported when a fit runs, so that reading an
estimator's declarations (its constraints and defaults, as the command line does) loads
neither pandas, numba nor scipy.stats.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..inference._choices import MULTIPLIERS
from .base import BaseEstimator, Instance, Integral, Interval, OneOf, Seed

if TYPE_CHECKING:
    from ..results.cells import GroupTimeResult

INFERENCE_CONSTRAINTS = {
    "n_bootstrap": Integral(0),
    "multiplier": OneOf(None, *MULTIPLIERS),
    "alpha": Interval(0, 1, closed="neither"),
    "cband": OneOf(None, True, False),
    "random_state": Seed(),
    "outcome": Instance(str, allow_none=True),
    "lower_is_better": OneOf(True, False),
    "small_sample": OneOf(True, False),
}


class GroupTimeEstimator(BaseEstimator):
    """Shared pipeline: prepare the design, lay out cells, estimate, infer."""

    _needs_never_treated_default = True

    def _cells(self, design, params):  # pragma: no cover - interface
        raise NotImplementedError

    def _fit(self, panel, params) -> GroupTimeResult:
        import numpy as np

        from ..inference import kernels
        from ..inference.cell_inference import CellInference
        from ..results.cells import GroupTimeResult
        from ._covariates import covariate_cells
        from ..inference._prepared import prepare_design
        from ..inference.holes import HolesInfluence, hole_cells
        from ._holes import check_hole_cells, prepare_holes_design
        from ._holes_covariates import covariate_hole_cells

        name = type(self).__name__
        not_yet = params.get("control_group") == "not_yet_treated"
        use_covariates = "est_method" in params and bool(panel.covariates)
        if panel.has_holes:
            design = prepare_holes_design(
                panel, params["outcome"], need_never_treated=not not_yet,
                anticipation=params.get("anticipation", 0),
                lower_is_better=params["lower_is_better"], owner=name,
                use_covariates=use_covariates)
            cells = self._cells(design, params)
            att, coefficients, stats = hole_cells(design.holes, design.w, design.starts, cells,
                                                  design.times.size)
            check_hole_cells(design, cells, stats, name)
            if use_covariates:  # per-cell cross-section estimators, the generic route
                att, influence = covariate_hole_cells(design, cells, params["est_method"],
                                                      panel.covariates, name)
            else:
                influence = HolesInfluence.build(design.holes, design.w, design.starts, cells,
                                                 design.times.size, coefficients)
            var = influence.variance(design.clusters, design.n_clusters)
            var[cells.ref == 1] = np.nan
            return self._result(panel, params, name, design, cells, att, var, stats, influence)
        design = prepare_design(
            panel, params["outcome"], need_never_treated=not not_yet,
            anticipation=params.get("anticipation", 0), lower_is_better=params["lower_is_better"],
            owner=name, use_covariates=use_covariates,
        )
        cells = self._cells(design, params)
        # the bootstrap's multipliers are drawn on the other core while the cells are computed
        # (numba's first-call set-up, above all, runs on one)
        multipliers = None if use_covariates else CellInference.start_multipliers(
            design, n_bootstrap=params["n_bootstrap"], multiplier=params["multiplier"],
            random_state=params["random_state"], small_sample=params["small_sample"])
        try:
            clusters = (design.clusters if design.clusters is not None
                        else np.zeros(1, dtype=np.int64))
            att, var, mu1, mu0, w1, w0 = kernels.cell_statistics(
                design.y, design.w, design.starts, *cells.kernel_args(), clusters,
                design.n_clusters)
            stats = {"mu1": mu1, "mu0": mu0, "w1": w1, "w0": w0}
            influence = None
            if use_covariates:  # the per-cell path and the generic inference route
                att, influence = covariate_cells(design, cells, params["est_method"],
                                                 panel.covariates, name)
                var = influence.variance(design.clusters, design.n_clusters)
                var[cells.ref == 1] = np.nan
            return self._result(panel, params, name, design, cells, att, var, stats, influence,
                                multipliers)
        finally:
            if multipliers is not None:
                multipliers.close()

    def _result(self, panel, params, name, design, cells, att, var, stats, influence,
                multipliers=None):
        from ..inference.cell_inference import CellInference
        from ..results.cells import GroupTimeResult

        inference = CellInference.draw(
            design, cells, stats, influence, alpha=params["alpha"], cband=params["cband"],
            n_bootstrap=params["n_bootstrap"], multiplier=params["multiplier"],
            random_state=params["random_state"], small_sample=params["small_sample"],
            variance=var, owner=name, multipliers=multipliers)
        analytic, band = inference.cell_band(var)
        return GroupTimeResult(
            estimator=name, params=params, outcome=panel.resolve_outcome(params["outcome"]),
            lower_is_better=params["lower_is_better"], inference=inference, estimates=att,
            std_errors=band.std_errors, analytic_std_errors=analytic,
            critical_value=band.critical_value, band=band.kind,
            cell_critical_values=band.cell_critical_values,
        )
