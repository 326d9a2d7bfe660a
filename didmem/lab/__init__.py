"""Memorisation lab: tiny single-pass language models with counterfactual twins.

:func:`run` generates a seeded corpus (a Zipfian Markov language with instance-specific
secrets, or the user's text), trains a small ``GPTNeoXForCausalLM`` once over it with a
recorded data order, trains a *twin* in which every analysed instance is replaced by a fresh
one, exact per-cohort runs (by default for every cohort) and optionally subset models, scores everything with
:class:`didmem.backends.TransformersBackend`, and writes the panel and the true memorisation
profile τ(g, c). :func:`replicate` repeats runs over seeds and scores estimators against the
truth with Monte Carlo errors. Importing this package does not import torch.
"""

from .._lazy import attach

_WHERE = {
    "run": "pipeline",
    "load": "pipeline",
    "LabResult": "pipeline",
    "replicate": "replication",
    "Replication": "replication",
    "LabConfig": "config",
    "demo_config": "config",
    "quick_config": "config",
    "DEFAULT_METRICS": "config",
    "LabDesign": "design",
    "build_design": "design",
    "run_design": "runs",
    "WordTokenizer": "tokenizer",
    "membership_comparison": "membership",
    "MIA_SCORES": "membership",
}
"""Public name -> the module of this package that defines it (imported on first use)."""

__all__ = list(_WHERE)

__getattr__, __dir__ = attach(__name__, _WHERE)
