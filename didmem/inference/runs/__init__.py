"""Several training runs: the pooled band over runs (the one band that is not the shared one), the
within-instance comparison as a cell influence, and their efficient combination.

Modules: ``combined``, ``pooled``, ``within``.
"""
