"""Per-cohort moments (sums and cross-products of outcome paths) and the cells, influence and
Gaussian draws computed from them alone.

Modules: ``cells``, ``cohort``.
"""
