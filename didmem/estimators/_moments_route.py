"""The moments route of the group-time fit: a result from per-cohort moments alone.

On a balanced panel without covariates, :class:`~didmem.DiDEstimator`'s cells, standard errors (analytic and
Welch's), pre-tests and aggregations follow exactly from per-cohort moments of the outcome
paths (:mod:`didmem.inference.moments`), and so does the multiplier bootstrap with Gaussian
multipliers, drawn from its exact distribution given the data. This module fits from moments
(of a panel in memory, or of a parquet folder read in bounded memory, locally or on Ray) and
returns the same :class:`~didmem.results.cells.GroupTimeResult` as the in-memory route.

What is exact this way: estimates, analytic and Welch standard errors, Welch degrees of
freedom, the Wald pre-test, every aggregation's estimate and analytic standard error (to
rounding, 1e-9); the band's critical value is the bootstrap's with Gaussian multipliers, the
same distribution as per-unit Gaussian multipliers (so equal within Monte Carlo error). Not
by moments: covariates, clusters, panels with holes, repeated exposures, and Rademacher or
Mammen multipliers (they need each unit).
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError

__all__ = ["fit_moments", "fit_dataset", "fit_patterns", "moments_applies"]


def moments_applies(params) -> str | None:
    """Why the moments route cannot serve these (validated) parameters, or None."""
    from ..inference.bootstrap import resolve_multiplier

    if params.get("exposure", 1) > 1:
        return "repeated exposures (exposure > 1) need each unit's history"
    if params["n_bootstrap"] and resolve_multiplier(params["multiplier"],
                                                    params["small_sample"]) != "normal":
        return ("the multiplier bootstrap from moments has Gaussian multipliers only "
                "(multiplier='normal', the default with small_sample=True)")
    return None


def fit_moments(estimator, moments, *, outcome: str, never_treated_code=None):
    """The result of a :class:`~didmem.DiDEstimator` from moments.

    Parameters
    ----------
    estimator : GroupTimeEstimator
        Its parameters are validated here, as :meth:`fit` does.
    moments : didmem.inference.moments.CohortMoments
    outcome : str
        The outcome's name (for the result's labels).
    never_treated_code : float, optional
        The panel's never-treated code (only for the hint of an error message).
    """
    from ..inference.cell_inference import CellInference, InferenceSettings
    from ..inference.moment_cells import MomentsInfluence, prepare_moments
    from ..results.cells import GroupTimeResult

    params = estimator._validated_params()
    name = type(estimator).__name__
    why = moments_applies(params)
    if why is not None:
        raise ParameterError(f"{name}: this fit cannot come from moments: {why}.")
    not_yet = params.get("control_group") == "not_yet_treated"
    prepared = prepare_moments(moments, need_never_treated=not not_yet,
                             anticipation=params.get("anticipation", 0),
                             lower_is_better=params["lower_is_better"], owner=name,
                             never_treated_code=never_treated_code)
    cells = estimator._cells(prepared, params, not_yet)
    influence = MomentsInfluence.build(prepared, cells)
    inference = CellInference.draw(influence, InferenceSettings.from_params(params, name))
    return GroupTimeResult.from_inference(inference, estimator=name, params=params,
                                          outcome=outcome,
                                          lower_is_better=params["lower_is_better"])


def fit_dataset(estimator, dataset, *, map_items=None):
    """The result of ``estimator`` on a parquet dataset read as unit paths
    (:class:`~didmem.panel.scan.ParquetPaths`), from its moments; ``map_items`` runs the
    work items (:func:`didmem.runners.ray_tasks.ray_map` on Ray; without it the dataset is
    read here, in one pass where its units allow, see
    :func:`~didmem.inference.moments.dataset_moments`)."""
    from ..inference.moments import dataset_moments

    why = moments_applies(estimator._validated_params())
    if why is not None:  # refused before the folder is read
        raise ParameterError(f"{type(estimator).__name__}: a parquet folder is fitted from "
                             f"moments, which cannot serve this fit: {why}.")
    moments = dataset_moments(dataset, map_items=map_items)
    return fit_moments(estimator, moments, outcome=dataset.outcome,
                       never_treated_code=dataset.never_treated)


def fit_patterns(estimator, panel):
    """The result of ``estimator`` on a binary panel given by the counts of its paths
    (:class:`~didmem.panel.patterns.PatternPanel`), from their moments."""
    from ..inference.moments import pattern_moments

    moments = pattern_moments(panel.times, panel.cohorts, panel.patterns, panel.counts)
    return fit_moments(estimator, moments, outcome=panel.outcome)


def panel_moments(panel, outcome: str | None = None):
    """The moments of a balanced panel in memory without covariates or clusters."""
    from ..inference.moments import CohortMoments

    if panel.has_holes or panel.covariates or panel.clusters is not None:
        raise ParameterError(
            "Moments stand for a balanced panel without covariates or clusters; this panel "
            + ("has holes" if panel.has_holes else "has covariates" if panel.covariates
               else "has clusters") + ": fit it in memory.")
    name = panel.resolve_outcome(outcome)
    weights = None if not getattr(panel, "has_weights", False) else np.asarray(panel.weights)
    return CohortMoments.from_paths(panel.times, panel.cohorts, panel.outcome_matrix(name),
                                    weights)
