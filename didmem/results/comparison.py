"""Compare estimators on the common (cohort, time) grid, with or without a known truth."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import ParameterError, optional_import

__all__ = ["compare", "plot_comparison", "aligned_cells"]

_CELLS = ("post", "all", "instantaneous", "residual")


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
    keep = [c for c in ("cohort", "time", "estimate", "ci_lower", "ci_upper") if c in frame]
    out = frame[keep].copy()
    out["cohort"] = out["cohort"].astype(np.float64)
    out["time"] = out["time"].astype(np.float64)
    return out


def _select(frame: pd.DataFrame, cells: str) -> pd.DataFrame:
    if cells == "post":
        return frame[frame["time"] >= frame["cohort"]]
    if cells == "instantaneous":
        return frame[frame["time"] == frame["cohort"]]
    if cells == "residual":
        return frame[frame["time"] == frame["time"].max()]
    return frame


def _truth_frame(truth, metric) -> pd.DataFrame:
    if not isinstance(truth, pd.DataFrame):
        raise ParameterError(f"truth must be a DataFrame with cohort, time, tau; got "
                             f"{type(truth).__name__}.")
    missing = [c for c in ("cohort", "time", "tau") if c not in truth.columns]
    if missing:
        raise ParameterError(f"truth lacks the columns {missing}; it needs cohort, time, tau.")
    if "metric" in truth.columns:
        metrics = truth["metric"].unique()
        if metric is None and len(metrics) > 1:
            raise ParameterError(f"truth holds several metrics {list(metrics)}; pick one with "
                                 "metric=...")
        if metric is not None:
            if metric not in metrics:
                raise ParameterError(f"truth has no metric {metric!r}; it has {list(metrics)}.")
            truth = truth[truth["metric"] == metric]
    out = truth[["cohort", "time", "tau"]].astype(np.float64)
    if out.duplicated(["cohort", "time"]).any():
        raise ParameterError("truth has more than one row for some (cohort, time) cells.")
    return out


def aligned_cells(results: Mapping, truth=None, *, metric=None, cells="post") -> pd.DataFrame:
    """Every estimator's cells in one long table, joined with the truth where given.

    Columns: estimator, cohort, time, estimate, ci_lower, ci_upper (NaN without intervals)
    and, with a truth, tau (cells the truth lacks are dropped).
    """
    if not isinstance(results, Mapping) or not results:
        raise ParameterError("compare needs a non-empty dict {name: result}.")
    if cells not in _CELLS:
        raise ParameterError(f"The 'cells' parameter of compare must be one of "
                             f"{{{', '.join(repr(c) for c in _CELLS)}}}. Got {cells!r}.")
    parts = []
    for name, result in results.items():
        frame = _select(_frame_of(name, result), cells)
        frame = frame.reindex(columns=["cohort", "time", "estimate", "ci_lower", "ci_upper"])
        parts.append(frame.assign(estimator=str(name)))
    long = pd.concat(parts, ignore_index=True)
    long = long[["estimator", "cohort", "time", "estimate", "ci_lower", "ci_upper"]]
    if truth is not None:
        truth_frame = _truth_frame(truth, metric)
        _check_outcomes(results, _truth_metric(truth, metric))
        long = long.merge(truth_frame, on=["cohort", "time"], how="inner")
    return long


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


def _scores(est, ref, lo, hi) -> dict:
    ok = np.isfinite(est) & np.isfinite(ref)
    est, ref, lo, hi = est[ok], ref[ok], lo[ok], hi[ok]
    err = est - ref
    n = int(ok.sum())
    corr = np.nan
    if n > 1 and np.std(est) > 0 and np.std(ref) > 0:
        corr = float(np.corrcoef(est, ref)[0, 1])
    has_ci = np.isfinite(lo) & np.isfinite(hi)
    coverage = float(np.mean((lo[has_ci] <= ref[has_ci]) & (ref[has_ci] <= hi[has_ci]))) \
        if has_ci.any() else np.nan
    return {"n_cells": n, "bias": float(err.mean()) if n else np.nan,
            "rmse": float(np.sqrt(np.mean(err ** 2))) if n else np.nan, "corr": corr,
            "coverage": coverage}


def compare(results: Mapping, truth: pd.DataFrame | None = None, *, metric: str | None = None,
            cells: str = "post") -> pd.DataFrame:
    r"""One row per estimator: its error against the truth, or its agreement with the others.

    Parameters
    ----------
    results : dict
        ``{name: result}``; each result has a ``to_frame()`` on the (cohort, time) grid
        (:class:`GroupTimeResult`, :class:`CellResult`) or is such a DataFrame.
    truth : pandas.DataFrame, optional
        Columns cohort, time, tau (and ``metric``, as in the lab's ``truth.parquet``).
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
            rows.append({"estimator": name, **_scores(
                part["estimate"].to_numpy(float), part["tau"].to_numpy(float),
                part["ci_lower"].to_numpy(float), part["ci_upper"].to_numpy(float)),
                "reference": "truth"})
    else:
        if len(names) < 2:
            raise ParameterError("compare without a truth needs at least two estimators.")
        wide = long.pivot_table(index=["cohort", "time"], columns="estimator",
                                values="estimate", aggfunc="first")
        for name in names:
            part = long[long["estimator"] == name].set_index(["cohort", "time"])
            others = wide.drop(columns=name).mean(axis=1).reindex(part.index)
            rows.append({"estimator": name, **_scores(
                part["estimate"].to_numpy(float), others.to_numpy(float),
                part["ci_lower"].to_numpy(float), part["ci_upper"].to_numpy(float)),
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
