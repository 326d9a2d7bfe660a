"""The multiplier-bootstrap choices, in a module that imports nothing (read by the estimators'
declarations without loading the bootstrap's numba kernels)."""

MULTIPLIERS = ("rademacher", "mammen", "normal")
"""Multiplier distributions of the bootstrap (:mod:`didmem.inference.bootstrap`)."""
PRETREND_METHODS = ("event", "max_t", "wald")
"""Pre-tests of parallel trends (:mod:`didmem.inference.pretrend.cells`)."""
DEFAULT_PRETREND = "event"
EST_METHODS = ("dr", "ipw", "reg")
"""R did's ``est_method`` choices (:mod:`didmem.inference.covariates.cells`)."""

RUN_TRENDS = ("never_treated", "none")
"""How the within-instance comparison across runs removes a run's shift at a checkpoint
(:func:`didmem.inference.runs.within.within_cells`)."""
