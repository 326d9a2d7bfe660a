"""Outcome backends: turn instances and checkpoints into a long table of metrics.

Every backend implements :class:`OutcomeBackend`. :class:`FrameBackend` reads precomputed
tables (including the paper's published layout), :class:`CallableBackend` wraps a user
function, and :class:`TransformersBackend` scores causal-LM checkpoints with torch and
transformers, which are imported only when it is used (``pip install 'didmem[lm]'``).
:mod:`didmem.backends.pythia` and :mod:`didmem.backends.indexed` read and sample the Pythia
suite's training data.
"""

from ._instances import (CheckpointError, DeviceMemoryError, InstanceBatch, InstanceError,
                         Instances)
from ._parts import PartStore, WorkItem
from ._spec import BackendSpec
from .base import OutcomeBackend
from .covariates import add_instance_covariates, instance_covariates
from .frame import PAPER_METRICS, CallableBackend, FrameBackend
from .indexed import MMapIndexedDataset, write_indexed_dataset
from .transformers_backend import METRICS, TransformersBackend

__all__ = [
    "OutcomeBackend",
    "BackendSpec",
    "FrameBackend",
    "CallableBackend",
    "TransformersBackend",
    "METRICS",
    "PAPER_METRICS",
    "Instances",
    "InstanceBatch",
    "WorkItem",
    "PartStore",
    "InstanceError",
    "CheckpointError",
    "DeviceMemoryError",
    "MMapIndexedDataset",
    "write_indexed_dataset",
    "instance_covariates",
    "add_instance_covariates",
]
