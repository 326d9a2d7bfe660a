"""Panels with holes and repeated cross-sections (R ``did``'s unbalanced estimator): the cells and
their influence, its numba kernels, and the Welch groups of the small-sample correction with the
dependence of their parts.

Modules: ``influence``, ``kernels``, ``welch``.
"""
