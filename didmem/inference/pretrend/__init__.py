"""Pre-trend tests: the max-t and Wald statistics, their cells and result, and the structured Wald
test of cohort blocks.

Modules: ``cells``, ``result``, ``statistics``, ``wald``.
"""
