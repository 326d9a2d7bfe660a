"""The report page: for each result the finding in words, the key figure, the tables, the settings.

One file, no server and no network: styles and scripts inline, figures embedded as base64
PNG, the cells as JSON behind a searchable table and the heatmap's tooltips.
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

from .._outcomes import outcome_label, outcome_unit
from .._validation import Satisfies, validate_params
from .._version import __version__
from ..errors import DidmemError, ParameterError
from ._cell_result import cell_result_html, check_reportable, is_cell_result
from ._cells import CELLS_SCRIPT, cells_table_html, heatmap_html
from ._differences import differences_html
from ._finding import checkpoint_step, exposure_of, finding_html
from ._html import CSS, figure_block, figure_png, fmt, plural, table
from ._pretest import pretest_html
from ._random_timing import is_random_timing, random_timing_html
from ._runs import expand_runs, runs_html
from ._sensitivity import check_sensitivity, compute_sensitivity, sensitivity_html
from ._truth import (cells_with_truth, cohort_weights, error_summary, overlay, true_aggregate,
                     truth_scatter)

__all__ = ["render_report", "write_report", "FIGURES"]

FIGURES = ("profile", "instantaneous", "persistent", "residual", "pretrends", "event_study")
"""The figures a report draws for each result by default, in its order (``figures=`` of
:func:`render_report`; each a key of :data:`didmem.results.plotting.PLOTS`)."""

_AGGREGATIONS = (("instantaneous", "tau(g, g): the effect at the first checkpoint after training, "
           "by cohort g"),
          ("persistent", "by training steps after treatment, c - g > 0, averaged over cohorts"),
          ("residual", "tau(g, T) at the last checkpoint T, by cohort g"))


def _band_words(result) -> str:
    level = f"{100 * (1 - result.alpha):g}%"
    return (f"simultaneous {level} band" if result.band == "simultaneous"
            else f"pointwise {level} intervals")


def _cells_band(result) -> str:
    """``"simultaneous 95% band over all 56 cells"``: the interval of the cells' table."""
    n = len(result.to_frame())
    return _band_words(result).replace(" band", f" band over all {n} cells").replace(
        " intervals", " intervals of the cells")


def _captions(result, has_truth: bool, options: Mapping) -> dict:
    band = _band_words(result)
    over = ({"cohorts": f"{band} over the cohorts", "event times": f"{band} over the event times"}
            if band.startswith("simultaneous") else {"cohorts": band, "event times": band})
    unit = html.escape(outcome_unit(result.outcome))
    truth = " Red diamonds: the truth." if has_truth else ""
    step = checkpoint_step(result)
    spacing = f" (checkpoints every {fmt(step)} steps)" if step else ""
    last = fmt(result.to_frame()["time"].max())
    lr = (" The orange line is the learning rate: instantaneous memorisation tends to follow it."
          if "lr_schedule" in options.get("instantaneous", {}) else "")
    return {
        "profile": (f"<b>Memorisation profile.</b> Each coloured cell is tau(g, c) in {unit}: the "
                    "effect of training at treatment step g (row) on the outcome at checkpoint c "
                    f"(column), drawn only where the {_cells_band(result)} excludes zero; grey "
                    "cells are not significant or lie before treatment. Read the diagonal for "
                    "instantaneous memorisation and along a row for how long it lasts. Hover a "
                    "cell for its values, click it to find it in the table of cells."),
        "instantaneous": (f"<b>Instantaneous memorisation</b> tau(g, g) per cohort, in {unit}, "
                          f"with the {over['cohorts']}.{lr}{truth}"),
        "persistent": (f"<b>Persistent memorisation</b>: the effect c - g training steps after "
                       f"treatment{spacing}, averaged over cohorts, in {unit}, with the "
                       f"{over['event times']}: how fast memorisation fades.{truth}"),
        "residual": (f"<b>Residual memorisation</b> tau(g, T) at the last checkpoint T = {last}, "
                     f"in {unit}: what remains at the end. Full colour: the "
                     f"{over['cohorts']} excludes zero; faint: it does not.{truth}"),
        "event_study": (f"<b>Event study</b>: the effect by event time c - g averaged over "
                        f"cohorts, before treatment (grey, zero under parallel trends) and "
                        f"after, with the {over['event times']}, as R did's ggdid."),
        "pretrends": ("<b>Parallel trends before treatment</b>: the pre-treatment cells "
                      "(c < g), all zero in expectation when parallel trends hold, with the "
                      f"{band}. The title gives the calibrated event-time pre-test."),
    }


def _aggregate_tables(result, cells) -> str:
    parts = []
    for aggregation, what in _AGGREGATIONS:
        head = f"<h3>{aggregation.capitalize()} memorisation: {html.escape(what)}</h3>"
        try:
            agg = result.aggregate(aggregation)
        except DidmemError as exc:
            parts.append(head + f"<p>Not available: {html.escape(str(exc))}</p>")
            continue
        frame = agg.to_frame()
        if cells is not None and "tau" in cells:
            truth = true_aggregate(cells, aggregation, agg.key_name, cohort_weights(result))
            frame["true_tau"] = truth.reindex(frame[agg.key_name].to_numpy()).to_numpy()
        o = agg.overall
        level = f"{100 * (1 - agg.alpha):g}%"
        what = ("cohort", "cohorts") if agg.key_name == "cohort" else ("event time",
                                                                          "event times")
        rows = (f"the {agg.band} {level} band over the {plural(len(frame), *what)} of this "
                f"table (critical value {agg.critical_value:.3f})"
                if agg.band == "simultaneous" and len(frame) > 1
                else f"pointwise {level} intervals")
        unit = html.escape(outcome_unit(result.outcome))
        parts.append(head + f"<p>Overall {o.estimate:.4g} {unit}"
                     f" (SE {o.std_error:.3g}, pointwise {level} CI "
                     f"[{o.ci_lower:.4g}, {o.ci_upper:.4g}]). The rows' <code>ci_lower</code>, "
                     f"<code>ci_upper</code>: {rows}; the table of every cell gives each cell "
                     f"the {_cells_band(result)} instead, so the same cell's interval differs "
                     "there.</p>" + table(frame))
    return "".join(parts)


def _unavailable(result, aggregation: str) -> bool:
    try:
        result.aggregate(aggregation)
    except DidmemError:
        return True
    return False


def _figures_html(result, figures, figure_options, captions, cells) -> str:
    from ..results import plotting

    items = []
    for name in figures:
        if name == "profile":
            continue  # the key figure, drawn above with its tooltips
        if name in ("instantaneous", "persistent", "residual") and _unavailable(result, name):
            continue  # no such cells (two checkpoints: no persistent); its table says why
        if name == "event_study" and _unavailable(result, "dynamic"):
            continue
        ax = plotting.PLOTS[name](result, **dict(figure_options.get(name, {})))
        if cells is not None and name in ("instantaneous", "persistent", "residual"):
            agg = result.aggregate(name)
            truth = true_aggregate(cells, name, agg.key_name, cohort_weights(result))
            overlay(ax, truth.reindex(agg.to_frame()[agg.key_name].to_numpy()),
                    bars=name == "residual")
        items.append(figure_block(figure_png(ax), f"{name} figure", captions[name]))
    return f"<div class='figs'>{''.join(items)}</div>" if items else ""


def _truth_figure(result, cells) -> str:
    ax = truth_scatter(cells, label=outcome_label(result))
    caption = ("<b>Estimates against the truth</b>, every post-treatment cell with its "
               f"{_band_words(result)}: on the diagonal an estimate equals the truth; a bar "
               "that crosses the diagonal covers it.")
    return "<div class='figs'>" + figure_block(figure_png(ax), "estimate against truth",
                                               caption) + "</div>"


def _settings_html(result) -> str:
    settings = result.settings  # the same values for a fitted result and its saved copy
    resolved = {"cband": result.band, "multiplier": settings.multiplier}
    rows = [("estimator", result.estimator), ("outcome", outcome_label(result)),
            ("units", result.n_units), ("inference", settings.inference_line)]
    if getattr(settings, "source", ""):  # the route: a folder's moments, Ray, ...
        rows.append(("source", settings.source))
    for k, v in dict(result.params).items():
        if k in ("outcome", "lower_is_better"):
            continue  # shown resolved above
        if v is None and resolved.get(k) is not None:
            v = f"{resolved[k]} (default)"
        elif v is None:
            v = "default"
        rows.append((k, v))
    body = "".join(f"<tr><td class='k'>{html.escape(str(k))}</td>"
                   f"<td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table class='settings'>{body}</table>"


def _exposure_name(name, res, mixed: bool) -> str:
    """The result's name with its exposure: a later one always, the first in a mixed report."""
    k = exposure_of(res)
    if (k == 1 and not mixed) or "exposure" in name.lower():
        return name
    return f"{name}: exposure {k}"


def _result_html(key, name, res, *, figures, figure_options, sensitivity, truth,
                 mixed=False) -> list:
    cells = cells_with_truth(res, truth) if truth is not None else None
    truth_error = error_summary(cells) if cells is not None else None
    sens, why = (compute_sensitivity(res, sensitivity) if sensitivity is not None
                 else (None, ""))
    captions = _captions(res, cells is not None, figure_options)
    out = [f"<h2>{html.escape(_exposure_name(str(name), res, mixed))}</h2>",
           finding_html(res, sensitivity=sens, truth_error=truth_error, cells=cells)]
    frame = cells if cells is not None else res.to_frame()
    if "profile" in figures:
        out.append("<div class='figs'>" + heatmap_html(
            res, frame, key, captions["profile"], figure_options.get("profile", {})) + "</div>")
    out.append(_aggregate_tables(res, cells))
    out.append(_figures_html(res, [f for f in figures if f != "pretrends"], figure_options,
                             captions, cells))
    if cells is not None:
        out.append("<h3>Estimates and truth</h3>"
                   f"<p>{_sentence(html.escape(truth_error.describe()))}.</p>"
                   + _truth_figure(res, cells))
    out.append("<h3>Pre-test of parallel trends</h3>" + pretest_html(res))
    if "pretrends" in figures:
        out.append(_figures_html(res, ["pretrends"], figure_options, captions, None))
    if sensitivity is not None:
        out.append(sensitivity_html(sens, why))
    out.append(f"<h3>Every cell</h3><p>{len(frame)} cells (cohort g, checkpoint c); type to "
               "filter, click a column to sort. <code>ci_lower</code>, <code>ci_upper</code>: "
               f"the {_cells_band(res)}." + (" <code>true_tau</code> is the truth."
                                                   if cells is not None else "") + "</p>"
               + cells_table_html(key, len(frame)))
    out.append("<h3>Settings</h3>" + _settings_html(res))
    return out


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _named(results) -> dict:
    if isinstance(results, Mapping):
        return dict(results)
    if not isinstance(results, Sequence):
        results = [results]
    named = {}
    for i, res in enumerate(results):
        name = (getattr(res, "path", "")  # not every object has an outcome: refused later
                or f"{getattr(res, 'estimator', type(res).__name__)}:"
                   f"{getattr(res, 'outcome', i + 1)}")
        if name in named:
            name = f"{name} #{i + 1}"
        named[name] = res
    return named


def _exposures_html(named) -> list:
    """Profiles side by side when the results are of different exposures (else nothing)."""
    exposures = {name: int(dict(res.params).get("exposure", 1)) for name, res in named.items()}
    if len(set(exposures.values())) < 2:
        return []
    from ..results.plotting import plot_exposure_profiles

    src = figure_png(plot_exposure_profiles(named)[0])
    listed = ", ".join(f"{html.escape(str(n))}: exposure {k}" for n, k in exposures.items())
    return ["<h2>Profiles per exposure</h2>"
            f"<p>{listed}.</p><div class='figs'><img alt='profiles per exposure' "
            f"src='{src}'></div>"]


def _correlation_html(named) -> str:
    from ..results.plotting import plot_profile_correlation
    from ..results.profiles import profile_correlation

    try:
        corr = profile_correlation(named)
    except DidmemError as exc:
        return f"<h2>Correlation of profiles</h2><p>Not available: {html.escape(str(exc))}</p>"
    src = figure_png(plot_profile_correlation(corr))
    caption = ("Pearson correlation of the results' post-treatment cells: near 1, the "
               "profiles rise and fall together.")
    return ("<h2>Correlation of profiles</h2>"
            f"<p>On {corr.attrs['n_cells']} shared post-treatment cells.</p>"
            + table(corr.reset_index(names="result"), 3)
            + "<div class='figs'>" + figure_block(src, "correlation figure", caption,
                                                  wide=len(corr) > 4) + "</div>")


def _figure_names(value) -> bool:
    """A list of strings (which names are figures is checked by the body: "Unknown figure")."""
    return not isinstance(value, (str, bytes, Mapping)) and all(isinstance(f, str)
                                                                 for f in value)


def _figure_options(value) -> bool:
    return value is None or (isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, Mapping) for k, v in value.items()))


_REPORT = {
    "title": Satisfies(lambda v: isinstance(v, str), "a string"),
    "notes": Satisfies(lambda v: isinstance(v, str), "a string"),
    "figures": Satisfies(_figure_names, "a list of figure names of didmem.results.plotting.PLOTS "
                                        "(strings: 'profile', 'instantaneous', ...)"),
    "figure_options": Satisfies(_figure_options, "None or a mapping of figure names to "
                                                 "mappings of keyword arguments"),
    "sensitivity": Satisfies(lambda v: v is None or isinstance(v, Mapping),
                             "None or a mapping of didmem.sensitivity's arguments (m required)"),
}


@validate_params(_REPORT, owner="render_report")
def render_report(results, *, title: str = "didmem report", figures: Sequence[str] = FIGURES,
                  figure_options: Mapping[str, Mapping] | None = None, notes: str = "",
                  sensitivity: Mapping | None = None, truth=None) -> str:
    """The report as one HTML string.

    For each result: the finding in words (in how many cohorts instantaneous memorisation is
    found, how large, how long it persists, what remains, the pre-test with its power and the
    trend it cannot rule out), the profile heatmap (hover a cell for its values), the
    instantaneous, persistent and residual tables and figures, the pre-test, a searchable
    and sortable table of every cell, then the settings.

    Parameters
    ----------
    results : GroupTimeResult, SavedResult, RunsResult, CellResult, sequence or mapping of them
        One result, several, or ``{name: result}``. A random-timing result
        (:class:`~didmem.RandomTimingEstimator`, fitted or loaded) gets its own section: the
        estimator and the randomisation it assumes in words, the design-based and Neyman
        standard errors, the Fisher test where it was run, the balance test, its
        aggregations, cells and settings. A result of cells without a band
        (:class:`~didmem.CellResult`, such as the architectural estimator's, and the
        :class:`~didmem.MembershipResult` of membership inference, with its AUC) gets
        a shorter section: its finding, figures, cells and settings. A
        :class:`~didmem.RunsResult` is
        reported run by run (``"NAME: run R"``), then in a section that sets the runs side
        by side with the pooled profile, the between-run spread in words and the
        within-instance comparison.
    title : str
    figures : sequence of str
        Names from :data:`didmem.results.plotting.PLOTS`, drawn for every result; ``"profile"`` is
        the key figure at the top.
    figure_options : mapping, optional
        Keyword arguments per figure name, e.g. ``{"instantaneous": {"lr_schedule": s}}``.
    notes : str
        Plain text shown under the title (escaped).
    sensitivity : mapping, optional
        Arguments of :func:`didmem.sensitivity` (``m`` required; ``restriction``,
        ``event_time``, ``method``, ...): adds for every result a section with the intervals,
        the breakdown value and the figure, from its event-time aggregation, and the
        breakdown to the finding. A result that does not suit the analysis (no universal base
        period, no covariance) says so there.
    truth : pandas.DataFrame, optional
        The true tau(g, c) where it is known (the lab's ``truth.parquet``, the truth of
        :func:`didmem.datasets.simulate_panel`): columns ``cohort``, ``time``, ``tau`` and,
        when it holds several outcomes, ``metric`` (each result is matched with its own).
        Adds a truth column to every table, the truth on the figures, an estimate-against-truth
        figure and the error summary (RMSE, mean error, band coverage). With a ``run``
        column (the lab's ``--runs``), each run of a runs result gets its own rows and the
        pooled band's coverage of the mean truth over runs is stated.

    Returns
    -------
    str

    Raises
    ------
    ParameterError
        For an unknown figure name or sensitivity option, or a truth that lacks the
        columns, the result's outcome or any of its cells; for a result that is not a fitted
        or saved result (a sensitivity or power analysis, a dose-response: the message says
        how to show it).
    """
    from ..results.plotting import PLOTS

    unknown = [f for f in figures if f not in PLOTS]
    if unknown:
        raise ParameterError(f"Unknown figure(s) {unknown}; choose from {sorted(PLOTS)}.")
    sensitivity = check_sensitivity(sensitivity)
    named = _named(results)
    check_reportable(named)
    named, truths, runs = expand_runs(named, truth)
    title = _titled(title, named)
    figure_options = dict(figure_options or {})
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
           f"<meta name='viewport' content='width=device-width,initial-scale=1'>"
           f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
           f"<h1>{html.escape(title)}</h1>",
           f"<p class='meta'>didmem {__version__}, {stamp}; {len(named)} result(s).</p>"]
    if notes:
        out.append(f"<p>{html.escape(notes)}</p>")
    mixed = len({exposure_of(res) for res in named.values()}) > 1
    for i, (name, res) in enumerate(named.items()):
        if is_cell_result(res):  # membership inference and the other estimators' cells
            out += cell_result_html(f"r{i}", name, res, truths[name])
            continue
        if is_random_timing(res):  # design-based inference: no pre-test, own aggregations
            out += random_timing_html(f"r{i}", name, res)
            continue
        out += _result_html(f"r{i}", name, res, figures=figures, figure_options=figure_options,
                            sensitivity=sensitivity, truth=truths[name], mixed=mixed)
    for name, res in runs.items():
        out += runs_html(name, res, truth)
    out += _exposures_html(named)
    if len(named) >= 2:
        out.append(_correlation_html(named))
        out.append(differences_html(named))
    out.append(CELLS_SCRIPT)
    out.append("</body></html>")
    return "\n".join(out)


def _titled(title: str, named: Mapping) -> str:
    """The title, naming the exposure when every result is of the same later exposure."""
    exposures = {exposure_of(res) for res in named.values()}
    if len(exposures) != 1 or "exposure" in title.lower():
        return title
    k = exposures.pop()
    return title if k == 1 else f"{title}: exposure {k}"


def write_report(results, path, **options) -> Path:
    """Write :func:`render_report` to ``path`` (UTF-8) and return the path.

    The page is rendered in full before the file is opened, so a failure leaves no
    half-written report behind.

    Raises
    ------
    ParameterError
        When ``path`` does not end in ``.html`` or ``.htm``: the report is HTML only.
    """
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ParameterError(f"The report is an HTML file: its name must end in '.html' (or "
                             f"'.htm'); got {str(path)!r}. Print it to PDF from a browser.")
    text = render_report(results, **options)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path

