"""The fitting pipeline shared by the group-time estimators (DiD and difference)."""

from __future__ import annotations

import numpy as np

from ..inference import kernels
from ..inference.bands import analytic_se, bootstrap_se, normal_quantile, simultaneous_band
from ..inference.bootstrap import bootstrap_cells, bootstrap_influence
from ..inference.small_sample import normal_level, small_sample_cells, t_critical_values
from ..results import GroupTimeResult
from ._covariates import covariate_cells
from ._design import prepare_design
from .base import BaseEstimator, Instance, Integral, Interval, OneOf

INFERENCE_PARAMETERS = {
    "n_bootstrap": (1000, Integral(0)),
    "multiplier": (None, OneOf(None, "rademacher", "mammen", "normal")),
    "alpha": (0.05, Interval(0, 1, closed="neither")),
    "cband": (True, OneOf(True, False)),
    "random_state": (None, Instance(int, np.random.Generator, allow_none=True,
                                    description="None, an int or a numpy Generator")),
    "outcome": (None, Instance(str, allow_none=True)),
    "lower_is_better": (False, OneOf(True, False)),
    "small_sample": (True, OneOf(True, False)),
}


class GroupTimeEstimator(BaseEstimator):
    """Shared pipeline: prepare the design, lay out cells, estimate, infer."""

    _needs_never_treated_default = True

    def _cells(self, design, params):  # pragma: no cover - interface
        raise NotImplementedError

    def _fit(self, panel, params) -> GroupTimeResult:
        name = type(self).__name__
        not_yet = params.get("control_group") == "not_yet_treated"
        use_covariates = "est_method" in params and bool(panel.covariates)
        design = prepare_design(
            panel, params["outcome"], need_never_treated=not not_yet,
            anticipation=params.get("anticipation", 0), lower_is_better=params["lower_is_better"],
            owner=name, use_covariates=use_covariates,
        )
        cells = self._cells(design, params)
        clusters = design.clusters if design.clusters is not None else np.zeros(1, dtype=np.int64)
        att, var, mu1, mu0, w1, w0 = kernels.cell_statistics(
            design.y, design.w, design.starts, *cells.kernel_args(), clusters, design.n_clusters
        )
        stats = {"mu1": mu1, "mu0": mu0, "w1": w1, "w0": w0}
        influence = None
        if use_covariates:  # the per-cell path and the generic inference route
            att, influence = covariate_cells(design, cells, params["est_method"],
                                             panel.covariates, name)
            var = influence.variance(design.clusters, design.n_clusters)
            var[cells.ref == 1] = np.nan
        analytic = analytic_se(var)
        se = analytic
        correction = None
        if params["small_sample"]:  # Welch variances and df (didmem.inference.small_sample)
            correction = small_sample_cells(design, cells, stats, var, influence)
            se = np.where(np.isnan(analytic), np.nan, analytic_se(correction.variance))
        alpha = params["alpha"]
        crit, band, boot = normal_quantile(1 - alpha / 2), "pointwise", None
        if params["n_bootstrap"] > 0:
            rng = np.random.default_rng(params["random_state"])
            default = "normal" if correction is not None else "rademacher"
            multiplier = params["multiplier"] or default
            if influence is None:
                boot = bootstrap_cells(design, cells, stats, n_draws=params["n_bootstrap"],
                                       multiplier=multiplier, rng=rng)
            else:
                boot = bootstrap_influence(design, influence, n_draws=params["n_bootstrap"],
                                           multiplier=multiplier, rng=rng)
            scale = design.n_units / np.sqrt(design.n_clusters or design.n_units)
            # R: IQR standard errors; corrected: the draws only give the cells' dependence
            boot_se = bootstrap_se(boot.cells, scale) if correction is None else analytic
            if correction is None:
                se = np.where(np.isnan(analytic), np.nan, boot_se)
            if params["cband"] and design.times.size > 2:
                crit, band = simultaneous_band(boot.cells, boot_se, alpha, scale,
                                               at_least_normal=False)
        cell_crit = None
        if correction is not None:  # t quantiles at the band's pointwise level
            cell_crit = t_critical_values(normal_level(crit), correction.df)
            crit = float(np.nanmax(cell_crit)) if np.isfinite(cell_crit).any() else crit
        return GroupTimeResult(
            estimator=name, params=params, outcome=panel.resolve_outcome(params["outcome"]),
            lower_is_better=params["lower_is_better"], design=design, cells=cells, stats=stats,
            estimates=att, std_errors=se, analytic_std_errors=analytic, critical_value=float(crit),
            band=band, alpha=alpha, bootstrap=boot, influence=influence,
            small_sample=correction, cell_critical_values=cell_crit,
        )
