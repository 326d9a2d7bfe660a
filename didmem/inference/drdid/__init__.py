"""Doubly robust DiD (Sant'Anna & Zhao 2020): the panel and repeated cross-section estimators and
their numba kernel.

Modules: ``cross_sections``, ``kernel``, ``panel``.
"""
