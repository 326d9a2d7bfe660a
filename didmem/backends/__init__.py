"""Outcome backends: turn instances and checkpoints into a long table of metrics.

Every backend implements :class:`OutcomeBackend`. :class:`FrameBackend` reads precomputed
tables (including the paper's published layout), :class:`CallableBackend` wraps a user
function, and :class:`TransformersBackend` scores causal-LM checkpoints with torch and
transformers, which are imported only when it is used (``pip install 'didmem[lm]'``).
The suites' training orders (which instance was trained when) are read by
:mod:`didmem.orders`; backends only score.
"""

from .._lazy import attach

_WHERE = {
    "OutcomeBackend": "base",
    "BackendSpec": "_spec",
    "FrameBackend": "frame",
    "CallableBackend": "frame",
    "TransformersBackend": "transformers_backend",
    "METRICS": "transformers_backend",
    "PAPER_METRICS": "frame",
    "Instances": "_instances",
    "InstanceBatch": "_instances",
    "WorkItem": "_parts",
    "PartStore": "_parts",
    "InstanceError": "_instances",
    "CheckpointError": "_instances",
    "DeviceMemoryError": "_instances",
    "instance_covariates": "covariates",
    "add_instance_covariates": "covariates",
}
"""Public name -> the module of this package that defines it (imported on first use)."""

__all__ = list(_WHERE)

__getattr__, __dir__ = attach(__name__, _WHERE)
