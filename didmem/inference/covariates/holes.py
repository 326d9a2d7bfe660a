"""Cells with covariates on a panel with holes or on repeated cross-sections.

As R ``did`` does with ``allow_unbalanced_panel = TRUE`` or ``panel = FALSE``, each cell
``(g, t)`` with base period ``b`` is a repeated-cross-section comparison
(:mod:`didmem.inference.drdid.cross_sections`) of the rows of cohort ``g`` and of its controls
observed at ``t`` or at ``b``, each row with its own covariates. The estimator's influence
function is per row; a unit's ``psi`` is the sum over its rows divided by the cell's
number of rows (R's ``(n / n_cell) IF`` summed by id, divided by ``n``), stored block by
block in a :class:`~didmem.inference.influence.StoredInfluence`. One cell at a time in numpy: meant for the sizes at which covariates are used.
"""

from __future__ import annotations

import numpy as np

from ...errors import EstimationError
from ..drdid import cross_sections as drdid_rc
from .cells import _label, _rcond, _warn_overlap, _RCOND_MIN
from ..influence import StoredInfluence, cell_layout

__all__ = ["covariate_hole_cells"]

_ESTIMATORS = {"reg": drdid_rc.reg_did_rc, "ipw": drdid_rc.std_ipw_did_rc,
               "dr": drdid_rc.drdid_rc}


_REGRESSIONS = {"reg": 2, "ipw": 0, "dr": 4}  # outcome regressions: controls (then cohort)


def _singular(x, w, groups, est_method):
    """The first regression of the cell whose design is singular (or None)."""
    for name, rows in groups:
        wr = w * rows
        if _rcond(x.T @ (wr[:, None] * x)) < _RCOND_MIN:
            return f"outcome regression on {name}"
    if est_method in ("ipw", "dr") and _rcond(x.T @ (w[:, None] * x)) < _RCOND_MIN:
        return "propensity score"
    return None


def covariate_hole_cells(prepared, cells, est_method: str, covariate_names, owner: str):
    """ATT and influence functions of every cell, from the observed rows with covariates.

    Returns
    -------
    att : ndarray (n_cells,)
    influence : StoredInfluence
    """
    rows = prepared.holes
    names = list(covariate_names)
    n_units = prepared.w.size
    n_blocks = prepared.starts.size - 1
    block = np.repeat(np.arange(n_blocks), np.diff(prepared.starts))[rows.unit]
    x_all = np.column_stack([np.ones(rows.size), rows.x])
    w_all = prepared.w[rows.unit]
    cols, pos = cell_layout(cells, n_blocks)
    values = [np.zeros((c.size, prepared.starts[j + 1] - prepared.starts[j]))
              for j, c in enumerate(cols)]
    att = np.zeros(cells.size)
    n_trim = np.zeros(cells.size, dtype=np.int64)
    max_ps = np.zeros(cells.size)
    estimator = _ESTIMATORS[est_method]
    for c in np.flatnonzero(cells.ref == 0):
        k, t, b, cs = cells.k[c], cells.t[c], cells.b[c], cells.cs[c]
        treated = block == k
        sel = np.flatnonzero((treated | (block >= cs)) & ((rows.time == t) | (rows.time == b)))
        d = treated[sel].astype(np.float64)
        post = (rows.time[sel] == t).astype(np.float64)
        x, w, y = x_all[sel], w_all[sel], rows.y[sel]
        groups = [("the controls at the base period", (1 - d) * (1 - post)),
                  ("the controls at the cell's time", (1 - d) * post),
                  ("the cohort at the base period", d * (1 - post)),
                  ("the cohort at the cell's time", d * post)][:_REGRESSIONS[est_method]]
        for name, g in groups:
            if g.sum() < x.shape[1]:
                raise EstimationError(
                    f"Cell {_label(prepared, cells, c)} has {int(g.sum())} rows of {name}, too "
                    f"few for a regression on {x.shape[1]} terms (intercept and covariates "
                    f"{names}). Use fewer covariates or control_group='not_yet_treated'.")
        problem = _singular(x, w / w.mean(), groups, est_method)
        if problem:
            raise EstimationError(
                f"The covariates {names} are rank-deficient (collinear, or constant alongside "
                f"the intercept) in the {problem} of cell {_label(prepared, cells, c)}; drop or "
                "combine covariates.")
        out = estimator(y, post, d, x, w)
        att[c] = out[0]
        if len(out) > 2:
            n_trim[c], max_ps[c] = out[2], out[3]
        psi = np.bincount(rows.unit[sel], weights=out[1] / sel.size, minlength=n_units)
        for j in np.flatnonzero(pos[c] >= 0):
            values[j][pos[c, j]] = psi[prepared.starts[j]:prepared.starts[j + 1]]
    _warn_overlap(prepared, cells, n_trim, max_ps, owner)
    return att, StoredInfluence(prepared.starts, tuple(cols), tuple(values), cells.size,
                                prepared=prepared, cells=cells, att=att)
