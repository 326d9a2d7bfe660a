"""The per-cell path of :class:`~didmem.DiDEstimator` with covariates.

Each (cohort, time) cell is a two-period comparison of its cohort with its controls, on the
outcome change ``Y_t - Y_b`` with the covariates at the base period ``b`` (as R ``did``).
One of Sant'Anna & Zhao's estimators (:mod:`didmem.estimators.drdid`) gives the ATT and the
influence function ``IF`` of the cell's units; didmem's ``psi`` is ``IF / n_cell`` (R's
``(n / n_cell) IF`` divided by ``n``), stored block by block in a
:class:`~didmem.inference.influence.CellInfluence` for the generic inference route.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import EstimationError, OverlapWarning
from ..inference.influence import CellInfluence, cell_layout
from . import drdid
from .._messages import listing as _listing
from ._design import _fmt

__all__ = ["EST_METHODS", "covariate_cells"]

EST_METHODS = ("dr", "ipw", "reg")
_RCOND_MIN = np.finfo(float).eps


def _rows(design, k, cs):
    starts = design.starts
    n_blocks = starts.size - 1
    ctrl = [j for j in range(cs, n_blocks) if j != k]
    parts = [np.arange(starts[k], starts[k + 1])] + [np.arange(starts[j], starts[j + 1]) for j in ctrl]
    return np.concatenate(parts), ctrl


def _rcond(gram) -> float:
    try:
        return 1.0 / np.linalg.cond(gram, 1)
    except np.linalg.LinAlgError:  # pragma: no cover - cond returns inf for singular input
        return 0.0


def _check_cell(design, names, label, x, d, w, est_method):
    n_reg = x.shape[1]
    n_ctrl = int((d == 0).sum())
    n_treat = int(d.sum())
    if n_ctrl < n_reg + 1 or n_treat < 1:
        raise EstimationError(
            f"Cell {label} has {n_treat} treated and {n_ctrl} control units, too few for a "
            f"regression on {n_reg} terms (intercept and {n_reg - 1} covariates); it needs at "
            f"least {n_reg + 1} controls. Use fewer covariates or control_group='not_yet_treated'."
        )
    grams = []
    if est_method in ("reg", "dr"):
        wc = w * (1 - d)
        grams.append(("outcome regression on the controls", x.T @ (wc[:, None] * x)))
    if est_method in ("ipw", "dr"):
        grams.append(("propensity score", x.T @ (w[:, None] * x)))
    for what, gram in grams:
        if _rcond(gram) < _RCOND_MIN:
            raise EstimationError(
                f"The covariates {names} are rank-deficient (collinear, or constant "
                f"alongside the intercept) in the {what} of cell {label}; drop or combine "
                "covariates."
            )


def covariate_cells(design, cells, est_method: str, covariate_names, owner: str):
    """ATT and influence functions of every cell with covariates (numpy, cell by cell).

    Returns
    -------
    att : ndarray (n_cells,)
    influence : CellInfluence
    """
    n_blocks = design.starts.size - 1
    cols, pos = cell_layout(cells, n_blocks)
    values = [np.zeros((design.starts[j + 1] - design.starts[j], c.size)) for j, c in enumerate(cols)]
    att = np.zeros(cells.size)
    names = list(covariate_names)
    trimmed = trimmed_cells = 0
    no_overlap = []
    for c in range(cells.size):
        if cells.ref[c]:
            continue
        k, t, b, cs = cells.k[c], cells.t[c], cells.b[c], cells.cs[c]
        rows, ctrl = _rows(design, k, cs)
        n_k = design.starts[k + 1] - design.starts[k]
        d = np.zeros(rows.size)
        d[:n_k] = 1.0
        dy = design.y[rows, t] - design.y[rows, b]
        x = np.empty((rows.size, design.x.shape[2] + 1))
        x[:, 0] = 1.0
        x[:, 1:] = design.x[rows, b]
        w = design.w[rows]
        label = f"(cohort {_fmt(design.cohorts[k])}, time {_fmt(design.times[t])})"
        _check_cell(design, names, label, x, d, w, est_method)
        if est_method == "reg":
            a, inf = drdid.reg_did_panel(dy, d, x, w)
            n_trim, max_ps = 0, 0.0
        elif est_method == "ipw":
            a, inf, n_trim, max_ps = drdid.std_ipw_did_panel(dy, d, x, w)
        else:
            a, inf, n_trim, max_ps = drdid.drdid_panel(dy, d, x, w)
        if n_trim:
            trimmed += n_trim
            trimmed_cells += 1
        if max_ps >= drdid.OVERLAP_LEVEL:
            no_overlap.append(label)
        att[c] = a
        psi = inf / rows.size
        values[k][:, pos[c, k]] = psi[:n_k]
        off = n_k
        for j in ctrl:
            m = design.starts[j + 1] - design.starts[j]
            values[j][:, pos[c, j]] = psi[off:off + m]
            off += m
    if trimmed:
        warnings.warn(
            f"{owner}: trimmed {trimmed} control units (cell by cell) with a propensity score "
            f"of {drdid.TRIM_LEVEL} or more in {trimmed_cells} of {cells.size} cells, as DRDID "
            "does; overlap is weak there.",
            OverlapWarning,
            stacklevel=4,
        )
    if no_overlap:
        warnings.warn(
            f"{owner}: the propensity score reaches {drdid.OVERLAP_LEVEL} in {len(no_overlap)} "
            f"of {cells.size} cells, e.g. {_listing(no_overlap, plain=True)}: the covariates "
            "(nearly) separate the cohort from its controls, so overlap fails there and those "
            "estimates rest on few comparable controls (R did reports such cells as NA).",
            OverlapWarning,
            stacklevel=4,
        )
    influence = CellInfluence(design.starts, tuple(cols), tuple(values), cells.size)
    return att, influence
