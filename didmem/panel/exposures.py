"""Repeated exposure in a panel: the cohorts of the second, third, ... exposure.

A panel with repeated exposure names several cohort columns,
``Panel(df, ..., cohort=["cohort", "cohort_2", "cohort_3"])``: the ``k``-th holds the time
(checkpoint) of the unit's ``k``-th exposure, empty (NaN, ``inf`` or the ``never_treated``
code) when the unit has fewer than ``k``. This module checks those columns once, at the
panel's construction, and gives the exposure-``k`` view the estimators use: the units with a
complete history (exposures ``1 .. k-1``), their ``k``-th cohort and their history code.
"""

from __future__ import annotations

import numpy as np

from .._messages import listing as _listing
from .._messages import python_scalar
from ..errors import ParameterError, PanelError

__all__ = ["check_exposure_order", "exposure_columns", "ExposureView", "exposure_view"]


def exposure_columns(cohort) -> tuple[str, ...]:
    """The cohort column names, first exposure first (one name or a sequence)."""
    columns = (cohort,) if isinstance(cohort, str) else tuple(cohort)
    if not columns:
        raise PanelError("Panel needs at least one cohort column; got cohort=[].")
    if len(set(columns)) != len(columns):
        raise PanelError(f"The cohort columns must be distinct; got cohort={list(columns)!r}.")
    return columns


def check_exposure_order(matrix: np.ndarray, columns, units) -> None:
    """Refuse exposure cohorts that go back in time or skip an exposure.

    ``matrix`` is units x exposures (``inf`` where a unit has no such exposure). The
    ``k``-th exposure cannot come before the ``(k-1)``-th, and a unit without a
    ``(k-1)``-th exposure has no ``k``-th. Two exposures at the same checkpoint are allowed
    (both fell in one macro-batch): the later one's effect is then measured given the
    earlier one at that checkpoint.
    """
    for k in range(1, matrix.shape[1]):
        prev, cur = matrix[:, k - 1], matrix[:, k]
        skipped = np.isinf(prev) & np.isfinite(cur)
        if skipped.any():
            bad = np.flatnonzero(skipped)
            raise PanelError(
                f"Column {columns[k]!r} (exposure {k + 1}) has a cohort for {bad.size} units "
                f"that have no exposure {k} in column {columns[k - 1]!r}, e.g. units "
                f"{_listing([python_scalar(units[u]) for u in bad])}. Exposures are numbered in "
                "order: fill the earlier column first."
            )
        back = np.isfinite(cur) & (cur < prev)
        if back.any():
            bad = np.flatnonzero(back)
            raise PanelError(
                f"Column {columns[k]!r} (exposure {k + 1}) is earlier than column "
                f"{columns[k - 1]!r} (exposure {k}) for {bad.size} units, e.g. units "
                f"{_listing([python_scalar(units[u]) for u in bad])}. The k-th cohort column holds the "
                "checkpoint of the k-th exposure, so they must not decrease."
            )


class ExposureView:
    """The units of a panel that can enter the estimation of exposure ``k``.

    Attributes
    ----------
    exposure : int
    rows : ndarray of int
        Rows of the panel's units with a complete history (exposures ``1 .. k-1``).
    cohorts : ndarray
        Their ``k``-th cohort (``inf`` without a ``k``-th exposure).
    history : ndarray of int
        A code per row: rows with the same earlier exposure cohorts share it.
    history_cohorts : ndarray (n_histories, k - 1)
        The earlier cohorts of each history code.
    """

    def __init__(self, exposure, rows, cohorts, history, history_cohorts):
        self.exposure = exposure
        self.rows = rows
        self.cohorts = cohorts
        self.history = history
        self.history_cohorts = history_cohorts


def exposure_view(panel, exposure: int, owner: str) -> ExposureView:
    """The exposure-``exposure`` view of ``panel`` (see :class:`ExposureView`).

    Raises
    ------
    ParameterError
        When the panel has fewer cohort columns than ``exposure``.
    """
    matrix = panel.exposure_cohorts
    if exposure > matrix.shape[1]:
        raise ParameterError(
            f"{owner}(exposure={exposure}) needs a panel with at least {exposure} cohort "
            f"columns (the k-th holds the checkpoint of the k-th exposure); this panel has "
            f"{matrix.shape[1]}: {list(panel.cohort_columns)}. Pass them as "
            f"Panel(..., cohort=['cohort', 'cohort_2', ...])."
        )
    earlier = matrix[:, : exposure - 1]
    rows = np.flatnonzero(np.isfinite(earlier).all(axis=1))
    history_cohorts, history = np.unique(earlier[rows], axis=0, return_inverse=True)
    return ExposureView(exposure, rows, matrix[rows, exposure - 1].copy(),
                        np.asarray(history, dtype=np.int64).ravel(), history_cohorts)


def subset_units(panel, rows: np.ndarray, cohorts: np.ndarray):
    """A shallow copy of ``panel`` with only the units ``rows``, whose cohort is ``cohorts``.

    The estimators of a later exposure run the ordinary design on this view: its units
    are those with a complete history, its cohort the ``k``-th exposure's.
    """
    import copy

    from .._arrays import readonly

    view = copy.copy(panel)
    view._outcomes = {name: readonly(m[rows]) for name, m in panel._outcomes.items()}
    view._covariates = {name: readonly(m[rows]) for name, m in panel._covariates.items()}
    view.units = panel.units[rows]
    view.cohorts = readonly(cohorts)
    view.weights = readonly(panel.weights[rows])
    view.exposure_cohorts = readonly(panel.exposure_cohorts[rows])
    if panel.clusters is not None:
        view.clusters = readonly(panel.clusters[rows])
    return view
