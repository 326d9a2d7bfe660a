"""didmem: causal memorisation profiles of language models.

The estimation core (panels, estimators, inference, results) needs only numpy, scipy,
pandas and numba; language-model scoring lives in :mod:`didmem.backends` and loads torch and
transformers lazily.
"""

from ._version import __version__
from .errors import (
    DataDroppedWarning,
    DidmemError,
    DidmemWarning,
    CheckpointError,
    EstimationError,
    InstanceError,
    InferenceWarning,
    OverlapWarning,
    MissingDependencyError,
    PanelError,
    ParameterError,
    SmallCohortWarning,
)
from .panel import Panel, cohort_from_sequence_index
from .estimators import DiDEstimator, DifferenceEstimator
from .results import AggregateResult, Estimate, GroupTimeResult, Pretest
from . import datasets, montecarlo

__all__ = [
    "__version__",
    "Panel",
    "DiDEstimator",
    "DifferenceEstimator",
    "GroupTimeResult",
    "AggregateResult",
    "Estimate",
    "Pretest",
    "datasets",
    "montecarlo",
    "cohort_from_sequence_index",
    "DidmemError",
    "PanelError",
    "ParameterError",
    "EstimationError",
    "InstanceError",
    "CheckpointError",
    "MissingDependencyError",
    "DidmemWarning",
    "DataDroppedWarning",
    "SmallCohortWarning",
    "InferenceWarning",
    "OverlapWarning",
]
