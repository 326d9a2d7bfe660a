"""Repeated exposure: the cells of instances trained more than once and their numba kernel.

Modules: ``cells``, ``kernel``.
"""
