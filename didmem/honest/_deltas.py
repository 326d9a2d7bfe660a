"""Restriction sets on the violation of parallel trends (Rambachan & Roth 2023)."""

from __future__ import annotations

import numpy as np


def second_difference_map(n_pre: int, n_post: int) -> tuple[np.ndarray, np.ndarray]:
    """Write the violation path as a linear trend plus second differences.

    The full path ``f`` runs over event times ``-n_pre-1, ..., n_post-1`` with ``f = 0`` at the
    reference period ``-1``. With ``d = D f`` its second differences and ``s`` its slope
    ``f[0] - f[-1]`` at the reference, ``f = s * t + K d`` with ``t`` the event time
    relative to the reference. Returns ``t`` and ``K`` with the reference row removed
    (``(n_pre + n_post) x (n_pre + n_post - 1)``), in the order of the estimates.
    """
    n = n_pre + 1 + n_post
    ref = n_pre
    d = np.zeros((n - 2, n))
    for i in range(n - 2):
        d[i, i:i + 3] = (1.0, -2.0, 1.0)
    rows = np.vstack([d, np.eye(n)[ref], np.eye(n)[ref + 1] - np.eye(n)[ref]])
    k = np.linalg.solve(rows, np.eye(n)[:, : n - 2]) if n > 2 else np.zeros((n, 0))
    t = np.arange(n, dtype=float) - ref
    keep = np.arange(n) != ref
    return t[keep], k[keep]
