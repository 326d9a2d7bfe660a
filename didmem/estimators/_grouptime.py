"""The fitting pipeline shared by the group-time estimators (DiD and difference).

The design, the kernels and the inference are imported when a fit runs, so that reading an
estimator's declarations (its constraints and defaults, as the command line does) loads
neither pandas, numba nor scipy.stats.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..inference._choices import MULTIPLIERS
from .base import Alpha, BaseEstimator, Instance, Integral, OneOf, Seed

if TYPE_CHECKING:
    from ..results.cells import GroupTimeResult

INFERENCE_CONSTRAINTS = {
    "n_bootstrap": Integral(0),
    "multiplier": OneOf(None, *MULTIPLIERS),
    "alpha": Alpha(),
    "cband": OneOf(None, True, False),
    "seed": Seed(),
    "outcome": Instance(str, allow_none=True),
    "lower_is_better": OneOf(True, False),
    "small_sample": OneOf(True, False),
}


class GroupTimeEstimator(BaseEstimator):
    """Shared pipeline: prepare the design, lay out cells, estimate, infer.

    What is estimated is the subclass's (its cells, :meth:`_cells`); how is
    :mod:`didmem.inference`'s: R's pre-processing (:func:`~didmem.inference._prepared.
    prepare_panel`), the route's influence functions (:func:`~didmem.inference.routes.
    cell_influence`), their inference (:class:`~didmem.inference.cell_inference.
    CellInference`), and one builder of the result (:meth:`~didmem.results.cells.
    GroupTimeResult.from_inference`).
    """

    def _cells(self, prepared, params, not_yet: bool):  # pragma: no cover - interface
        raise NotImplementedError

    def _fit(self, panel, params) -> GroupTimeResult:
        from ..inference._prepared import prepare_panel
        from ..inference.cell_inference import CellInference, InferenceSettings
        from ..inference.routes import cell_influence, uses_grouped_moments
        from ..results.cells import GroupTimeResult

        name = type(self).__name__
        not_yet = params.get("control_group") == "not_yet_treated"
        est_method = params.get("est_method") if panel.covariates else None
        settings = InferenceSettings.from_params(params, name)
        if params.get("exposure", 1) > 1:
            from ._exposure import fit_exposure

            return fit_exposure(panel, params, name, not_yet=not_yet, settings=settings)
        prepared = prepare_panel(
            panel, params["outcome"], need_never_treated=not not_yet,
            anticipation=params.get("anticipation", 0), lower_is_better=params["lower_is_better"],
            owner=name, use_covariates=est_method is not None)
        cells = self._cells(prepared, params, not_yet)
        # on the balanced route without covariates, multipliers drawn unit by unit
        # (Rademacher, Mammen, clusters) are drawn on the other core while the cells are
        # computed; Gaussian ones are drawn from the moments' law (no unit's weight)
        per_unit = settings.multiplier != "normal" or prepared.clusters is not None
        multipliers = (CellInference.start_multipliers(prepared, settings)
                       if uses_grouped_moments(prepared, est_method) and per_unit else None)
        try:
            influence = cell_influence(prepared, cells, est_method=est_method,
                                       covariate_names=panel.covariates, owner=name)
            inference = CellInference.draw(influence, settings, multipliers)
        finally:
            if multipliers is not None:
                multipliers.close()
        return GroupTimeResult.from_inference(
            inference, estimator=name, params=params,
            outcome=panel.resolve_outcome(params["outcome"]),
            lower_is_better=params["lower_is_better"])
