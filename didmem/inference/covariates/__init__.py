"""Group-time cells with covariates (R ``did``'s ``est_method``), on balanced panels and on panels
with holes.

Modules: ``cells``, ``holes``.
"""
