"""Helpers that format error and warning messages the same way everywhere."""

from __future__ import annotations

import numpy as np

MAX_LISTED = 5


def python_scalar(value):
    """A numpy scalar as the Python scalar it holds (``np.int64(3)`` -> ``3``); anything else
    as it is, so that messages and keys show ``3``, not ``np.int64(3)``."""
    return value.item() if isinstance(value, np.generic) else value


def listing(values, limit: int = MAX_LISTED, plain: bool = False) -> str:
    """Render the first ``limit`` values, saying how many more there are.

    Values are shown with ``repr`` (numpy scalars as Python scalars) unless ``plain``.
    """
    values = [python_scalar(v) for v in values]
    shown = ", ".join(str(v) if plain else repr(v) for v in values[:limit])
    more = len(values) - limit
    return shown + (f" and {more} more" if more > 0 else "")
