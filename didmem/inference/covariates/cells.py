"""The covariate route of :class:`~didmem.DiDEstimator` on a balanced panel: cell by cell.

Each (cohort, time) cell is a two-period comparison of its cohort with its controls, on the
outcome change ``Y_t - Y_b`` with the covariates at the base period ``b`` (as R ``did``).
(Strictly, R takes the covariates at the earlier of the two periods, which is the base
period except for pre-treatment cells under a universal base; so does didmem.)
One of Sant'Anna & Zhao's estimators (:mod:`didmem.inference.drdid.panel`) gives the ATT and the
influence function ``IF`` of the cell's units; didmem's ``psi`` is ``IF / n_cell`` (R's
``(n / n_cell) IF`` divided by ``n``), stored block by block in a
:class:`~didmem.inference.influence.StoredInfluence`.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..._messages import listing as _listing
from ...errors import EstimationError, OverlapWarning
from ..drdid import panel as drdid
from ..prepared import _fmt
from ..drdid.kernel import METHOD_CODES, covariate_cells_kernel, pscore_kernel
from ..influence import StoredInfluence, cell_layout

__all__ = ["EST_METHODS", "covariate_cells"]

from ..choices import EST_METHODS  # noqa: E402  (declared where the estimators read it cheaply)
_RCOND_MIN = np.finfo(float).eps


def _rows(prepared, k, cs):
    starts = prepared.starts
    n_blocks = starts.size - 1
    ctrl = [j for j in range(cs, n_blocks) if j != k]
    parts = [np.arange(starts[j], starts[j + 1]) for j in [k, *ctrl]]
    return np.concatenate(parts), ctrl


def _rcond(gram) -> float:
    try:
        return 1.0 / np.linalg.cond(gram, 1)
    except np.linalg.LinAlgError:  # pragma: no cover - cond returns inf for singular input
        return 0.0


def _too_few(prepared, cells, n_reg, names):
    counts = np.diff(prepared.starts)
    suffix = np.concatenate([np.cumsum(counts[::-1])[::-1], [0]])
    n_ctrl = suffix[cells.cs] - np.where(cells.k >= cells.cs, counts[cells.k], 0)
    bad = np.flatnonzero((n_ctrl < n_reg + 1) & (cells.ref == 0))
    if bad.size:
        c = bad[0]
        raise EstimationError(
            f"Cell {_label(prepared, cells, c)} has {counts[cells.k[c]]} treated and "
            f"{n_ctrl[c]} control units, too few for a regression on {n_reg} terms (intercept "
            f"and {n_reg - 1} covariates {names}); it needs at least {n_reg + 1} controls "
            f"({bad.size} cells have fewer). Use fewer covariates or "
            "control_group='not_yet_treated'."
        )


def _label(prepared, cells, c) -> str:
    return f"(cohort {_fmt(prepared.cohorts[cells.k[c]])}, time {_fmt(prepared.times[cells.t[c]])})"


def covariate_cells(prepared, cells, est_method: str, covariate_names, owner: str,
                    engine: str = "numba"):
    """ATT and influence functions of every cell with covariates.

    ``engine="numba"`` runs the compiled kernel over all cells in parallel;
    ``engine="numpy"`` runs :mod:`didmem.inference.drdid.panel` cell by cell (the test oracle).

    Returns
    -------
    att : ndarray (n_cells,)
    influence : StoredInfluence
    """
    names = list(covariate_names)
    n_reg = prepared.x.shape[2] + 1
    _too_few(prepared, cells, n_reg, names)
    n_blocks = prepared.starts.size - 1
    cols, pos = cell_layout(cells, n_blocks)
    sizes = np.diff(prepared.starts) * np.array([c.size for c in cols])
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    flat = np.zeros(int(offsets[-1]))
    if engine == "numba":
        yt = np.ascontiguousarray(prepared.y.T)
        xt = np.ascontiguousarray(prepared.x.transpose(1, 2, 0))
        cell_key, ps_offsets, ps_flat = _shared_pscores(prepared, cells, est_method, yt, xt,
                                                        names)
        att, n_trim, max_ps, status = covariate_cells_kernel(
            yt, xt, prepared.w, prepared.starts, *cells.kernel_args(), pos, offsets,
            METHOD_CODES[est_method], drdid.TRIM_LEVEL, drdid.PS_CAP, cell_key, ps_offsets,
            ps_flat, flat)
    else:
        att, n_trim, max_ps, status = _numpy_cells(prepared, cells, est_method, pos, offsets,
                                                   cols, flat)
    bad = np.flatnonzero(status)
    if bad.size:
        c = bad[0]
        what = ("outcome regression on the controls" if status[c] == 2
                else "propensity score")
        raise EstimationError(
            f"The covariates {names} are rank-deficient (collinear, or constant alongside "
            f"the intercept) in the {what} of cell {_label(prepared, cells, c)} ({bad.size} "
            "cells affected); drop or combine covariates."
        )
    _warn_overlap(prepared, cells, n_trim, max_ps, owner)
    values = tuple(flat[offsets[j]:offsets[j + 1]].reshape(cols[j].size, -1)
                   for j in range(n_blocks))
    return att, StoredInfluence(prepared.starts, tuple(cols), values, cells.size, prepared=prepared,
                                cells=cells, att=att)


def _shared_pscores(prepared, cells, est_method, yt, xt, names):
    """Fit each distinct propensity score once.

    A cell's logit depends only on its cohort, its control set and the covariates' period;
    with time-invariant covariates every cell of a cohort with the same controls (all of
    them, with never-treated controls) shares one fit. Returns ``cell_key`` (-1 where the
    cell fits its own), the offsets of each key's scores and the scores.
    """
    none = (np.full(cells.size, -1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(0))
    live = np.flatnonzero(cells.ref == 0)
    if est_method == "reg" or live.size == 0:
        return none
    invariant = bool(np.all(prepared.x == prepared.x[:, :1, :]))
    period = np.zeros(cells.size, dtype=np.int64) if invariant else np.minimum(cells.t, cells.b)
    triples = np.stack([cells.k[live], cells.cs[live], period[live]], axis=1)
    keys, inverse = np.unique(triples, axis=0, return_inverse=True)
    if keys.shape[0] == live.size:  # nothing shared: each cell fits its own
        return none
    counts = np.diff(prepared.starts)
    suffix = np.concatenate([np.cumsum(counts[::-1])[::-1], [0]])
    k, cs = keys[:, 0], keys[:, 1]
    sizes = counts[k] + suffix[cs] - np.where(k >= cs, counts[k], 0)
    ps_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    ps_flat = np.empty(int(ps_offsets[-1]))
    status = pscore_kernel(yt, xt, prepared.w, prepared.starts, np.ascontiguousarray(k),
                           np.ascontiguousarray(cs), np.ascontiguousarray(keys[:, 2]),
                           ps_offsets, ps_flat)
    cell_key = np.full(cells.size, -1, dtype=np.int64)
    cell_key[live] = inverse.ravel()
    bad = np.flatnonzero(status[cell_key[live]])
    if bad.size:
        raise EstimationError(
            f"The covariates {names} are rank-deficient (collinear, or constant alongside "
            f"the intercept) in the propensity score of cell "
            f"{_label(prepared, cells, live[bad[0]])} ({bad.size} cells affected); drop or "
            "combine covariates."
        )
    return cell_key, ps_offsets, ps_flat


def _warn_overlap(prepared, cells, n_trim, max_ps, owner):
    if n_trim.sum():
        warnings.warn(
            f"{owner}: trimmed {int(n_trim.sum())} control units (cell by cell) with a "
            f"propensity score of {drdid.TRIM_LEVEL} or more in {int((n_trim > 0).sum())} of "
            f"{cells.size} cells, as DRDID does; overlap is weak there.",
            OverlapWarning,
            stacklevel=5,
        )
    bad = np.flatnonzero(max_ps >= drdid.OVERLAP_LEVEL)
    if bad.size:
        labels = [_label(prepared, cells, c) for c in bad]
        warnings.warn(
            f"{owner}: the propensity score reaches {drdid.OVERLAP_LEVEL} in {bad.size} "
            f"of {cells.size} cells, e.g. {_listing(labels, plain=True)}: the covariates "
            "(nearly) separate the cohort from its controls, so overlap fails there and those "
            "estimates rest on few comparable controls (R did reports such cells as NA).",
            OverlapWarning,
            stacklevel=5,
        )


def _numpy_cells(prepared, cells, est_method, pos, offsets, cols, flat):
    n_cells = cells.size
    att, max_ps = np.zeros(n_cells), np.zeros(n_cells)
    n_trim, status = np.zeros(n_cells, dtype=np.int64), np.zeros(n_cells, dtype=np.int64)
    for c in range(n_cells):
        if cells.ref[c]:
            continue
        k, t, b, cs = cells.k[c], cells.t[c], cells.b[c], cells.cs[c]
        rows, ctrl = _rows(prepared, k, cs)
        n_k = prepared.starts[k + 1] - prepared.starts[k]
        d = np.zeros(rows.size)
        d[:n_k] = 1.0
        dy = prepared.y[rows, t] - prepared.y[rows, b]
        x = np.empty((rows.size, prepared.x.shape[2] + 1))
        x[:, 0] = 1.0
        x[:, 1:] = prepared.x[rows, min(t, b)]
        w = prepared.w[rows]
        status[c] = _rank_status(x, d, w, est_method)
        if status[c]:
            continue
        if est_method == "reg":
            att[c], inf = drdid.reg_did_panel(dy, d, x, w)
        elif est_method == "ipw":
            att[c], inf, n_trim[c], max_ps[c] = drdid.std_ipw_did_panel(dy, d, x, w)
        else:
            att[c], inf, n_trim[c], max_ps[c] = drdid.drdid_panel(dy, d, x, w)
        psi = inf / rows.size
        off = 0
        for j in [k] + ctrl:
            m = prepared.starts[j + 1] - prepared.starts[j]
            block = flat[offsets[j]:offsets[j + 1]].reshape(cols[j].size, m)
            block[pos[c, j]] = psi[off:off + m]
            off += m
    return att, n_trim, max_ps, status


def _rank_status(x, d, w, est_method) -> int:
    w = w / w.mean()
    if est_method in ("reg", "dr"):
        wc = w * (1 - d)
        if _rcond(x.T @ (wc[:, None] * x)) < _RCOND_MIN:
            return 2
    if est_method in ("ipw", "dr") and _rcond(x.T @ (w[:, None] * x)) < _RCOND_MIN:
        return 3
    return 0
