"""The paper's figures as functions (matplotlib, imported lazily: ``pip install 'didmem[plot]'``).

Every function takes a result (a fitted :class:`~didmem.GroupTimeResult` or one read back
with :func:`didmem.load_result`) and an optional matplotlib ``ax``, draws on it (on a new
figure when ``ax`` is None) and returns the Axes.
"""

from __future__ import annotations

import textwrap

from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .._outcomes import outcome_label, outcome_unit
from .._validation import Boolean, Integral, Interval, OneOf, Satisfies, validate_params
from ..errors import ParameterError, optional_import
from .profiles import profile_correlation

__all__ = [
    "plot_profile",
    "plot_exposure_profiles",
    "plot_instantaneous",
    "plot_persistent",
    "plot_residual",
    "plot_profile_correlation",
    "plot_pretrends",
    "plot_power_analysis",
    "plot_sensitivity",
    "plot_dose_response",
    "plot_runs",
    "plot_slopes",
    "plot_difference",
    "plot_membership_auc",
    "plot_event_study",
    "plot_result",
    "PLOTS",
]

BAND_COLOR = "#1f5a96"


def _pyplot():
    optional_import("matplotlib", "plot")
    return optional_import("matplotlib.pyplot", "plot")


def _axes(ax, figsize=(6.4, 4.2)):
    if ax is not None:
        return ax
    plt = _pyplot()
    _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _fmt(v) -> str:
    v = float(v)
    return f"{v:.0f}" if v == int(v) else f"{v:g}"


def _ticks(ax, axis: str, labels: Sequence, max_ticks: int = 10) -> None:
    n = len(labels)
    step = max(1, int(np.ceil(n / max_ticks)))
    pos = np.arange(0, n, step)
    text = [_fmt(labels[i]) for i in pos]
    if axis == "x":
        ax.set_xticks(pos, text, rotation=45 if n > 6 else 0)
    else:
        ax.set_yticks(pos, text)


def _is_axes(value) -> bool:
    return value is None or (hasattr(value, "figure") and hasattr(value, "plot"))


def _is_color(value) -> bool:
    colors = optional_import("matplotlib.colors", "plot")
    return isinstance(value, (str, tuple)) and colors.is_color_like(value)


def _is_cmap(value) -> bool:
    matplotlib = optional_import("matplotlib", "plot")
    colors = optional_import("matplotlib.colors", "plot")
    return isinstance(value, colors.Colormap) or (isinstance(value, str)
                                                  and value in matplotlib.colormaps)


_AX = Satisfies(_is_axes, "None or a matplotlib Axes")
_COLOR = Satisfies(_is_color, "a matplotlib colour, such as 'C0' or '#1f5a96'")
_CMAP = Satisfies(_is_cmap, "the name of a matplotlib colour map, such as 'RdBu_r'")
_COLUMN = Satisfies(lambda v: isinstance(v, str) and v != "",
                    "the name of a column of the result's to_frame(), such as 'estimate'")
_TIME = Interval(allow_none=True)
_PROFILE = {"significant_only": Boolean(), "post_only": Boolean(), "value": _COLUMN,
            "cmap": _CMAP}


def _column(frame, value: str, func: str):
    if value not in frame.columns or not pd.api.types.is_numeric_dtype(frame[value]):
        numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]
        raise ParameterError(f"The 'value' parameter of {func} must be a numeric column of "
                             f"the result's to_frame(), one of {numeric}. Got {value!r}.")


_DRAWN_ELSEWHERE = {
    "ProfileDifference": "draw it with plot_difference(difference, aggregation)",
    "AggregateDifference": "draw the difference with plot_difference(difference, aggregation)",
    "ModeratorResult": "draw it with plot_slopes(slopes)",
    "Heterogeneity": "draw a subgroup's profile from heterogeneity.results[group], or the "
                     "difference of two with plot_difference(heterogeneity.difference(a, b))",
}
"""Results of contrasts that have ``to_frame`` and ``aggregate`` but other cells: the
figure that draws each."""


def _result(value, func: str, param: str = "result"):
    """A fitted or saved result; anything else is refused by name, a results file's path
    with how to read it (plotting reads results only: it cannot import their reader, whose
    results import plotting to draw themselves)."""
    import os

    drawn_elsewhere = _DRAWN_ELSEWHERE.get(type(value).__name__)
    if drawn_elsewhere:  # has to_frame and aggregate, but not the group-time cells
        raise ParameterError(f"The {param!r} parameter of {func} must be a fitted or saved "
                             f"result of cells; got a {type(value).__name__}: "
                             f"{drawn_elsewhere}.")
    if hasattr(value, "to_frame") and hasattr(value, "aggregate"):
        return value
    if isinstance(value, (str, os.PathLike)):
        raise ParameterError(
            f"The {param!r} parameter of {func} takes a fitted or saved result, not the path "
            f"{os.fspath(value)!r}; read the file first: {func}(didmem.load_result(path)), or "
            "didmem.load_result(path).plot(figure)."
        )
    raise ParameterError(
        f"The {param!r} parameter of {func} must be a fitted or saved result (such as a "
        "GroupTimeResult, from DiDEstimator().fit or didmem.load_result). Got "
        f"{type(value).__name__}."
    )


def _band_label(agg) -> str:
    return f"{agg.band} {'band' if agg.band == 'simultaneous' else 'intervals'}"


@validate_params(_PROFILE | {"ax": _AX, "end_of_epoch": _TIME, "colorbar": Boolean()},
                 owner="plot_profile")
def plot_profile(result, *, ax=None, significant_only: bool = True, post_only: bool = True,
                 end_of_epoch: float | None = None, value: str = "estimate", cmap: str = "RdBu_r",
                 colorbar: bool = True):
    """Heatmap of the memorisation profile tau(g, c): treatment step by checkpoint.

    Parameters
    ----------
    result : GroupTimeResult
        A fitted result, or a saved one read with :func:`didmem.load_result`.
    ax : matplotlib.axes.Axes, optional
    significant_only : bool
        Mask the cells whose band covers zero (drawn as the background), as in the paper.
    post_only : bool
        Mask the pre-treatment cells (c < g); see :func:`plot_pretrends` for those.
    end_of_epoch : float, optional
        A checkpoint to mark with a dashed vertical line (the end of the first epoch).
    value : str
        The column of :meth:`GroupTimeResult.to_frame` to draw.
    cmap : str
        A diverging colour map; the colour scale is symmetric around zero.
    colorbar : bool

    Returns
    -------
    matplotlib.axes.Axes
        The image is ``ax.images[0]``; its masked entries are the hidden cells.
    """
    result = _result(result, "plot_profile")
    full = result.to_frame()
    _column(full, value, "plot_profile")
    frame = full
    hide = np.zeros(len(frame), dtype=bool)
    if significant_only:
        hide |= ~frame["significant"].to_numpy(bool)
    if post_only:
        hide |= ~frame["post"].to_numpy(bool)
    frame = frame.assign(**{value: frame[value].where(~hide)})
    cohorts = np.sort(full["cohort"].unique())
    times = np.sort(full["time"].unique())
    matrix = frame.pivot(index="cohort", columns="time", values=value).reindex(
        index=cohorts, columns=times)
    data = np.ma.masked_invalid(matrix.to_numpy(float))
    ax = _axes(ax)
    plt = _pyplot()
    cm = plt.get_cmap(cmap).with_extremes(bad="#eeeeee")
    lim = float(np.nanmax(np.abs(data.compressed()))) if data.count() else 1.0
    image = ax.imshow(data, cmap=cm, vmin=-lim, vmax=lim, aspect="auto", origin="upper",
                      interpolation="nearest")
    _ticks(ax, "x", times)
    _ticks(ax, "y", cohorts)
    ax.set_xlabel("checkpoint c")
    exposure = _exposure(result)
    ax.set_ylabel("treatment step g" if exposure == 1 else f"step g of exposure {exposure}")
    shown = "cells whose band excludes zero" if significant_only else "all cells"
    # two lines, so that a long outcome name or an exposure never pushes the title off the
    # figure (the heatmap's figure is narrow): what it is, then which cells are drawn
    what = (("" if exposure == 1 else f"Exposure {exposure}: ")
            + f"memorisation profile of {result.outcome}")
    width = max(20, int(ax.figure.get_figwidth() * 72 / (0.62 * 10)))  # characters at 10 pt
    ax.set_title(textwrap.fill(what, width) + f"\n({shown})", fontsize=10)
    if end_of_epoch is not None:
        pos = np.interp(end_of_epoch, times, np.arange(times.size))
        ax.axvline(pos, color="k", linestyle="--", linewidth=1, label="end of epoch")
    if colorbar:
        what = "tau(g, c)" if value == "estimate" else value
        ax.figure.colorbar(image, ax=ax, label=f"{what}, {outcome_unit(result.outcome)}")
    return ax


def _exposure(result) -> int:
    """Which exposure a fitted or saved result is the effect of (1 for the first)."""
    return int(dict(result.params).get("exposure", 1))


@validate_params(_PROFILE, owner="plot_exposure_profiles")
def plot_exposure_profiles(results, *, significant_only: bool = True, post_only: bool = True,
                           cmap: str = "RdBu_r", value: str = "estimate"):
    """Memorisation profiles of several exposures side by side, on one colour scale.

    Parameters
    ----------
    results : result, or sequence or mapping of results
        Fitted or saved results, e.g. of ``DiDEstimator(exposure=1)`` and ``exposure=2`` on
        one panel (see :doc:`/repeated_exposure`); drawn in the order given. One result
        draws one heatmap.
    significant_only, post_only, cmap, value
        As in :func:`plot_profile`.

    Returns
    -------
    numpy.ndarray of matplotlib.axes.Axes
        One heatmap per result; their colour scale is symmetric around zero and shared.
    """
    import os

    if isinstance(results, (str, os.PathLike)) or hasattr(results, "to_frame"):
        results = [results]  # one result (a path is refused below, by name)
    elif isinstance(results, Mapping):
        results = list(results.values())
    elif isinstance(results, (list, tuple)):
        results = list(results)
    else:
        raise ParameterError(
            "The 'results' parameter of plot_exposure_profiles must be a result, a results "
            f"file, or a list or mapping of them. Got {type(results).__name__}.")
    if not results:
        raise ParameterError("plot_exposure_profiles needs at least one result.")
    results = [_result(r, "plot_exposure_profiles", "results") for r in results]
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(results), figsize=(4.8 * len(results), 4.2),
                             layout="constrained", squeeze=False)
    axes = axes[0]
    for ax, res in zip(axes, results):
        plot_profile(res, ax=ax, significant_only=significant_only, post_only=post_only,
                     cmap=cmap, value=value, colorbar=False)
        ax.set_title(f"exposure {_exposure(res)}: {res.outcome}", fontsize=10)
    shown = [np.ma.masked_invalid(ax.images[0].get_array()) for ax in axes]
    lim = max((float(np.abs(d.compressed()).max()) for d in shown if d.count()), default=1.0)
    for ax in axes:
        ax.images[0].set_clim(-lim, lim)
    fig.colorbar(axes[-1].images[0], ax=list(axes), label=f"{value} (tau)")
    return axes


def _schedule(lr_schedule):
    if lr_schedule is None:
        return None
    if isinstance(lr_schedule, pd.Series):
        return lr_schedule.index.to_numpy(float), lr_schedule.to_numpy(float)
    if isinstance(lr_schedule, tuple) and len(lr_schedule) == 2:
        return np.asarray(lr_schedule[0], float), np.asarray(lr_schedule[1], float)
    raise ParameterError(
        "The 'lr_schedule' parameter of plot_instantaneous must be a pandas Series (step -> "
        f"learning rate) or a (steps, rates) tuple. Got {type(lr_schedule).__name__}."
    )


def _band_and_line(result, aggregation, ax, color, label, xlabel):
    """An aggregation's estimates as a line over its band, on a zero line."""
    result = _result(result, f"plot_{aggregation}")
    agg = result.aggregate(aggregation)
    t = agg.to_frame()
    key = t[agg.key_name]
    ax = _axes(ax)
    ax.axhline(0, color="0.5", linewidth=0.8)
    ax.fill_between(key, t["ci_lower"], t["ci_upper"], color=color, alpha=0.2,
                    label=_band_label(agg))
    ax.plot(key, t["estimate"], "o-", color=color, markersize=4, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{aggregation} tau\n({outcome_label(result)})")
    return ax


@validate_params({"ax": _AX, "color": _COLOR}, owner="plot_instantaneous")
def plot_instantaneous(result, *, ax=None, lr_schedule=None, color: str = BAND_COLOR):
    """Instantaneous memorisation tau(g, g) against the treatment step, with its band.

    Parameters
    ----------
    result : GroupTimeResult
    ax : matplotlib.axes.Axes, optional
    lr_schedule : pandas.Series or (steps, rates) tuple, optional
        The learning-rate schedule, drawn on a twin y axis (the paper's Figure 3 shows
        instantaneous memorisation following it).
    color : str

    Returns
    -------
    matplotlib.axes.Axes
        The main axes; the twin axis, when drawn, is ``ax.lr_axis``.
    """
    ax = _band_and_line(result, "instantaneous", ax, color, "instantaneous tau(g, g)",
                        "treatment step g")
    sched = _schedule(lr_schedule)
    handles, labels = ax.get_legend_handles_labels()
    if sched is not None:
        twin = ax.twinx()
        (line,) = twin.plot(sched[0], sched[1], color="#d95f02", linewidth=1.2,
                            label="learning rate")
        twin.set_ylabel("learning rate")
        twin.set_ylim(bottom=0)
        handles.append(line)
        labels.append("learning rate")
        ax.lr_axis = twin
    ax.legend(handles, labels, fontsize=8, loc="best")
    ax.set_title("Instantaneous memorisation", fontsize=10)
    return ax


@validate_params({"ax": _AX, "color": _COLOR}, owner="plot_persistent")
def plot_persistent(result, *, ax=None, color: str = BAND_COLOR):
    """Persistent memorisation by event time c - g > 0, with its band.

    The x axis counts training steps after treatment (the unit of the checkpoints); when the
    checkpoints are evenly spaced a second axis on top counts checkpoints.

    Returns
    -------
    matplotlib.axes.Axes
    """
    ax = _band_and_line(result, "persistent", ax, color, "persistent tau by c - g",
                        "training steps after treatment, c - g")
    times = np.sort(_result(result, "plot_persistent").to_frame()["time"].unique())
    steps = np.diff(times)
    if steps.size and steps[0] > 0 and np.allclose(steps, steps[0]):
        every = float(steps[0])
        top = ax.secondary_xaxis("top", functions=(lambda e: e / every, lambda k: k * every))
        top.set_xlabel("checkpoints after treatment", fontsize=8)
        top.tick_params(labelsize=8)
    ax.legend(fontsize=8)
    ax.set_title("Persistent memorisation", fontsize=10)
    return ax


@validate_params({"ax": _AX, "color": _COLOR, "time": _TIME}, owner="plot_residual")
def plot_residual(result, *, ax=None, color: str = BAND_COLOR, time: float | None = None):
    """Residual memorisation tau(g, T) per treatment step; significance by colour strength.

    Bars of cohorts whose band excludes zero are drawn in full colour, the others faint.

    Parameters
    ----------
    result : GroupTimeResult
    ax : matplotlib.axes.Axes, optional
    color : str
    time : float, optional
        The final checkpoint T (default: the last one).

    Returns
    -------
    matplotlib.axes.Axes
        One bar per cohort in ``ax.patches``.
    """
    result = _result(result, "plot_residual")
    agg = result.aggregate("residual") if time is None else result.aggregate("residual", time=time)
    t = agg.to_frame()
    ax = _axes(ax)
    x = np.arange(len(t))
    sig = t["significant"].to_numpy(bool)
    bars = ax.bar(x, t["estimate"], color=color, edgecolor=color)
    for bar, s in zip(bars, sig):
        bar.set_alpha(1.0 if s else 0.3)
    ax.errorbar(x, t["estimate"], yerr=[t["estimate"] - t["ci_lower"], t["ci_upper"] - t["estimate"]],
                fmt="none", ecolor="0.3", elinewidth=0.8, capsize=2)
    ax.axhline(0, color="0.5", linewidth=0.8)
    _ticks(ax, "x", t["cohort"].to_numpy())
    ax.set_xlabel("treatment step g")
    ax.set_ylabel(f"residual tau\n({outcome_label(result)})")
    last = _fmt(time if time is not None else result.to_frame()["time"].max())
    ax.set_title(f"Residual memorisation at checkpoint {last}\nsignificant in {int(sig.sum())} "
                 f"of {sig.size} cohorts (full colour)", fontsize=10)
    return ax


def _short_label(name, width: int = 28) -> str:
    """A model's label for an axis: a path's file stem, long names cut in the middle."""
    text = str(name)
    if "/" in text or text.endswith(".parquet"):
        text = text.rstrip("/").rsplit("/", 1)[-1].removesuffix(".parquet")
    return text if len(text) <= width else text[: width // 2 - 1] + "..." + text[-(width // 2 - 2):]


def _distinct_parts(names: list) -> list:
    """Names without the start and end they all share (cut at a separator), when still distinct.

    ``["runs/seed1/r.parquet", "runs/seed2/r.parquet"]`` -> ``["seed1", "seed2"]``.
    """
    import os
    import re

    if len(names) < 2:
        return names
    head = os.path.commonprefix(names)
    tail = os.path.commonprefix([n[::-1] for n in names])[::-1]
    cut_head = max((m.end() for m in re.finditer(r"[/_.\- ]", head)), default=0)
    cut_tail = min((m.start() for m in re.finditer(r"[/_.\- ]", tail)), default=len(tail))
    parts = [n[cut_head:len(n) - (len(tail) - cut_tail)] for n in names]
    return parts if all(parts) and len(set(parts)) == len(parts) else names


@validate_params({"ax": _AX, "cmap": _CMAP, "annotate": OneOf(True, False, None),
                  "labels": Satisfies(lambda v: v is None or (
                      not isinstance(v, (str, bytes)) and all(isinstance(x, str) for x in v)),
                      "None or a list of names (strings)")},
                 owner="plot_profile_correlation")
def plot_profile_correlation(corr, *results, ax=None, annotate: bool | None = None,
                             cmap: str = "viridis", labels: Sequence[str] | None = None):
    """Heatmap of the correlation of profiles across models (the paper's Figure 6).

    Parameters
    ----------
    corr : pandas.DataFrame or result
        A matrix from :func:`didmem.profile_correlation`, or the first of the results to
        compare (the others follow as positional arguments).
    ax : matplotlib.axes.Axes, optional
    annotate : bool, optional
        Write each correlation in its cell; by default up to 20 models.
    cmap : str
    labels : sequence of str, optional
        The models' names on the axes, in the matrix's order (default: its names; paths are
        shown by their file stem, long names shortened in the middle).

    Returns
    -------
    matplotlib.axes.Axes
        The figure grows with the number of models, up to 14 inches.
    """
    if not isinstance(corr, pd.DataFrame):
        corr = profile_correlation(corr, *results)
    n = len(corr)
    if labels is None:
        full = [str(c) for c in corr.columns]
        stems = [_short_label(c, width=10**6) for c in full]
        names = _distinct_parts(stems if len(set(stems)) == n else full)
        names = [_short_label(c) if len(set(stems)) == n else c[-28:] for c in names]
    else:
        names = [str(x) for x in labels]
        if len(names) != n:
            raise ParameterError(f"The 'labels' parameter of plot_profile_correlation needs one "
                                 f"name per model: {n}; got {len(names)}.")
    side = float(np.clip(0.45 * n + 3.5, 4.5, 14.0))
    ax = _axes(ax, figsize=(side + 1.2, side))
    image = ax.imshow(corr.to_numpy(float), cmap=cmap, vmin=-1, vmax=1)
    font = float(np.clip(110 / max(n, 1), 5, 9))
    ax.set_xticks(np.arange(n), names, rotation=45 if n > 2 else 0, ha="right" if n > 2 else "center",
                  fontsize=font)
    ax.set_yticks(np.arange(n), names, fontsize=font)
    if annotate if annotate is not None else n <= 20:
        for i in range(n):
            for j in range(n):
                v = corr.iat[i, j]
                ax.text(j, i, f"{v:.2f}", ha="center", va="center",
                        fontsize=float(np.clip(120 / max(n, 1), 5, 11)),
                        color="white" if v < 0.5 else "black")
    ax.figure.colorbar(image, ax=ax, label="correlation", shrink=0.8)
    cells = corr.attrs.get("n_cells")
    ax.set_title(f"Correlation of {n} profiles" + (f"\non {cells} shared cells" if cells else ""),
                 fontsize=10)
    return ax


@validate_params({"ax": _AX, "color": _COLOR, "max_cells": Integral(1),
                  "by": OneOf("auto", "cell", "event_time")}, owner="plot_pretrends")
def plot_pretrends(result, *, ax=None, by: str = "auto", max_cells: int = 300,
                   color: str = "#7570b3"):
    """Parallel-trends diagnostics: the pre-treatment cells (c < g) with their band.

    Under parallel trends (and no anticipation) every pre-treatment tau is zero.

    Parameters
    ----------
    result : GroupTimeResult
    ax : matplotlib.axes.Axes, optional
    by : {"auto", "cell", "event_time"}
        ``"cell"`` draws every pre-treatment cell by event time c - g, slightly offset per
        cohort, with the cells' band; ``"event_time"`` draws the event-study aggregation
        (``aggregate("dynamic")``, keys e < 0) with its band; ``"auto"`` takes ``"cell"`` up to
        ``max_cells`` pre-treatment cells.
    max_cells : int
    color : str

    Returns
    -------
    matplotlib.axes.Axes
        With ``by="cell"``, one error-bar container per cohort with pre-treatment cells.

    Notes
    -----
    The title gives the count of significant pre-treatment cells under the band and the
    calibrated event-time pre-test (:meth:`GroupTimeResult.pretrend_test`) with its power; R's
    Wald test only for a results file saved without it. With many pre-treatment cells per
    cohort (tens or more, against ~100 units per cohort) R's Wald test's estimated covariance
    is nearly singular and it rejects far too often. See the user guide.
    """
    result = _result(result, "plot_pretrends")
    frame = result.to_frame()
    pre = frame[~frame["post"]]
    if by == "auto":
        by = "cell" if len(pre) <= max_cells else "event_time"
    ax = _axes(ax)
    ax.axhline(0, color="0.5", linewidth=0.8)
    if by == "cell":
        cohorts = np.sort(pre["cohort"].unique())
        times = np.sort(frame["time"].unique())
        step = np.diff(times).min() if times.size > 1 else 1.0
        width = 0.6 * step
        for i, g in enumerate(cohorts):
            part = pre[pre["cohort"] == g]
            off = (i + 0.5) / len(cohorts) * width - width / 2
            ax.errorbar(part["event_time"] + off, part["estimate"],
                        yerr=[part["estimate"] - part["ci_lower"],
                              part["ci_upper"] - part["estimate"]],
                        fmt="o", color=color, alpha=0.35 + 0.65 * (i + 1) / len(cohorts),
                        markersize=3, elinewidth=0.8)
    else:
        agg = result.aggregate("dynamic")
        t = agg.to_frame()
        t = t[t["event_time"] < 0]
        ax.fill_between(t["event_time"], t["ci_lower"], t["ci_upper"], color=color, alpha=0.25,
                        label=_band_label(agg))
        ax.plot(t["event_time"], t["estimate"], "o-", color=color, markersize=3,
                label="event-study estimate (mean over cohorts)")
        ax.legend(fontsize=8)
    ax.set_xlabel("training steps relative to treatment, c - g (< 0: before treatment)")
    ax.set_ylabel(f"pre-treatment tau\n({outcome_label(result)})")
    sub = _pretest_line(result, len(pre))
    n_sig = int(pre["significant"].sum())
    ax.set_title(f"Parallel trends: {len(pre)} pre-treatment cells, {n_sig} significant "
                 f"({getattr(result, 'band', 'pointwise')} band)\n{sub}", fontsize=9)
    return ax


def _pretest_line(result, n_pre: int) -> str:
    """The calibrated event-time pre-test (as the report and summary lead with), else R's Wald."""
    try:
        test = result.pretrend_test()
    except (AttributeError, ValueError):  # a results file saved without it
        test = None
    pt = getattr(result, "pretest", None)
    if pt is None:  # membership inference, random timing: no pre-test of their own
        return f"no pre-test of parallel trends for a {type(result).__name__}"
    left_out = (f" ({n_pre - pt.df} cells without a standard error left out)"
                if pt.df and np.isfinite(pt.statistic) and pt.df < n_pre else "")
    if test is not None and np.isfinite(test.statistic):
        text = f"event-time pre-test p = {test.pvalue:.3g}"
        if test.power is not None and np.isfinite(test.power):
            text += f" (power {test.power:.2f} against a small linear trend)"
        return text + left_out
    if pt.df and np.isfinite(pt.statistic):
        # cells with zero variance have no standard error to test with
        return (f"R did's Wald pre-test W = {pt.statistic:.3g}, df = {pt.df}, "
                f"p = {pt.pvalue:.3g}{left_out}")
    return f"Wald pre-test not available ({pt.note})"


def _kind(name: str, *attributes: str, made_by: str) -> Satisfies:
    """An object of class ``name`` (told by its attributes: results import this module, so it
    cannot import their classes)."""
    return Satisfies(lambda v: type(v).__name__ == name
                     and all(hasattr(v, a) for a in attributes),
                     f"a didmem.{name} (the result of {made_by})")


@validate_params({"analysis": _kind("PowerAnalysis", "table", "recommend",
                                made_by="didmem.power_analysis"),
                  "power": Interval(0, 1, closed="neither"), "ax": _AX})
def plot_power_analysis(analysis, *, power: float = 0.8, ax=None):
    """Power and scoring cost against instances per cohort, with the recommended design.

    Parameters
    ----------
    analysis : didmem.PowerAnalysis
        The result of :func:`didmem.power_analysis`.
    power : float
        The target power: a dashed line, and the cheapest design reaching it is marked.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
        The power axes; the cost (tokens) is on its twin on the right.
    """
    ax = _axes(ax)
    t = analysis.to_frame()
    combos = t.groupby(["n_validation", "checkpoint_every"], sort=True)
    for (n_val, every), part in combos:
        part = part.sort_values("units_per_cohort")
        label = f"{n_val:g} validation, every {every:g} ckpt"
        line = ax.plot(part["units_per_cohort"], part["power"], marker="o", label=label)[0]
        if (part["power_mc_error"] > 0).any():
            ax.fill_between(part["units_per_cohort"], part["power"] - 2 * part["power_mc_error"],
                            part["power"] + 2 * part["power_mc_error"],
                            color=line.get_color(), alpha=0.15, linewidth=0)
    ax.axhline(power, color="0.4", linestyle="--", linewidth=1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("instances per cohort")
    ax.set_ylabel(f"power ({analysis.target}, {analysis.method})")
    cost = ax.twinx()
    for (n_val, every), part in combos:
        part = part.sort_values("units_per_cohort")
        cost.plot(part["units_per_cohort"], part["tokens"], color="0.55", linestyle=":",
                  marker=".")
    cost.set_ylabel("tokens scored (dotted)")
    title = f"{analysis.target} memorisation: power and cost"
    if (t["power"] >= power).any():
        best = analysis.recommend(power)
        ax.plot([best["units_per_cohort"]], [best["power"]], marker="*", markersize=16,
                color="#c0392b", linestyle="none", label="recommended", zorder=5)
        title += (f"\nrecommended: {best['units_per_cohort']:g} per cohort, "
                  f"{best['n_validation']:g} validation, {best['tokens']:.3g} tokens")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    return ax


@validate_params({"result": _kind("DoseResponseResult", "table", "at",
                                  made_by="didmem.dose_response"),
                  "time": _TIME, "ax": _AX, "color": _COLOR})
def plot_dose_response(result, *, time=None, ax=None, color: str = BAND_COLOR):
    """The cumulative effect of ``d`` exposures against none, by dose, with its band.

    Parameters
    ----------
    result : didmem.DoseResponseResult
        The result of :func:`didmem.dose_response`.
    time : optional
        The checkpoint to draw (the last by default).
    ax : matplotlib Axes, optional
    color : str

    Returns
    -------
    matplotlib Axes
        Estimates against ``log2(1 + d)`` (labelled by ``d``), the band as error bars and a
        line at zero: a log-linear dose-response is a straight line.
    """
    ax = _axes(ax)
    rows = result.at(time)
    x = np.log2(1.0 + rows.index.to_numpy(dtype=float))
    est = rows["estimate"].to_numpy()
    err = np.vstack([est - rows["ci_lower"].to_numpy(), rows["ci_upper"].to_numpy() - est])
    ax.errorbar(x, est, yerr=err, color=color, marker="o", capsize=3, linewidth=1.2)
    ax.axhline(0.0, color="0.5", linewidth=0.8)
    ax.set_xticks(x, [_fmt(d) for d in rows.index])
    ax.set_xlabel("exposures d (log scale: log2(1 + d))")
    ax.set_ylabel(f"effect of d exposures vs none ({result.outcome})")
    shown = result.table["time"].max() if time is None else time
    ax.set_title(f"dose-response at checkpoint {_fmt(shown)}; {result.band} "
                 f"{100 * (1 - result.alpha):g}% band", fontsize=10)
    return ax


@validate_params({"sensitivity": _kind("SensitivityResult", "intervals", "breakdown",
                                       made_by="didmem.sensitivity"),
                  "ax": _AX, "color": _COLOR})
def plot_sensitivity(sensitivity, *, ax=None, color: str = BAND_COLOR):
    """Robust confidence intervals against ``M`` (or ``Mbar``), the original interval first.

    As in Rambachan & Roth (2023, Figures 4-6): one vertical interval per value of the
    restriction's bound, the interval under exact parallel trends at the left in grey, a
    horizontal line at zero and the breakdown value in the title.

    Parameters
    ----------
    sensitivity : didmem.SensitivityResult
        The result of :func:`didmem.sensitivity`.
    ax : matplotlib Axes, optional
    color : str
        Colour of the robust intervals.

    Returns
    -------
    matplotlib Axes
    """
    ax = _axes(ax)
    t = sensitivity.to_frame()
    labels = ["original"] + [_fmt(m) for m in t["m"].iloc[1:]]
    pos = np.arange(len(t))
    for i, row in enumerate(t.itertuples()):
        c = "0.45" if i == 0 else color
        ax.plot([i, i], [row.lower, row.upper], color=c, linewidth=3, solid_capstyle="butt")
        ax.plot([i, i], [row.lower, row.upper], color=c, marker="_", markersize=12,
                linestyle="none")
    ax.axhline(0, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_xticks(pos, labels, rotation=45 if len(labels) > 8 else 0)
    bound = "M" if sensitivity.restriction == "smoothness" else "Mbar"
    ax.set_xlabel(f"{bound} ({sensitivity.restriction.replace('_', ' ')})")
    ax.set_ylabel(f"{1 - sensitivity.alpha:.0%} confidence interval")
    method = t["method"].iloc[-1] if len(t) > 1 else ""
    if getattr(sensitivity, "variant", None):
        method += f", {sensitivity.variant}"
    ax.set_title(f"Sensitivity to violations of parallel trends ({method})\n"
                 f"breakdown {bound} = {sensitivity.breakdown:.3g}", fontsize=9)
    return ax


def plot_runs(result, *, event_time: float = 0.0, ax=None):
    """Each run's estimates beside the pooled profile and the within-instance comparison.

    At one event time ``e = c - g`` (0: instantaneous memorisation), by cohort ``g``: each
    run's DiD estimate (small dots), the pooled estimate with its band (runs a random
    factor; black) and the within-instance estimate with its band (red squares), where it
    has a cell.

    Parameters
    ----------
    result : RunsResult
        From :class:`~didmem.RunsEstimator` or :func:`didmem.load_result`.
    event_time : float
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not (hasattr(result, "per_run") and hasattr(result, "pooled")):
        raise ParameterError(f"plot_runs draws a RunsResult (RunsEstimator().fit or "
                             f"didmem.load_result of its file); got {type(result).__name__}.")
    ax = _axes(ax)
    pooled = result.pooled.to_frame()
    pooled = pooled[pooled["event_time"] == event_time]
    if pooled.empty:
        raise ParameterError(f"plot_runs: no pooled cell at event time {event_time!r}; the "
                             "event times are "
                             f"{sorted(result.pooled.to_frame()['event_time'].unique())}.")
    cohorts = np.sort(pooled["cohort"].unique())
    x = {g: i for i, g in enumerate(cohorts)}
    n_runs = len(result.runs)
    for j, run in enumerate(result.runs):
        frame = result.per_run[run].to_frame()
        frame = frame[(frame["event_time"] == event_time) & frame["cohort"].isin(cohorts)]
        offset = -0.3 + 0.6 * j / max(n_runs - 1, 1)
        ax.plot([x[g] + offset for g in frame["cohort"]], frame["estimate"], ".",
                color="0.55", markersize=5, label="each run" if j == 0 else None)
    for frame, color, marker, label, shift in (
            (pooled, "k", "o", f"pooled ({result.pooled.band} band)", -0.08),
            (result.within.to_frame(), "tab:red", "s",
             f"within-instance ({result.within.band} band)", 0.08)):
        frame = frame[(frame["event_time"] == event_time) & frame["cohort"].isin(cohorts)
                      & np.isfinite(frame["estimate"])]
        pos = np.array([x[g] + shift for g in frame["cohort"]])
        est = frame["estimate"].to_numpy()
        err = np.vstack([est - frame["ci_lower"].to_numpy(), frame["ci_upper"].to_numpy() - est])
        ax.errorbar(pos, est, yerr=err, fmt=marker, color=color, capsize=3, label=label)
    ax.axhline(0, color="0.7", linewidth=0.8)
    ax.set_xticks(range(cohorts.size))
    ax.set_xticklabels([_fmt(g) for g in cohorts], rotation=45 if cohorts.size > 8 else 0)
    ax.set_xlabel("treatment step g")
    ax.set_ylabel(f"tau(g, g + {_fmt(event_time)}), {outcome_unit(result.outcome)}")
    ax.set_title(f"{n_runs} runs of {result.outcome}: event time {_fmt(event_time)}",
                 fontsize=10)
    ax.legend(fontsize=8)
    return ax


def _slope_frame(value) -> bool:
    if hasattr(value, "aggregate") and hasattr(value, "moderator"):
        return True
    return isinstance(value, pd.DataFrame) and {"event_time", "slope", "ci_lower",
                                                "ci_upper"} <= set(value.columns)


@validate_params({"slopes": Satisfies(_slope_frame, "a ModeratorResult (didmem.moderator_slopes)"
                                      " or its aggregate('dynamic') frame"),
                  "ax": _AX, "color": _COLOR}, owner="plot_slopes")
def plot_slopes(slopes, *, ax=None, color: str = BAND_COLOR):
    """The slope of memorisation on a moderator by event time, with its band.

    Parameters
    ----------
    slopes : ModeratorResult or pandas.DataFrame
        From :func:`didmem.moderator_slopes`, or its ``aggregate("dynamic")`` table
        (columns event_time, slope, ci_lower, ci_upper; an ``overall`` row is left out).
    ax : matplotlib.axes.Axes, optional
    color : str

    Returns
    -------
    matplotlib.axes.Axes
    """
    name = getattr(slopes, "moderator", "the moderator")
    t = slopes.aggregate("dynamic") if hasattr(slopes, "aggregate") else slopes
    if "overall" in t.columns:
        t = t[~t["overall"].astype(bool)]
    ax = _axes(ax)
    ax.axhline(0, color="0.5", linewidth=0.8)
    ax.fill_between(t["event_time"], t["ci_lower"], t["ci_upper"], color=color, alpha=0.2,
                    label="simultaneous band")
    ax.plot(t["event_time"], t["slope"], "o-", color=color, markersize=4,
            label=f"slope on {name}")
    ax.set_xlabel("event time, c - g")
    ax.set_ylabel(f"d tau / d {name}")
    ax.legend(fontsize=8)
    ax.set_title(f"Memorisation by {name}: slope by event time", fontsize=10)
    return ax


def _difference_like(value) -> bool:
    return hasattr(value, "aggregate") and hasattr(value, "labels") and hasattr(value, "sentence")


@validate_params({"difference": Satisfies(_difference_like, "a ProfileDifference "
                                          "(didmem.compare_profiles)"),
                  "aggregation": Satisfies(lambda v: isinstance(v, str), "an aggregation's name"),
                  "ax": _AX, "color": _COLOR}, owner="plot_difference")
def plot_difference(difference, aggregation: str = "instantaneous", *, ax=None,
                    color: str = BAND_COLOR):
    """The difference of two profiles' aggregation by key, with its simultaneous band.

    Parameters
    ----------
    difference : ProfileDifference
        From :func:`didmem.compare_profiles`.
    aggregation : str
        An aggregation with keys (``instantaneous``, ``persistent``, ``residual``, ...).
    ax : matplotlib.axes.Axes, optional
    color : str

    Returns
    -------
    matplotlib.axes.Axes
    """
    agg = difference.aggregate(aggregation)
    if agg.key_name is None:
        raise ParameterError(f"plot_difference draws an aggregation with keys; "
                             f"{aggregation!r} has none (use its overall value).")
    t = agg.to_frame()
    a, b = difference.labels
    ax = _axes(ax)
    ax.axhline(0, color="0.5", linewidth=0.8)
    key = t[agg.key_name]
    ax.fill_between(key, t["ci_lower"], t["ci_upper"], color=color, alpha=0.2,
                    label="simultaneous band")
    ax.plot(key, t["difference"], "o-", color=color, markersize=4, label=f"{a} - {b}")
    ax.set_xlabel(agg.key_name.replace("_", " "))
    ax.set_ylabel(f"difference of {agg.aggregation} tau")
    ax.legend(fontsize=8)
    ax.set_title(textwrap.fill(difference.sentence(aggregation), 70), fontsize=8)
    return ax


@validate_params({"result": _kind("MembershipResult", "auc", "cell_auc",
                                  made_by="didmem.MembershipInferenceEstimator().fit"),
                  "ax": _AX, "color": _COLOR})
def plot_membership_auc(result, *, ax=None, color: str = BAND_COLOR):
    """The membership AUC at each checkpoint with its interval, against chance (0.5).

    Parameters
    ----------
    result : didmem.MembershipResult
        The result of :class:`~didmem.MembershipInferenceEstimator`, fitted or read back with
        :func:`didmem.load_result`.
    ax : matplotlib Axes, optional
    color : str

    Returns
    -------
    matplotlib Axes
    """
    ax = _axes(ax)
    auc = result.auc
    auc = auc[auc["auc"].notna()]
    t = auc["time"].to_numpy(float)
    ax.fill_between(t, auc["ci_lower"], auc["ci_upper"], color=color, alpha=0.2, linewidth=0,
                    label=f"{100 * (1 - result.alpha):g}% interval (pointwise)")
    ax.plot(t, auc["auc"], color=color, marker="o", label="membership AUC")
    ax.axhline(0.5, color="0.4", linestyle="--", linewidth=1, label="chance")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("checkpoint c")
    ax.set_ylabel("AUC, members against non-members")
    members = dict(result.params).get("members", "trained")
    ax.set_title(f"Membership inference by {result.outcome} (members: {members})", fontsize=10)
    ax.legend(fontsize=8)
    return ax


@validate_params({"ax": _AX, "color": _COLOR, "pre_color": _COLOR}, owner="plot_event_study")
def plot_event_study(result, *, ax=None, color: str = BAND_COLOR, pre_color: str = "#7f7f7f"):
    """The event study: the effect by event time e = c - g, before and after treatment together
    (R did's ``ggdid`` of ``aggte(type = "dynamic")``), with the aggregation's band.

    Pre-treatment event times (e < 0) are grey: with parallel trends their effect is zero, so
    a band that excludes zero there is evidence against the assumption; e >= 0 is the
    memorisation profile averaged over cohorts. The title gives the calibrated event-time
    pre-test.

    Parameters
    ----------
    result : GroupTimeResult
        A fitted result, or a saved one read with :func:`didmem.load_result` (its
        ``"dynamic"`` aggregation).
    ax : matplotlib.axes.Axes, optional
    color, pre_color : str
        The post- and pre-treatment estimates' colours.

    Returns
    -------
    matplotlib.axes.Axes
        The estimates are ``ax.containers`` (errorbars: pre-treatment first, when any).
    """
    result = _result(result, "plot_event_study")
    agg = result.aggregate("dynamic")
    t = agg.to_frame()
    ax = _axes(ax)
    ax.axhline(0, color="0.5", linewidth=0.8)
    e = t["event_time"].to_numpy(float)
    for rows, c, label in ((e < 0, pre_color, "before treatment (e < 0)"),
                           (e >= 0, color, "after treatment (e >= 0)")):
        if not rows.any():
            continue
        part = t[rows]
        ax.errorbar(part["event_time"], part["estimate"],
                    yerr=[part["estimate"] - part["ci_lower"], part["ci_upper"] - part["estimate"]],
                    fmt="o", color=c, markersize=4, capsize=3, label=label)
    if (e < 0).any() and (e >= 0).any():
        ax.axvline((e[e < 0].max() + e[e >= 0].min()) / 2, color="0.6", linestyle=":",
                   linewidth=1)  # between the last pre- and the first post-treatment time
    ax.set_xlabel("event time e = c - g (training steps since treatment)")
    ax.set_ylabel(f"tau by event time\n({outcome_label(result)})")
    alpha = getattr(agg, "alpha", None)  # a random-timing aggregation keeps its fit's
    if alpha is None:
        alpha = float(dict(getattr(result, "params", {})).get("alpha", 0.05))
    level = f"{100 * (1 - alpha):g}%"
    kind = getattr(agg, "band", None)
    band = (f"{level} simultaneous band" if kind == "simultaneous"
            else f"pointwise {level} intervals" if kind is not None
            else f"the estimator's {level} band")
    pre = sum(1 for v in e if v < 0)
    ax.set_title(f"Event study ({band})\n" + _pretest_line(result, pre), fontsize=9)
    ax.legend(fontsize=8)
    return ax


PLOTS: dict[str, Callable] = {
    "profile": plot_profile,
    "instantaneous": plot_instantaneous,
    "persistent": plot_persistent,
    "residual": plot_residual,
    "pretrends": plot_pretrends,
    "event_study": plot_event_study,
}
"""The single-result figures by name (``didmem plot --figure``)."""


def plot_result(result, figure: str = "profile", **options):
    """Draw the figure ``figure`` (a key of :data:`PLOTS`) of a fitted or saved result.

    ``options`` (``ax=``, ``lr_schedule=``, ...) go to the plotting function; returns the
    matplotlib Axes. This is what ``result.plot(figure)`` calls.
    """
    if not isinstance(figure, str) or figure not in PLOTS:
        raise ParameterError(f"Unknown figure {figure!r}; choose from {sorted(PLOTS)}.")
    return PLOTS[figure](_result(result, "plot_result"), **options)
