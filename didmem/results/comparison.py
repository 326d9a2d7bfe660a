"""Compare estimators on the common (cohort, time) grid, with or without a known truth."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import ParameterError, optional_import
from ._truth import CELL_SETS, check_truth_frame, result_truth, score_estimates, select_cells

__all__ = ["compare", "plot_comparison", "aligned_cells"]

def _frame_of(name, result) -> pd.DataFrame:
    if isinstance(result, pd.DataFrame):
        frame = result
    elif hasattr(result, "to_frame"):
        frame = result.to_frame()
    else:
        raise ParameterError(f"compare: the result {name!r} has no to_frame(); got "
                             f"{type(result).__name__}.")
    missing = [c for c in ("cohort", "time", "estimate") if c not in frame.columns]
    if missing:
        raise ParameterError(f"compare: the result {name!r} lacks the columns {missing} "
                             "(it must be on the (cohort, time) grid).")
    keep = [c for c in ("cohort", "time", "estimate", "ci_lower", "ci_upper", "exposure")
            if c in frame]
    out = frame[keep].copy()
    out["cohort"] = out["cohort"].astype(np.float64)
    out["time"] = out["time"].astype(np.float64)
    return out


def aligned_cells(results: Mapping, truth=None, *, metric=None, cells="post") -> pd.DataFrame:
    """Every estimator's cells in one long table, joined with the truth where given.

    Columns: estimator, cohort, time, estimate, ci_lower, ci_upper (NaN without intervals)
    and, with a truth, tau (cells the truth lacks are dropped). Each result is joined with
    the truth of its own exposure and control group (see
    :func:`didmem.results._truth.result_truth`).
    """
    if not isinstance(results, Mapping) or not results:
        raise ParameterError("compare needs a non-empty dict {name: result}.")
    if cells not in CELL_SETS:
        raise ParameterError(f"The 'cells' parameter of compare must be one of "
                             f"{{{', '.join(repr(c) for c in CELL_SETS)}}}. Got {cells!r}.")
    if truth is not None:
        check_truth_frame(truth)
        _check_outcomes(results, _truth_metric(truth, metric))
    columns = ["estimator", "cohort", "time", "estimate", "ci_lower", "ci_upper"]
    parts = []
    for name, result in results.items():
        frame = select_cells(_frame_of(name, result), cells)
        part = frame.reindex(columns=columns[1:]).assign(estimator=str(name))[columns]
        if truth is not None:
            true = result_truth(result, truth, frame, metric=metric)
            part = part.merge(true, on=["cohort", "time"], how="inner")
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _truth_metric(truth: pd.DataFrame, metric):
    """The metric the truth is of: ``metric``, or the single one in its column, or None."""
    if metric is not None:
        return metric
    if "metric" in truth.columns and truth["metric"].nunique() == 1:
        return truth["metric"].iloc[0]
    return None


def _check_outcomes(results: Mapping, metric) -> None:
    """Refuse to score a result of one outcome against the truth of another metric."""
    if metric is None:
        return
    wrong = {str(name): r.outcome for name, r in results.items()
             if isinstance(getattr(r, "outcome", None), str) and r.outcome != metric}
    if wrong:
        raise ParameterError(
            f"compare: the truth is of metric {metric!r}, but the results "
            + ", ".join(f"{n!r} (outcome {o!r})" for n, o in wrong.items())
            + " are of another outcome; compare each result with the truth of its own "
            "outcome (metric=...)."
        )


def _scores(part: pd.DataFrame, reference) -> dict:
    score = score_estimates(part["estimate"], reference, part["ci_lower"], part["ci_upper"])
    return {"n_cells": score.n_cells, "bias": score.bias, "rmse": score.rmse,
            "corr": score.corr, "coverage": score.coverage}


def compare(results: Mapping, truth: pd.DataFrame | None = None, *, metric: str | None = None,
            cells: str = "post") -> pd.DataFrame:
    r"""One row per estimator: its error against the truth, or its agreement with the others.

    Parameters
    ----------
    results : dict
        ``{name: result}``; each result has a ``to_frame()`` on the (cohort, time) grid
        (:class:`GroupTimeResult`, :class:`CellResult`) or is such a DataFrame.
    truth : pandas.DataFrame, optional
        Columns cohort, time, tau (and ``metric`` and ``exposure``, as in the lab's
        ``truth.parquet``). Each result is scored against the truth of its own exposure
        (the ``exposure`` of an :class:`~didmem.results.exposure.ExposureResult`, else the
        first) and, where the truth has ``tau_nyt`` (the lab's), of its control group.
    metric : str, optional
        The truth's metric to use when it holds several.
    cells : {"post", "all", "instantaneous", "residual"}
        Which cells to score: post-treatment (``time >= cohort``, the default), all, those
        with ``time == cohort``, or those at the last time.

    Returns
    -------
    pandas.DataFrame
        Columns estimator, n_cells, bias, rmse, corr, coverage and ``reference`` (``"truth"``
        or ``"others"``). With a truth, over the cells each estimator shares with it:
        ``bias = mean(est - tau)``, ``rmse = sqrt(mean((est - tau)^2))``, ``corr`` the Pearson
        correlation, ``coverage`` the share of cells whose interval covers ``tau`` (NaN for
        estimators without intervals). Without a truth the reference of each estimator is the
        cell-wise mean of the *other* estimators' estimates (agreement only; coverage is then
        the share of those means inside its intervals). The long table behind it is
        :func:`aligned_cells`.

    Examples
    --------
    >>> import pandas as pd, didmem
    >>> truth = pd.DataFrame({"cohort": [1, 1], "time": [1, 2], "tau": [1.0, 2.0]})
    >>> est = pd.DataFrame({"cohort": [1, 1], "time": [1, 2], "estimate": [1.5, 2.5]})
    >>> didmem.compare({"a": est}, truth=truth)[["estimator", "bias", "rmse"]]
      estimator  bias  rmse
    0         a   0.5   0.5
    """
    long = aligned_cells(results, truth, metric=metric, cells=cells)
    rows = []
    names = [str(n) for n in results]
    if truth is not None:
        for name in names:
            part = long[long["estimator"] == name]
            rows.append({"estimator": name, **_scores(part, part["tau"]),
                         "reference": "truth"})
    else:
        if len(names) < 2:
            raise ParameterError("compare without a truth needs at least two estimators.")
        wide = long.pivot_table(index=["cohort", "time"], columns="estimator",
                                values="estimate", aggfunc="first")
        for name in names:
            part = long[long["estimator"] == name].set_index(["cohort", "time"])
            others = wide.drop(columns=name).mean(axis=1).reindex(part.index)
            rows.append({"estimator": name, **_scores(part, others.to_numpy(float)),
                         "reference": "others"})
    return pd.DataFrame(rows, columns=["estimator", "n_cells", "bias", "rmse", "corr",
                                       "coverage", "reference"])


def plot_comparison(results: Mapping, truth: pd.DataFrame | None = None, *, metric=None,
                    cells: str = "post", ncols: int = 3):
    """Estimates against the truth (or the others' mean), one panel per estimator.

    Each panel plots every cell's estimate against its reference with its interval where the
    estimator has one, and the 45-degree line. Needs matplotlib (``didmem[plot]``).

    Returns
    -------
    (matplotlib.figure.Figure, numpy.ndarray of Axes)
    """
    plt = optional_import("matplotlib.pyplot", "plot")
    long = aligned_cells(results, truth, metric=metric, cells=cells)
    names = [str(n) for n in results]
    if truth is None:
        wide = long.pivot_table(index=["cohort", "time"], columns="estimator",
                                values="estimate", aggfunc="first")
    ncols = max(1, min(ncols, len(names)))
    nrows = -(-len(names) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.0 * nrows), squeeze=False)
    for ax, name in zip(axes.ravel(), names):
        part = long[long["estimator"] == name]
        if truth is None:
            ref = wide.drop(columns=name).mean(axis=1).reindex(
                pd.MultiIndex.from_frame(part[["cohort", "time"]])).to_numpy()
            xlabel = "mean of the others"
        else:
            ref, xlabel = part["tau"].to_numpy(), "truth tau(g, c)"
        est = part["estimate"].to_numpy()
        lo, hi = part["ci_lower"].to_numpy(), part["ci_upper"].to_numpy()
        has = np.isfinite(lo) & np.isfinite(hi)
        if has.any():
            ax.errorbar(ref[has], est[has], yerr=[est[has] - lo[has], hi[has] - est[has]],
                        fmt="o", ms=3, lw=0.8, alpha=0.7)
        ax.plot(ref[~has], est[~has], "o", ms=3)
        finite = np.concatenate([ref[np.isfinite(ref)], est[np.isfinite(est)]])
        if finite.size:
            a, b = finite.min(), finite.max()
            ax.plot([a, b], [a, b], color="grey", lw=0.8, ls="--")
        ax.set_title(name)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("estimate")
    for ax in axes.ravel()[len(names):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig, axes
