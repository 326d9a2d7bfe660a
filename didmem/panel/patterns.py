"""A binary panel given by the counts of its paths: every unit x time, its zeros never written.

When the outcome is binary (memorised or not at a checkpoint) and there are few checkpoints,
a unit's whole path is a bit pattern, and the per-cohort counts of each pattern are the
sufficient statistics of a fit without covariates (each cohort's moments follow from them:
:func:`didmem.inference.moments.cohort.pattern_moments`). :class:`PatternPanel` holds those counts;
:func:`count_patterns` builds them in one pass over the units from each unit's bits, without
the unit x time table. :func:`didmem.orders.read_memorised` fills it from lists of memorised
sequence indices and a training order; :meth:`didmem.DiDEstimator.fit` takes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import PanelError

__all__ = ["PatternPanel", "count_patterns", "pattern_bits", "MAX_PATTERN_TIMES"]

#: Times a unit's bit pattern can span (one bit per time in a 64-bit word).
MAX_PATTERN_TIMES = 64
_CHUNK = 1 << 24  # units keyed at once (128 MB of int64 keys)


@dataclass(frozen=True, eq=False)
class PatternPanel:
    """A balanced binary panel as the counts of its distinct paths per cohort.

    Attributes
    ----------
    times : ndarray (T,)
        The times (checkpoints), ascending.
    cohorts : ndarray (m,)
        The cohort of each row of ``patterns`` (``inf``: never treated within the times).
    patterns : ndarray (m, T) of uint8
        Distinct 0/1 paths; a path appears at most once per cohort.
    counts : ndarray (m,) of int64
        Units that follow each path (every count is positive).
    outcome : str
        The outcome's name (the results' label).
    source : str
        Where the panel came from, for messages and the result's settings.
    """

    times: np.ndarray
    cohorts: np.ndarray
    patterns: np.ndarray
    counts: np.ndarray
    outcome: str = "memorised"
    source: str = ""

    @property
    def n_units(self) -> int:
        """Units (sequences) of the panel, zeros included."""
        return int(self.counts.sum())

    def frame(self):
        """The counts as a table: ``cohort``, one 0/1 column per time, ``count``."""
        import pandas as pd

        table = pd.DataFrame(self.patterns, columns=[_label(t) for t in self.times])
        table.insert(0, "cohort", self.cohorts)
        table["count"] = self.counts
        return table.sort_values(["cohort"] + list(table.columns[1:-1]),
                                 ignore_index=True)

    def __repr__(self) -> str:
        return (f"PatternPanel({self.n_units:,} units x {self.times.size} times as "
                f"{self.counts.size} patterns, outcome {self.outcome!r})")


def _label(t) -> str:
    return str(int(t)) if float(t).is_integer() else str(t)


def pattern_bits(n_units: int, n_times: int) -> np.ndarray:
    """Zeroed bit patterns for ``n_units`` units over ``n_times`` times (the narrowest
    unsigned integer that holds them)."""
    if n_times > MAX_PATTERN_TIMES:
        raise PanelError(f"At most {MAX_PATTERN_TIMES} times fit a unit's bit pattern; got "
                         f"{n_times}.")
    dtype = np.uint8 if n_times <= 8 else np.uint16 if n_times <= 16 else \
        np.uint32 if n_times <= 32 else np.uint64
    return np.zeros(n_units, dtype=dtype)


def count_patterns(times, bits, cohort_codes: Callable[[int, int], np.ndarray],
                   cohort_values, *, outcome: str = "memorised",
                   source: str = "") -> PatternPanel:
    """The pattern panel of units given by their bits (bit ``t``: the outcome at time ``t``).

    Parameters
    ----------
    times : array (T,), ascending, at most 64
    bits : unsigned integer array (n_units,)
        Each unit's path as bits (:func:`pattern_bits`).
    cohort_codes : callable ``(lo, hi) -> integer array (hi - lo,)``
        The cohorts of units ``lo .. hi - 1`` as indices into ``cohort_values``; called on
        consecutive chunks, so no array of every unit's cohort is held.
    cohort_values : array (K,)
        The cohorts' first treated times (``inf`` for never treated).

    Notes
    -----
    Each unit is keyed ``code << T | bits`` and the keys are counted (by ``bincount`` over
    all possible keys when they are at most 2**24, else by sorting), chunk by chunk.
    """
    times = np.asarray(times, dtype=np.float64)
    values = np.asarray(cohort_values, dtype=np.float64)
    n_t, n_cohorts, n_units = times.size, values.size, bits.size
    if n_t + max(n_cohorts - 1, 1).bit_length() > 62:
        raise PanelError(f"{n_t} times and {n_cohorts} cohorts do not fit a 63-bit key of "
                         "cohort and pattern; use fewer checkpoints.")
    n_keys = n_cohorts << n_t
    dense = n_keys <= 1 << 24
    total = np.zeros(n_keys if dense else 0, dtype=np.int64)
    parts = []
    for lo in range(0, n_units, _CHUNK):
        hi = min(n_units, lo + _CHUNK)
        codes = np.asarray(cohort_codes(lo, hi))
        if codes.size and (codes.min() < 0 or codes.max() >= n_cohorts):
            raise PanelError(f"Cohort codes must index the {n_cohorts} cohort values; units "
                             f"{lo} to {hi - 1} have codes from {int(codes.min())} to "
                             f"{int(codes.max())}.")
        key = (codes.astype(np.int64) << n_t) | bits[lo:hi].astype(np.int64)
        if dense:
            total += np.bincount(key, minlength=n_keys)
        else:
            parts.append(np.unique(key, return_counts=True))
    if dense:
        keys = np.flatnonzero(total)
        counts = total[keys]
    else:
        keys = np.concatenate([k for k, _ in parts]) if parts else np.zeros(0, np.int64)
        weights = np.concatenate([c for _, c in parts]) if parts else np.zeros(0, np.int64)
        keys, where = np.unique(keys, return_inverse=True)
        counts = np.bincount(where, weights=weights).astype(np.int64)
    keys = keys.astype(np.uint64)
    pattern = keys & np.uint64((1 << n_t) - 1)
    patterns = ((pattern[:, None] >> np.arange(n_t, dtype=np.uint64)) & np.uint64(1))
    return PatternPanel(times=times, cohorts=values[(keys >> np.uint64(n_t)).astype(np.int64)],
                        patterns=patterns.astype(np.uint8), counts=counts.astype(np.int64),
                        outcome=outcome, source=source)
