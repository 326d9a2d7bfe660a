r"""The k-th exposure's effect with history-matched controls (:class:`DiDEstimator` with
``exposure=k``).

The design is the first exposure's (R ``did``'s pre-processing, varying or universal base,
never- or not-yet-treated controls) on the units with ``k - 1`` earlier exposures, with the
``k``-th exposure's cohort as the cohort. A cell's controls are further restricted to the
treated unit's *history*, its earlier exposure cohorts (de Chaisemartin & D'Haultfoeuille's
comparison of switchers with not-yet-switchers of the same baseline): where an earlier
exposure's effect still changes over time, units with another history drift differently and
bias the comparison. The estimate pools the histories of a cohort by their treated weight
(:mod:`didmem.inference.exposure.kernel`); its influence functions
(:class:`~didmem.inference.exposure.cells.ExposureInfluence`) go to the fit's one inference, so
the bootstrap, the band, the small-sample correction (with the history-matched controls),
aggregations and pre-tests are the first exposure's.

A history none of whose units is without a ``k``-th exposure in the panel has no control at
the last checkpoint: it is dropped, with a :class:`~didmem.DataDroppedWarning` naming it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._messages import listing as _listing
from ..errors import DataDroppedWarning, EstimationError, ParameterError
from ..inference.prepared import _fmt, prepare_panel
from ..panel.exposures import exposure_view, subset_units
from ..results.exposure import ExposureResult

__all__ = ["prepare_exposure", "exposure_result"]


def _history_label(cohorts) -> str:
    return "(" + ", ".join(_fmt(g) for g in cohorts) + ")"


def _histories(view, panel, params):
    """Which histories can be used; the table of histories and the kept rows."""
    times = panel.times
    k = view.exposure
    never = ~(view.cohorts <= times[-1])
    inside = ~never & (view.cohorts > times[0] + params["anticipation"])
    n_hist = view.history_cohorts.shape[0]
    n_units = np.bincount(view.history, minlength=n_hist)
    n_never = np.bincount(view.history[never], minlength=n_hist)
    n_treated = np.bincount(view.history[inside], minlength=n_hist)
    status = np.where(n_treated == 0, "unused", np.where(n_never == 0, "dropped", "used"))
    treated = [tuple(float(g) for g in np.unique(view.cohorts[inside & (view.history == h)]))
               for h in range(n_hist)]
    names = ["cohort"] + [f"cohort_{j + 1}" for j in range(1, k - 1)]
    table = pd.DataFrame(view.history_cohorts, columns=names)
    table["n_units"] = n_units
    table["n_treated"] = n_treated
    table["n_without"] = n_never
    table["treated_cohorts"] = treated
    table["status"] = status
    return table


def _warn_dropped(table, owner, k):
    dropped = table[table["status"] == "dropped"]
    if dropped.empty:
        return
    labels = [_history_label(row) for row in dropped.iloc[:, : k - 1].to_numpy()]
    cohorts = sorted({g for cs in dropped["treated_cohorts"] for g in cs})
    warnings.warn(
        f"{owner}(exposure={k}): dropped {len(dropped)} histories (earlier exposure cohorts "
        f"{_listing(labels, plain=True)}; {int(dropped['n_units'].sum())} units, "
        f"{int(dropped['n_treated'].sum())} with a k-th exposure at cohorts "
        f"{_listing([_fmt(g) for g in cohorts], plain=True)}): every unit of them has its "
        f"exposure {k} inside the panel, so none is a control of the same history at the last "
        "checkpoint. Their cohorts' cells pool the other histories only (see "
        "result.histories).",
        DataDroppedWarning, stacklevel=5)


def prepare_exposure(panel, params, owner: str, *, not_yet: bool):
    """The exposure route's design (see the module notes): the prepared panel of the units
    with ``k - 1`` earlier exposures whose history has controls, each unit's history code
    with their number, and the table of histories (for the result)."""
    k = params["exposure"]
    if panel.covariates:
        raise ParameterError(
            f"{owner}(exposure={k}) does not take covariates yet; the panel has "
            f"{list(panel.covariates)}. Build the panel without covariates=..."
        )
    if getattr(panel, "layout", "balanced") != "balanced":
        raise ParameterError(
            f"{owner}(exposure={k}) needs a balanced panel; this one is {panel.layout!r}. "
            "Build it with balance='error' or 'drop_incomplete_units'."
        )
    view = exposure_view(panel, k, owner)
    if params["history"] == "ignored":
        view.history = np.zeros_like(view.history)
        view.history_cohorts = np.full((1, k - 1), np.nan)
    table = _histories(view, panel, params)
    used = (table["status"] == "used").to_numpy()
    if not used.any():
        raise EstimationError(
            f"{owner}(exposure={k}): no history has both units with exposure {k} inside the "
            f"panel and units without one, so no k-th exposure has a history-matched "
            f"control ({len(table)} histories; {int(table['n_treated'].sum())} units with "
            f"exposure {k} inside the panel)."
        )
    _warn_dropped(table, owner, k)
    keep = used[view.history]
    rows = view.rows[keep]
    sub = subset_units(panel, rows, view.cohorts[keep])
    prepared = prepare_panel(sub, params["outcome"], need_never_treated=not not_yet,
                            anticipation=params["anticipation"],
                            lower_is_better=params["lower_is_better"], owner=owner)
    codes = pd.Index(np.asarray(panel.units)[rows]).get_indexer(prepared.unit_labels)
    _, hist = np.unique(view.history[keep][codes], return_inverse=True)
    hist = np.ascontiguousarray(hist.ravel(), dtype=np.int64)
    return prepared, (hist, int(hist.max()) + 1), table


def exposure_result(inference, table, *, owner: str, params, outcome: str) -> ExposureResult:
    """The k-th exposure's result: the group-time result with its histories."""
    return ExposureResult.from_inference(
        inference, estimator=owner, params=params, outcome=outcome,
        lower_is_better=params["lower_is_better"], exposure=params["exposure"],
        history=params["history"], histories=table,
        matched_controls=inference.influence.n_control)
