"""The one fit driver of the group-time estimators (DiD, difference, and any estimator whose
cells are differences of weighted means of the outcome paths).

:meth:`GroupTimeEstimator._fit` reads every form of the data (a :class:`~didmem.Panel`, a
parquet folder read lazily by :meth:`~didmem.Panel.scan`, a binary panel's pattern counts,
per-cohort :class:`~didmem.inference.moments.cohort.CohortMoments`), prepares it, lays out the
subclass's cells (:meth:`GroupTimeEstimator._cells`), asks
:mod:`didmem.inference.routes` (the one place that chooses a route) for the cells'
influence, draws the inference (:meth:`~didmem.inference.cell_inference.CellInference.draw`,
the one bootstrap loop) and builds the result
(:meth:`~didmem.results.cells.GroupTimeResult.from_inference`).

The design, the kernels and the inference are imported when a fit runs, so that reading an
estimator's declarations (its constraints and defaults, as the command line does) loads
neither pandas, numba nor scipy.stats.
"""

from __future__ import annotations

import dataclasses

from typing import TYPE_CHECKING

from ..errors import ParameterError
from ..inference.choices import MULTIPLIERS
from ..panel import Panel
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


def _lazy_forms() -> tuple[type, ...]:
    """The forms of the data a group-time fit reads from their moments (imported when asked:
    the folder's reader loads numba and pyarrow)."""
    from ..inference.moments.cohort import CohortMoments
    from ..panel.patterns import PatternPanel
    from ..panel.scan import ParquetPaths

    return ParquetPaths, PatternPanel, CohortMoments


class GroupTimeEstimator(BaseEstimator):
    """The one fit driver: read, prepare, lay out cells, route, infer, build the result.

    What is estimated is the subclass's (its cells, :meth:`_cells`); how is
    :mod:`didmem.inference`'s: R's pre-processing (:func:`~didmem.inference.prepared.
    prepare_panel`, or :func:`~didmem.inference.moments.cells.prepare_moments` on moments),
    the route's influence functions (:func:`~didmem.inference.routes.cell_influence`), their
    inference (:class:`~didmem.inference.cell_inference.CellInference`), and one builder of
    the result (:meth:`~didmem.results.cells.GroupTimeResult.from_inference`).

    :meth:`fit` takes a :class:`~didmem.Panel`, a parquet file or folder read lazily
    (:meth:`didmem.Panel.scan`: read in bounded memory, locally or on Ray, and fitted from
    per-cohort moments: balanced, one exposure, Gaussian multipliers; see the *Inference*
    page, "Sufficient statistics"), a binary panel given by its patterns' counts
    (:class:`~didmem.panel.patterns.PatternPanel`, such as :func:`didmem.orders.read_memorised`
    reads) or per-cohort moments (:class:`~didmem.inference.moments.cohort.CohortMoments`).
    """

    _input_hint = ("Build one with didmem.Panel(df, unit=..., time=..., cohort=..., "
                   "outcome=...), or read a parquet folder with didmem.Panel.scan(...).")

    def _cells(self, prepared, params, not_yet: bool):  # pragma: no cover - interface
        """The cell layout (:class:`~didmem.inference.prepared.Cells`) on ``prepared``."""
        raise NotImplementedError

    def _accepts(self, data) -> bool:
        return isinstance(data, Panel) or isinstance(data, _lazy_forms())

    def _fit(self, data, params, *, outcome: str | None = None,
             never_treated_code: float | None = None) -> GroupTimeResult:
        """The fit of ``data`` with validated ``params``; ``outcome`` labels a fit from
        :class:`~didmem.inference.moments.cohort.CohortMoments` (default: the ``outcome``
        parameter, else ``"outcome"``) and ``never_treated_code`` is their panel's
        never-treated code (for the hint of an error message only)."""
        from ..inference.prepared import prepare_panel
        from ..inference.cell_inference import CellInference, InferenceSettings
        from ..inference.routes import cell_influence, data_route, prestarts_multipliers
        from ..results.cells import GroupTimeResult

        name = type(self).__name__
        not_yet = params.get("control_group") == "not_yet_treated"
        settings = InferenceSettings.from_params(params, name)
        route = data_route(data, params)
        est_method, covariates, history, histories = None, (), None, None
        if route == "moments":
            prepared, outcome = self._prepare_moments(data, params, not_yet, outcome,
                                                      never_treated_code)
        elif route == "exposure":
            from ._exposure import prepare_exposure

            prepared, history, histories = prepare_exposure(data, params, name, not_yet=not_yet)
            outcome = data.resolve_outcome(params["outcome"])
        else:
            covariates = data.covariates
            est_method = params.get("est_method") if covariates else None
            prepared = prepare_panel(
                data, params["outcome"], need_never_treated=not not_yet,
                anticipation=params.get("anticipation", 0),
                lower_is_better=params["lower_is_better"], owner=name,
                use_covariates=est_method is not None)
            outcome = data.resolve_outcome(params["outcome"])
        cells = self._cells(prepared, params, not_yet)
        # multipliers drawn unit by unit are drawn on the other core while the cells are
        # computed (see routes.prestarts_multipliers)
        multipliers = (CellInference.start_multipliers(prepared, settings)
                       if prestarts_multipliers(prepared, est_method, settings, history=history)
                       else None)
        try:
            influence = cell_influence(prepared, cells, est_method=est_method,
                                       covariate_names=covariates, owner=name, history=history)
            inference = CellInference.draw(influence, settings, multipliers)
        finally:
            if multipliers is not None:
                multipliers.close()
        if histories is not None:
            from ._exposure import exposure_result

            return exposure_result(inference, histories, owner=name, params=params,
                                   outcome=outcome)
        return GroupTimeResult.from_inference(inference, estimator=name, params=params,
                                              outcome=outcome,
                                              lower_is_better=params["lower_is_better"])

    def _prepare_moments(self, data, params, not_yet: bool, outcome, never_treated_code):
        """The moments route's design of ``data`` (a scanned folder, pattern counts or
        moments; a folder is read here, after the parameters are known to fit) and the
        outcome's name."""
        from ..inference.moments.cells import prepare_moments
        from ..inference.moments.cohort import CohortMoments, dataset_moments, pattern_moments
        from ..inference.routes import moments_refusal
        from ..panel.patterns import PatternPanel

        name = type(self).__name__
        why = moments_refusal(params)
        if why is not None:  # refused before a folder is read
            what = ("a parquet folder is fitted from moments, which cannot serve this fit"
                    if not isinstance(data, (PatternPanel, CohortMoments))
                    else "this fit cannot come from moments")
            raise ParameterError(f"{name}: {what}: {why}.")
        if isinstance(data, CohortMoments):
            moments = data
            outcome = outcome or params["outcome"] or "outcome"
            source = "per-cohort moments given to the fit"
        elif isinstance(data, PatternPanel):
            moments = pattern_moments(data.times, data.cohorts, data.patterns, data.counts)
            outcome = data.outcome
            source = "pattern counts (a binary panel), fitted from their moments"
        else:
            moments = dataset_moments(data, map_items=data.map_items)
            outcome, never_treated_code = data.outcome, data.never_treated
            source = (f"the parquet folder {str(data.path)!r}, "
                      + ("read here" if data.map_items is None else "read as tasks on Ray")
                      + " in bounded memory and fitted from its moments")
        prepared = prepare_moments(moments, need_never_treated=not not_yet,
                                   anticipation=params.get("anticipation", 0),
                                   lower_is_better=params["lower_is_better"], owner=name,
                                   never_treated_code=never_treated_code)
        return dataclasses.replace(prepared, source=source), outcome
