"""Confidence intervals by inverting a test over a grid of the target."""

from __future__ import annotations

import numpy as np


class GridInversion:
    """Interval and coverage of zero from a test inverted over a grid of ``theta``.

    Subclasses provide ``accepts(m, thetas)`` and ``grid(m)``.
    """

    grid_points: int

    def interval(self, m, thetas=None) -> tuple[float, float]:
        """``(lower, upper)``: the smallest and largest accepted grid points (NaN if none).

        The default grid is widened (doubled about its centre) while an end point is accepted.
        """
        fixed = thetas is not None
        thetas = self.grid(m) if thetas is None else np.asarray(thetas, float)
        for _ in range(6):
            ends = self.accepted_ends(m, thetas)
            if ends is None:
                return float("nan"), float("nan")
            if fixed or not (ends[0] == 0 or ends[1] == thetas.size - 1):
                break
            mid, half = 0.5 * (thetas[0] + thetas[-1]), thetas[-1] - thetas[0]
            thetas = np.linspace(mid - half, mid + half, self.grid_points)
        return float(thetas[ends[0]]), float(thetas[ends[1]])

    def accepted_ends(self, m, thetas) -> tuple[int, int] | None:
        """Indices of the first and the last accepted ``theta`` (``None`` when none is): all
        that :meth:`interval` reads of the test's decisions."""
        accepted = np.flatnonzero(self.accepts(m, thetas))
        return (int(accepted[0]), int(accepted[-1])) if accepted.size else None

    def covers_zero(self, m) -> bool:
        """Is ``theta = 0`` accepted? (no grid needed)."""
        return bool(self.accepts(m, [0.0])[0])
