"""The fitting pipeline shared by the group-time estimators (DiD and difference)."""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import InferenceWarning
from ..inference import kernels
from ..inference.bands import analytic_se, bootstrap_se, normal_quantile, simultaneous_band
from ..inference.bootstrap import bootstrap_cells, bootstrap_influence
from ..results import GroupTimeResult
from ._covariates import covariate_cells
from ._design import prepare_design
from .base import BaseEstimator, Instance, Integral, Interval, OneOf, Seed

INFERENCE_PARAMETERS = {
    "n_bootstrap": (1000, Integral(0)),
    "multiplier": ("rademacher", OneOf("rademacher", "mammen")),
    "alpha": (0.05, Interval(0, 1, closed="neither")),
    "cband": (None, OneOf(None, True, False)),
    "random_state": (None, Seed()),
    "outcome": (None, Instance(str, allow_none=True)),
    "lower_is_better": (False, OneOf(True, False)),
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
        alpha = params["alpha"]
        crit, band, boot = normal_quantile(1 - alpha / 2), "pointwise", None
        if params["n_bootstrap"] > 0:
            rng = np.random.default_rng(params["random_state"])
            if influence is None:
                boot = bootstrap_cells(design, cells, stats, n_draws=params["n_bootstrap"],
                                       multiplier=params["multiplier"], rng=rng)
            else:
                boot = bootstrap_influence(design, influence, n_draws=params["n_bootstrap"],
                                           multiplier=params["multiplier"], rng=rng)
            scale = design.n_units / np.sqrt(design.n_clusters or design.n_units)
            boot_se = bootstrap_se(boot.cells, scale)
            se = np.where(np.isnan(analytic), np.nan, boot_se)
            if params["cband"] is not False and design.times.size > 2:
                crit, band = simultaneous_band(boot.cells, boot_se, alpha, scale,
                                               at_least_normal=False)
            elif params["cband"]:
                warnings.warn(
                    f"{name}: cband=True, but the panel has only two periods (after "
                    "pre-processing), so there is no band over periods to make simultaneous: "
                    "the intervals are pointwise, as in R did.", InferenceWarning, stacklevel=3)
        elif params["cband"]:
            warnings.warn(
                f"{name}: cband=True needs bootstrap draws for the simultaneous band, but "
                "n_bootstrap=0: the intervals are pointwise. Pass n_bootstrap > 0, or leave "
                "cband=None.", InferenceWarning, stacklevel=3)
        return GroupTimeResult(
            estimator=name, params=params, outcome=panel.resolve_outcome(params["outcome"]),
            lower_is_better=params["lower_is_better"], design=design, cells=cells, stats=stats,
            estimates=att, std_errors=se, analytic_std_errors=analytic, critical_value=float(crit),
            band=band, alpha=alpha, bootstrap=boot, influence=influence,
        )
