"""Helpers that format error and warning messages the same way everywhere."""

from __future__ import annotations

import numpy as np

MAX_LISTED = 5


def listing(values, limit: int = MAX_LISTED, plain: bool = False) -> str:
    """Render the first ``limit`` values, saying how many more there are.

    Values are shown with ``repr`` (numpy scalars as Python scalars) unless ``plain``.
    """
    values = [v.item() if isinstance(v, np.generic) else v for v in values]
    shown = ", ".join(str(v) if plain else repr(v) for v in values[:limit])
    more = len(values) - limit
    return shown + (f" and {more} more" if more > 0 else "")
