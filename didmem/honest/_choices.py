"""The sensitivity analysis's choices, in a module that imports nothing (read by the
declaration of :func:`didmem.sensitivity` and by the command line without loading scipy)."""

RESTRICTIONS = ("smoothness", "relative_magnitudes")
"""Restrictions on the violations: ``Delta^SD(M)`` and ``Delta^RM(Mbar)``."""
METHODS = ("C-LF", "conditional")
"""The ARP test's critical value: hybrid (conditional least favourable) or conditional."""
BIAS = ("positive", "negative")
"""Signs a post-treatment violation can be restricted to (``Delta^SDPB``, ``Delta^RMB``)."""
MONOTONICITY = ("increasing", "decreasing")
"""Directions a violation can be restricted to from the reference period on."""
