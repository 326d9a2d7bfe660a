r"""The linear estimands of Roth & Sant'Anna's estimator, as R ``staggered`` builds them.

Every estimand of the random-timing estimator is ``theta = sum_g A_theta[g] . Ybar_g`` with a
companion ``Xhat = sum_g A_0[g] . Ybar_g`` of pre-treatment differences (the scalar that
Callaway & Sant'Anna's estimator subtracts: ``beta = 1``). Here both are ``(K, T)`` arrays
over the cohorts and times of a :class:`~.design.TimingDesign`, in its
coded positions (times ``0 .. T-1``, each cohort the position of its first treated time), so
that "the period before ``g``" (R's ``g - 1``) is position ``code(g) - 1`` on any checkpoint
grid. On R's consecutive integer periods the positions are R's periods shifted by a constant,
and the arrays are R's ``A_theta_list`` / ``A_0_list`` (``use_DiD_A0 = TRUE``), entry by entry.

Which cells enter each aggregation follows ``staggered`` (not R ``did``'s ``aggte``):

* a cell ``(g, t)`` is identified when ``t < max(g)`` (the last cohort, or the
  never-treated, is the control of last resort); its controls are the cohorts first treated
  after ``max(g, t)`` (``not_yet_treated``) or the last cohort only (``last_treated``),
  weighted by size;
* ``simple``: all ``(g, t)`` with ``g <= t < max(g)``, each weighted by ``N_g``;
* ``cohort``: for each ``g < max(g)`` treated within the panel, the mean over its treated
  periods, then an ``N_g``-weighted mean over cohorts;
* ``calendar``: for each ``t`` with ``min(g) <= t < max(g)``, the ``N_g``-weighted mean over
  cohorts treated by ``t``, then the plain mean over those ``t``;
* ``eventstudy`` at ``e``: the cohorts with ``max(g + e, g) < max(g)`` and ``<= max(t)``,
  weighted by ``N_g`` over all of them, each at ``t = g + e`` where that is a period of the
  panel.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cell_weights", "simple_weights", "cohort_weights", "calendar_weights",
           "event_time_weights", "cohort_key_weights", "calendar_key_weights"]


def cell_weights(codes, sizes, g_index: int, t: int, last_treated: bool) -> np.ndarray:
    """Weights over cohorts of the cell ``(g, t)``: 1 on ``g``, minus the controls' shares.

    R ``staggered``'s ``create_Atheta_list_for_ATE_tg`` (the same vector is its ``A_0``'s).
    """
    return _control_table(codes, sizes, last_treated).cell(g_index, t)


class _ControlTable:
    """The controls' weight vectors of every possible first control cohort, computed once."""

    def __init__(self, codes, sizes, last_treated):
        self.codes = np.asarray(codes, dtype=np.float64)
        self.last = last_treated
        sizes = np.asarray(sizes, dtype=np.float64)
        k = self.codes.size
        self.vectors = np.zeros((k + 1, k))
        for start in range(k):
            if last_treated and start != k - 1:
                continue
            n = sizes[start:].sum()
            self.vectors[start, start:] = -sizes[start:] / n

    def cell(self, g_index, t):
        k = self.codes.size
        if self.last:
            start = k - 1 if self.codes[-1] > t else k
        else:
            start = int(np.searchsorted(self.codes, max(self.codes[g_index], t), side="right"))
        out = self.vectors[start].copy()
        out[g_index] += 1.0
        return out


_TABLES: dict = {}


def _control_table(codes, sizes, last_treated) -> _ControlTable:
    key = (np.asarray(codes, dtype=np.float64).tobytes(),
           np.asarray(sizes, dtype=np.float64).tobytes(), bool(last_treated))
    table = _TABLES.get(key)
    if table is None:
        if len(_TABLES) > 8:
            _TABLES.clear()
        table = _TABLES[key] = _ControlTable(codes, sizes, last_treated)
    return table


def _pre_period(code: float, n_times: int):
    """The position of the period before a cohort's first treated one, or None."""
    p = code - 1
    return int(p) if 0 <= p <= n_times - 1 and float(p).is_integer() else None


def _cells(codes, sizes, gis, ts, last_treated: bool) -> np.ndarray:
    """The weights over cohorts of the cells ``(gis[i], ts[i])`` (rows): each
    :func:`cell_weights` at once."""
    table = _control_table(codes, sizes, last_treated)
    k = table.codes.size
    gis = np.asarray(gis, dtype=np.int64)
    ts = np.asarray(ts, dtype=np.float64)
    if last_treated:
        start = np.where(table.codes[-1] > ts, k - 1, k)
    else:
        start = np.searchsorted(table.codes, np.maximum(table.codes[gis], ts), side="right")
    out = table.vectors[start]  # (a copy)
    out[np.arange(gis.size), gis] += 1.0
    return out


def _pre_periods(codes, gis, n_times: int):
    """Each cohort's pre-period position and whether it is one (:func:`_pre_period`)."""
    p = np.asarray(codes, dtype=np.float64)[gis] - 1
    has = (p >= 0) & (p <= n_times - 1) & (p == np.floor(p))
    return np.where(has, p, 0).astype(np.int64), has


def _place(cell_rows, gis, ts, codes, n_times: int):
    """``A_theta``, ``A_0`` of the sum of the weighted cell rows ``(gis[i], ts[i])`` (each a
    vector over cohorts, already weighted): at ``t`` for theta, at ``g``'s pre-period for
    ``A_0``."""
    k = cell_rows.shape[1]
    a_theta = np.zeros((k, n_times))
    a_0 = np.zeros((k, n_times))
    np.add.at(a_theta.T, np.asarray(ts, dtype=np.int64), cell_rows)
    p, has = _pre_periods(codes, gis, n_times)
    np.add.at(a_0.T, p[has], cell_rows[has])
    return a_theta, a_0


def _treated_cells(codes, n_times: int):
    """Every ``(g, t)`` with ``g <= t < max(g)``, by cohort then time."""
    codes = np.asarray(codes, dtype=np.float64)
    gi, ti = np.nonzero(codes[:, None] <= np.arange(n_times)[None, :])
    keep = ti < codes.max()
    return gi[keep], ti[keep]


def simple_weights(codes, sizes, n_times: int, last_treated: bool):
    """``A_theta``, ``A_0`` of ``simple``: every treated cell, weighted by ``N_g``."""
    codes = np.asarray(codes, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    gi, ti = _treated_cells(codes, n_times)
    share = sizes[gi] / sizes[gi].sum()
    return _place(share[:, None] * _cells(codes, sizes, gi, ti, last_treated), gi, ti,
                  codes, n_times)


def _cohort_mean(codes, sizes, gi: int, n_times: int, last_treated: bool):
    """Cohort ``g``'s mean over its treated periods (R's ``..._for_ATE_cohort_g``)."""
    codes = np.asarray(codes, dtype=np.float64)
    periods = np.flatnonzero((codes[gi] <= np.arange(n_times)) & (np.arange(n_times) < codes.max()))
    gis = np.full(periods.size, gi)
    rows = _cells(codes, sizes, gis, periods, last_treated) / max(periods.size, 1)
    return _place(rows, gis, periods, codes, n_times)


def _eligible_cohorts(codes, n_times: int):
    return [gi for gi in range(codes.size) if codes[gi] < codes.max() and codes[gi] <= n_times - 1]


def cohort_weights(codes, sizes, n_times: int, last_treated: bool):
    """``A_theta``, ``A_0`` of ``cohort``: the ``N_g``-weighted mean of cohort means."""
    codes = np.asarray(codes)
    eligible = _eligible_cohorts(codes, n_times)
    total = sum(sizes[gi] for gi in eligible)
    a_theta = np.zeros((codes.size, n_times))
    a_0 = np.zeros((codes.size, n_times))
    for gi in eligible:
        th, a0 = _cohort_mean(codes, sizes, gi, n_times, last_treated)
        a_theta += sizes[gi] / total * th
        a_0 += sizes[gi] / total * a0
    return a_theta, a_0


def cohort_key_weights(codes, sizes, n_times: int, last_treated: bool):
    """``[(cohort index, A_theta, A_0)]`` of each eligible cohort's own mean."""
    codes = np.asarray(codes)
    return [(gi, *_cohort_mean(codes, sizes, gi, n_times, last_treated))
            for gi in _eligible_cohorts(codes, n_times)]


def _calendar_period(codes, sizes, t: int, n_times: int, last_treated: bool):
    """Period ``t``'s ``N_g``-weighted mean over the cohorts treated by ``t``."""
    codes = np.asarray(codes, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    treated = np.flatnonzero(codes <= t)
    ts = np.full(treated.size, t)
    share = sizes[treated] / sizes[treated].sum()
    return _place(share[:, None] * _cells(codes, sizes, treated, ts, last_treated), treated,
                  ts, codes, n_times)


def _calendar_periods(codes, n_times: int):
    return [t for t in range(n_times) if codes.min() <= t < codes.max()]


def calendar_weights(codes, sizes, n_times: int, last_treated: bool):
    """``A_theta``, ``A_0`` of ``calendar``: the plain mean of the periods' means."""
    codes = np.asarray(codes)
    periods = _calendar_periods(codes, n_times)
    a_theta = np.zeros((codes.size, n_times))
    a_0 = np.zeros((codes.size, n_times))
    for t in periods:
        th, a0 = _calendar_period(codes, sizes, t, n_times, last_treated)
        a_theta += th / len(periods)
        a_0 += a0 / len(periods)
    return a_theta, a_0


def calendar_key_weights(codes, sizes, n_times: int, last_treated: bool):
    """``[(time position, A_theta, A_0)]`` of each eligible period's own mean."""
    codes = np.asarray(codes)
    return [(t, *_calendar_period(codes, sizes, t, n_times, last_treated))
            for t in _calendar_periods(codes, n_times)]


def event_time_weights(codes, sizes, n_times: int, event_time: int, last_treated: bool):
    """``A_theta``, ``A_0`` of ``eventstudy`` at ``event_time``, or None when no cohort
    has a comparison there (R stops, or skips the event time in a vector)."""
    codes = np.asarray(codes, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    k = codes.size
    reach = np.maximum(codes + event_time, codes)
    eligible = np.flatnonzero((reach < codes.max()) & (reach <= n_times - 1))
    t = codes[eligible] + event_time
    has_column = (t >= 0) & (t <= n_times - 1) & (t == np.floor(t))
    if not eligible.size or not has_column.any():
        return None
    table = _control_table(codes, sizes, last_treated)
    if last_treated:
        start = np.where(codes[-1] > t, k - 1, k)
    else:
        start = np.searchsorted(codes, np.maximum(codes[eligible], t), side="right")
    w = table.vectors[start].copy()  # (E, K): each eligible cohort's cell weights
    w[np.arange(eligible.size), eligible] += 1.0
    w *= (sizes[eligible] / sizes[eligible].sum())[:, None]
    a_theta = np.zeros((k, n_times))
    a_0 = np.zeros((k, n_times))
    a_theta[:, t[has_column].astype(np.int64)] = w[has_column].T
    p = codes[eligible] - 1
    has_pre = (p >= 0) & (p <= n_times - 1) & (p == np.floor(p))
    a_0[:, p[has_pre].astype(np.int64)] = w[has_pre].T
    return a_theta, a_0
