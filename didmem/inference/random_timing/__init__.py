"""Random timing (Roth & Sant'Anna 2023): the design, the efficient estimator's weights and fit,
the Fisher randomisation test and the balance test.

Modules: ``balance``, ``design``, ``fisher``, ``fit``, ``permutation``, ``weights``.
"""
