"""Fits from per-cohort moments: thin names over the one group-time fit driver.

On a balanced panel without covariates, a group-time estimator's cells, standard errors
(analytic and Welch's), pre-tests and aggregations follow exactly from per-cohort moments of
the outcome paths (:mod:`didmem.inference.moments.cohort`), and so does the multiplier bootstrap
with Gaussian multipliers, drawn from its exact distribution given the data. ``estimator.fit``
takes moments, a parquet folder (:meth:`didmem.Panel.scan`) and pattern counts itself (the
moments route of :mod:`didmem.inference.routes`); the functions here name those fits for
scripts: the moments of a panel in memory (:func:`panel_moments`), and a fit from moments
with the outcome's name.

What is exact this way: estimates, analytic and Welch standard errors, Welch degrees of
freedom, the Wald pre-test, every aggregation's estimate and analytic standard error (to
rounding, 1e-9); the band's critical value is the bootstrap's with Gaussian multipliers, the
same distribution as per-unit Gaussian multipliers (so equal within Monte Carlo error). Not
by moments: covariates, clusters, panels with holes, repeated exposures, and Rademacher or
Mammen multipliers (they need each unit).
"""

from __future__ import annotations

import copy

import numpy as np

from ..errors import ParameterError

__all__ = ["fit_moments", "fit_dataset", "fit_patterns", "panel_moments"]


def fit_moments(estimator, moments, *, outcome: str, never_treated_code=None):
    """``estimator.fit(moments)`` with the outcome's name for the result's labels and the
    panel's never-treated code (only for the hint of an error message): the group-time fit
    driver (:meth:`~didmem.estimators._grouptime.GroupTimeEstimator._fit`) on
    :class:`~didmem.inference.moments.cohort.CohortMoments`."""
    return estimator._fit(moments, estimator._validated_params(), outcome=outcome,
                          never_treated_code=never_treated_code)


def fit_dataset(estimator, dataset, *, map_items=None):
    """``estimator.fit(dataset)`` on a parquet dataset read as unit paths
    (:class:`~didmem.panel.scan.ParquetPaths`), its work items run by ``map_items``
    (:func:`didmem.runners.ray_tasks.ray_map` on Ray) when given, instead of the dataset's
    own (``Panel.scan(..., map_items=...)``)."""
    if map_items is not None:
        dataset = copy.copy(dataset)
        dataset.map_items = map_items
    return estimator.fit(dataset)


def fit_patterns(estimator, panel):
    """``estimator.fit(panel)`` on a binary panel given by the counts of its paths
    (:class:`~didmem.panel.patterns.PatternPanel`)."""
    return estimator.fit(panel)


def panel_moments(panel, outcome: str | None = None):
    """The moments of a balanced panel in memory without covariates or clusters."""
    from ..inference.moments.cohort import CohortMoments

    if panel.has_holes or panel.covariates or panel.clusters is not None:
        raise ParameterError(
            "Moments stand for a balanced panel without covariates or clusters; this panel "
            + ("has holes" if panel.has_holes else "has covariates" if panel.covariates
               else "has clusters") + ": fit it in memory.")
    name = panel.resolve_outcome(outcome)
    weights = None if not getattr(panel, "has_weights", False) else np.asarray(panel.weights)
    return CohortMoments.from_paths(panel.times, panel.cohorts, panel.outcome_matrix(name),
                                    weights)
