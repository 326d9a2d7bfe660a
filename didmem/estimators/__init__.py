"""Estimators of memorisation, one per module, on the contract of :mod:`.base`.

Each estimator is imported from its module the first time it is used, so that reading an
estimator's declarations (the command line's options) does not load the others' dependencies.
"""

from .._lazy import attach

_WHERE = {
    "BaseEstimator": "base",
    "DiDEstimator": "did",
    "DifferenceEstimator": "difference",
    "ArchitecturalEstimator": "architectural",
    "ExtractableEstimator": "extractable",
    "MembershipInferenceEstimator": "membership",
    "InfluenceEstimator": "training_influence",
    "SubsetModels": "inputs",
    "TrainedModel": "inputs",
    "TWFEEstimator": "twfe",
    "RunsEstimator": "runs",
    "RandomTimingEstimator": "random_timing",
    "dose_response": "dose",
}
"""Public name -> the module of this package that defines it."""

__all__ = list(_WHERE)

__getattr__, __dir__ = attach(__name__, _WHERE)
