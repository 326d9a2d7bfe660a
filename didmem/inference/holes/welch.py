"""The small-sample (Welch) parts of the cells' variances on panels with holes and on
repeated cross-sections: which units estimate each part of a cell's variance, and how the
parts that share units depend on each other (issue 50).

:class:`HolesWelchGroups` is a mixin of
:class:`~didmem.inference.holes.influence.HolesInfluence`: it reads the influence's rows, weights,
per-block Gram matrices and the cells' coefficients, and gives
:meth:`~HolesWelchGroups.welch_groups` and :meth:`~HolesWelchGroups.welch_dependence`, which
:func:`~didmem.inference.small_sample.small_sample_correction` takes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["HolesWelchGroups"]


@njit(cache=True)
def _co_observed(unit_start, time, wy, w_unit, block, n_blocks, n_t):
    """Per block and pair of times ``(t, s)``: the units observed at both (``counts``) and,
    over those units, the sums ``(wy_t**2, wy_s**2, wy_t wy_s, wy_t w, wy_s w, w**2)``
    (``sums``, blocks x T x T x 6; only for ``t != s``)."""
    counts = np.zeros((n_blocks, n_t, n_t), dtype=np.int64)
    sums = np.zeros((n_blocks, n_t, n_t, 6))
    for i in range(unit_start.size - 1):
        j = block[i]
        wi = w_unit[i]
        for r in range(unit_start[i], unit_start[i + 1]):
            for q in range(unit_start[i], unit_start[i + 1]):
                a, b = time[r], time[q]
                counts[j, a, b] += 1
                if r != q:
                    o = sums[j, a, b]
                    o[0] += wy[r] * wy[r]
                    o[1] += wy[q] * wy[q]
                    o[2] += wy[r] * wy[q]
                    o[3] += wy[r] * wi
                    o[4] += wy[q] * wi
                    o[5] += wi * wi
    return counts, sums


class HolesWelchGroups:
    """The Welch groups of a :class:`~didmem.inference.holes.influence.HolesInfluence` (a mixin: it
    holds no state of its own)."""

    def welch_parts(self):
        """Cross-sections only: the plug-in variance of each cell's four means (cohort and
        controls, at ``t`` and at ``b``: independent rows, so no covariance between them)
        and their row counts, both 4 x cells; None on a panel with holes."""
        if self.rows.size != self.w.size:
            return None
        parts = np.zeros((4, self.n_cells))
        own = self.k >= self.cs
        for c in np.flatnonzero(self.ref == 0):
            for half, cols in enumerate(((0, 2), (1, 3))):
                idx = self.idx[c, list(cols)]
                t_coef = self.tau[c, list(cols)]
                k_coef = self.kappa[c, list(cols)]
                g_own = self.gram[self.k[c]][np.ix_(idx, idx)]
                g_ctrl = self.gram_suffix[self.cs[c]][np.ix_(idx, idx)] - (g_own if own[c]
                                                                           else 0.0)
                parts[half, c] = t_coef @ g_own @ t_coef
                parts[2 + half, c] = k_coef @ g_ctrl @ k_coef
        n_t = self.n_times
        flat = self._block()[self.rows.unit] * n_t + self.rows.time
        counts = np.bincount(flat, minlength=self.n_blocks * n_t).reshape(self.n_blocks, n_t)
        suffix = np.zeros((self.n_blocks + 1, n_t))
        suffix[:-1] = np.cumsum(counts[::-1], axis=0)[::-1]
        n = np.zeros((4, self.n_cells))
        for half in (0, 1):
            when = self.idx[:, half]
            n[half] = counts[self.k, when]
            n[2 + half] = suffix[self.cs, when] - np.where(own, n[half], 0.0)
        has_base = self.tau[:, 1] != 0
        n[1][~has_base] = 0.0
        n[3][~has_base] = 0.0
        return parts, n

    def welch_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """The independent parts of every cell's variance and the units that estimate each.

        Cross-sections: the four means (cohort and controls, at ``t`` and at ``b``;
        :meth:`welch_parts`). A panel with holes: for the cohort and for the controls,
        three parts (:meth:`observation_welch_groups`, issue 50).
        """
        split = self.welch_parts()
        if split is not None:
            return split
        return self.observation_welch_groups()

    def observation_welch_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Welch parts of a panel with holes: per side (cohort, controls) of each cell, the
        units observed at both periods, at ``t`` only and at ``b`` only, each part paired
        with the count of units whose deviations estimate it (groups x cells, six groups).

        A side's difference of means ``m_t - m_b`` is, unit by unit, a sum over the three
        independent groups ``B`` (both), ``T`` (``t`` only) and ``O`` (``b`` only):
        ``sum_B w_i z_i + sum_T w_i y_it / W_t - sum_O w_i y_ib / W_b`` with
        ``z_i = y_it / W_t - y_ib / W_b``, so its variance is
        ``sum_B w_i**2 var(z) + sum_T w_i**2 var(y_t) / W_t**2 + sum_O w_i**2 var(y_b) / W_b**2``.

        * ``B``: the plug-in sum of squares of ``w_i z_i`` about the group's own
          (``w**2``-weighted) mean, with ``n_B`` units (so ``n_B / (n_B - 1)`` and
          ``n_B - 1`` degrees of freedom);
        * ``T``: ``var(y_t)`` is the same for every unit observed at ``t`` (rows missing at
          random), so it is estimated from all ``n_t`` of them about the mean ``m_t`` that
          the cell itself estimates from them: the group's part is its share
          ``sum_T w**2 / sum_t w**2`` of the plug-in ``sum_{i obs. at t} w_i**2
          (y_it - m_t)**2 / W_t**2``, with ``n_t`` units (``n_t - 1`` degrees of freedom);
        * ``O``: likewise at ``b`` with ``n_b``.

        Unweighted, the corrected parts add up to an unbiased variance, and without holes
        ``T`` and ``O`` are empty and ``B`` is the balanced panel's Welch part. The three
        estimates share ``B``'s units; their Satterthwaite degrees of freedom count the
        covariances that follow (:meth:`welch_dependence`; see docs/inference.rst for the
        Monte Carlo). Before issue
        50, ``T`` and ``O`` were taken about the whole side's means with their own few units
        (often two: ``n / (n - 1) = 2`` and one degree of freedom).
        """
        sides, _ = self._pattern_sums()
        parts, n = [], []
        for side in sides:
            share_t = np.divide(side["w2_only_t"], side["w2_t"],
                                out=np.zeros_like(side["w2_t"]), where=side["w2_t"] > 0)
            share_b = np.divide(side["w2_only_b"], side["w2_b"],
                                out=np.zeros_like(side["w2_b"]), where=side["w2_b"] > 0)
            parts += [side["centred_both"], side["level_t"] * share_t,
                      side["level_b"] * share_b]
            n += [side["n_both"], np.where(side["n_only_t"] > 0, side["n_t"], 0),
                  np.where(side["n_only_b"] > 0, side["n_b"], 0)]
        live = self.ref == 0
        return (np.where(live, np.stack(parts), 0.0),
                np.where(live, np.stack(n), 0))

    def welch_dependence(self):
        """The dependence between the Welch parts of :meth:`welch_groups` that share units:
        ``(pairs, shared, r2)`` (see :func:`~didmem.inference.small_sample.block_welch`), or
        None on cross-sections (independent rows).

        On a panel with holes a side's three parts are estimated on overlapping units: the
        ``n_B`` units observed at both periods estimate ``B`` and also enter the level
        variances at ``t`` (``T``) and at ``b`` (``O``). Two sample variances of variables
        ``x`` and ``y`` with correlation ``r`` on ``m`` shared units have covariance
        ``2 r**2 m s_x**2 s_y**2 / (nu_x nu_y)`` under normality, so the Satterthwaite degrees
        of freedom count ``2 a_k a_l r_kl**2 m_kl / (nu_k nu_l)`` for each pair (issue 50).
        On ``B``'s units ``psi_i = u_t + u_b`` (the unit's terms at ``t`` and at ``b``);
        ``r`` is estimated from their centred moments there: ``(B, T)`` the correlation of
        ``u_t + u_b`` with ``u_t``, ``(B, O)`` with ``u_b``, ``(T, O)`` of ``u_t`` with ``u_b``.
        """
        if self.rows.size == self.w.size:
            return None
        sides, live = self._pattern_sums()
        r2, shared = [], []
        for side in sides:
            tt, bb, tb = side["both_moments"]
            zz = tt + bb + 2 * tb
            for num, den in (((tt + tb) ** 2, zz * tt), ((bb + tb) ** 2, zz * bb),
                             (tb**2, tt * bb)):
                r2.append(np.clip(np.divide(num, den, out=np.zeros_like(num), where=den > 0),
                                  0.0, 1.0))
                shared.append(side["n_both"])
        pairs = np.array([[0, 1], [0, 2], [1, 2], [3, 4], [3, 5], [4, 5]])
        return pairs, np.where(live, np.stack(shared), 0), np.where(live, np.stack(r2), 0.0)

    def observation_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Each cell's plug-in variance ``sum_i psi_i**2`` split by side and observation
        pattern (cohort and controls; at both periods, at ``t`` only, at ``b`` only) and the
        units of each group (groups x cells, six groups; they add up to the variance)."""
        sides, live = self._pattern_sums()
        parts = [p for side in sides for p in (side["part_both"], side["part_t"],
                                                 side["part_b"])]
        n = [c for side in sides for c in (side["n_both"], side["n_only_t"], side["n_only_b"])]
        return np.where(live, np.stack(parts), 0.0), np.where(live, np.stack(n), 0)

    def _pattern_sums(self):
        """Per side of every cell (cohort, controls): the sums of squares and counts of its
        units by observation pattern at the cell's two periods (computed once per influence:
        :meth:`welch_groups` and :meth:`welch_dependence` both read them)."""
        cached = self.__dict__.get("_pattern_cache")
        if cached is None:
            cached = self._pattern_sums_of_rows()
            object.__setattr__(self, "_pattern_cache", cached)  # the influence is frozen
        return cached

    def _pattern_sums_of_rows(self):
        counts, both = _co_observed(self.rows.unit_start, self.rows.time,
                                    self.w[self.rows.unit] * self.rows.y, self.w,
                                    self._block(), self.n_blocks, self.n_times)

        def suffix(a):
            out = np.zeros((a.shape[0] + 1,) + a.shape[1:], dtype=a.dtype)
            out[:-1] = np.cumsum(a[::-1], axis=0)[::-1]
            return out

        n_t = self.n_times
        t, b = self.idx[:, 0], self.idx[:, 1]  # b is t for level comparisons
        based = b != t
        own = (self.k >= self.cs)[:, None]
        # the sums over every unit observed at t (or b): wy**2, wy w, w**2, from the Gram
        at = np.stack([self.gram[:, t, t], self.gram[:, t, n_t + t],
                       self.gram[:, n_t + t, n_t + t]], axis=-1)  # blocks x cells x 3
        at_b = np.stack([self.gram[:, b, b], self.gram[:, b, n_t + b],
                         self.gram[:, n_t + b, n_t + b]], axis=-1)
        cells = np.arange(self.n_cells)
        sides = []
        for coef, block_of in ((self.tau, None), (self.kappa, "controls")):
            def total(a):  # a: blocks x cells x ... -> the cell's treated block or controls
                mine = a[self.k, cells]
                if block_of is None:
                    return mine
                tail = suffix(a)[self.cs, cells]
                return tail - np.where(own.reshape((-1,) + (1,) * (mine.ndim - 1)), mine, 0)

            s_both = np.where(based[:, None], total(both[:, t, b]), 0.0)  # cells x 6
            c_both = np.where(based, total(counts[:, t, b]), 0)
            c_t, c_b = total(counts[:, t, t]), total(counts[:, b, b])
            s_t, s_b = total(at), total(at_b)
            a0, a1, a2, a3 = coef.T
            ww = a2 + a3
            part_both = (a0**2 * s_both[:, 0] + a1**2 * s_both[:, 1]
                         + 2 * a0 * a1 * s_both[:, 2] + 2 * a0 * ww * s_both[:, 3]
                         + 2 * a1 * ww * s_both[:, 4] + ww**2 * s_both[:, 5])
            only_t = s_t - s_both[:, [0, 3, 5]]
            only_b = np.where(based[:, None], s_b - s_both[:, [1, 4, 5]], 0.0)
            part_t = a0**2 * only_t[:, 0] + 2 * a0 * a2 * only_t[:, 1] + a2**2 * only_t[:, 2]
            part_b = a1**2 * only_b[:, 0] + 2 * a1 * a3 * only_b[:, 1] + a3**2 * only_b[:, 2]
            # B's w z about its own w**2-weighted mean: sum (w z)**2 - (sum w (w z))**2 / sum w**2
            zz = a0**2 * s_both[:, 0] + a1**2 * s_both[:, 1] + 2 * a0 * a1 * s_both[:, 2]
            zw = a0 * s_both[:, 3] + a1 * s_both[:, 4]
            centred = zz - np.divide(zw**2, s_both[:, 5], out=np.zeros_like(zw),
                                     where=s_both[:, 5] > 0)
            # on B, the two levels' variables u_t = a0 wy_t + a2 w and u_b = a1 wy_b + a3 w
            # about B's own w**2-weighted means: their centred moments (psi = u_t + u_b)
            w2 = s_both[:, 5]
            mean_t = a0 * s_both[:, 3] + a2 * w2
            mean_b = a1 * s_both[:, 4] + a3 * w2
            moments = np.stack([
                a0**2 * s_both[:, 0] + 2 * a0 * a2 * s_both[:, 3] + a2**2 * w2,
                a1**2 * s_both[:, 1] + 2 * a1 * a3 * s_both[:, 4] + a3**2 * w2,
                a0 * a1 * s_both[:, 2] + a0 * a3 * s_both[:, 3] + a2 * a1 * s_both[:, 4]
                + a2 * a3 * w2])
            moments -= np.divide(np.stack([mean_t**2, mean_b**2, mean_t * mean_b]), w2,
                                 out=np.zeros_like(moments), where=w2 > 0)
            level_t = a0**2 * s_t[:, 0] + 2 * a0 * a2 * s_t[:, 1] + a2**2 * s_t[:, 2]
            level_b = np.where(based, a1**2 * s_b[:, 0] + 2 * a1 * a3 * s_b[:, 1]
                               + a3**2 * s_b[:, 2], 0.0)
            sides.append({
                "part_both": part_both, "part_t": part_t, "part_b": part_b,
                "n_both": c_both, "n_only_t": c_t - c_both,
                "n_only_b": np.where(based, c_b - c_both, 0),
                "centred_both": np.maximum(centred, 0.0), "level_t": level_t,
                "level_b": level_b, "n_t": c_t, "n_b": np.where(based, c_b, 0),
                "w2_t": s_t[:, 2], "w2_only_t": only_t[:, 2],
                "w2_b": np.where(based, s_b[:, 2], 0.0), "w2_only_b": only_b[:, 2],
                "both_moments": np.where(based, moments, 0.0)})
        return sides, (self.ref == 0)

    def contributing_units(self) -> np.ndarray:
        """``(n_treated, n_control)`` (2 x cells): the units of the cell's cohort and of its
        controls observed at its time or its base period."""
        n = self.observation_groups()[1]
        return np.stack([n[:3].sum(axis=0), n[3:].sum(axis=0)])
