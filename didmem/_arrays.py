"""Read-only arrays: the one helper that freezes the arrays of panels, inference and results."""

from __future__ import annotations

import numpy as np

__all__ = ["readonly"]


def readonly(array, *, copy: bool = True) -> np.ndarray:
    """A C-contiguous array that cannot be written to.

    With ``copy`` (the default) the caller's array is left writable and untouched; without
    it an array that is already C-contiguous is frozen in place (for arrays the caller has
    just built and owns alone, such as the panel's dense views).
    """
    out = np.array(array, copy=True, order="C") if copy else np.ascontiguousarray(array)
    out.flags.writeable = False
    return out
