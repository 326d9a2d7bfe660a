"""The report's part for the results that are not group-time results: the cells of the other
memorisation estimators (:class:`~didmem.CellResult`: architectural, extractable,
influence, two-way fixed effects) and membership inference
(:class:`~didmem.MembershipResult`, with its AUC), and the refusal, with
what to do, of the results a report cannot take (a sensitivity or power analysis, a
dose-response)."""

from __future__ import annotations

import html

from .._outcomes import outcome_label
from ..errors import ParameterError
from ._html import figure_block, figure_png, fmt, table

__all__ = ["is_cell_result", "cell_result_html", "check_reportable"]

_ELSEWHERE = {
    "SensitivityResult": "a sensitivity analysis is reported beside the result it comes from: "
                         "pass the result and sensitivity={'m': [...]} (CLI: didmem report "
                         "RESULT --sensitivity smoothness --sensitivity-m 0,0.01), or draw it "
                         "with "
                         "didmem.results.plotting.plot_sensitivity",
    "PowerAnalysis": "a power analysis is not a fitted result: print analysis.to_frame() or "
                     "draw it with didmem.results.plotting.plot_power_analysis (didmem power "
                     "writes power.csv and power.png)",
    "DoseResponseResult": "a dose-response is not on the (cohort, checkpoint) grid: print "
                          "result.summary() or draw it with "
                          "didmem.results.plotting.plot_dose_response",
    "ProfileDifference": "a difference of two profiles is reported with them: pass the two "
                         "results, report({'a': a, 'b': b}), or print difference.summary() "
                         "and draw it with didmem.results.plotting.plot_difference",
    "Heterogeneity": "the subgroups' profiles are results of their own: report "
                     "heterogeneity.results (a dict of them), or print heterogeneity.summary()",
    "ModeratorResult": "print slopes.summary() or draw them with "
                       "didmem.results.plotting.plot_slopes",
}
"""The results a report refuses, by class name, with what to do instead."""


def is_cell_result(result) -> bool:
    """A result of cells without the group-time inference (no pre-test, no aggregations)."""
    return hasattr(result, "assumption") and hasattr(result, "cells") and not hasattr(
        result, "pretest")


def check_reportable(named) -> None:
    """Refuse, before anything is drawn, a result a report cannot take, naming it and what to
    do instead."""
    for name, res in named.items():
        kind = type(res).__name__
        if kind in _ELSEWHERE:
            raise ParameterError(f"The report takes fitted or saved results; {name!r} is a "
                                 f"{kind}: {_ELSEWHERE[kind]}.")
        if not (is_cell_result(res) or hasattr(res, "per_run")
                or (hasattr(res, "randomised") and hasattr(res, "balance_test"))
                or (hasattr(res, "to_frame") and hasattr(res, "aggregate")
                    and hasattr(res, "pretest"))):
            raise ParameterError(f"The report takes fitted or saved results (GroupTimeResult, "
                                 f"SavedResult, RunsResult, a CellResult, MembershipResult or "
                                 f"RandomTimingResult); "
                                 f"{name!r} is a {kind}.")


def _auc_finding(res) -> str:
    auc = res.auc
    rated = auc[auc["auc"].notna()]
    level = f"{100 * (1 - res.alpha):g}%"
    if rated.empty:
        return "<li>No checkpoint has both members and non-members: no AUC.</li>"
    last = rated.iloc[-1]
    above = rated[rated["ci_lower"] > 0.5]
    words = (f"<li>At the last checkpoint ({fmt(last['time'], 12)}) the score tells members "
             f"from non-members with AUC <b>{last['auc']:.3f}</b> ({level} CI "
             f"[{last['ci_lower']:.3f}, {last['ci_upper']:.3f}]; "
             f"{int(last['n_members'])} members, {int(last['n_nonmembers'])} non-members); "
             "0.5 is chance.</li>"
             f"<li>The interval lies above chance at {len(above)} of {len(rated)} "
             "checkpoints.</li>")
    cells = res.cell_auc
    pre = cells[(cells["time"] < cells["cohort"]) & cells["auc"].notna()]
    if not pre.empty:
        shifted = pre[(pre["ci_lower"] > 0.5) | (pre["ci_upper"] < 0.5)]
        words += (f"<li>Before training (c &lt; g), where the truth is 0.5, the AUC ranges "
                  f"{pre['auc'].min():.3f} to {pre['auc'].max():.3f}; its interval excludes "
                  f"0.5 in {len(shifted)} of {len(pre)} cells"
                  + (": a shift between the splits, which the implied profile reads as "
                     "memorisation." if len(shifted) else ".") + "</li>")
    return words


def cell_result_html(key: str, name: str, res, truth=None) -> list:
    """The section of one cell result: the finding, the AUC (membership inference), the
    implied profile's figure, every cell (with the truth where given) and the settings."""
    from ..results import plotting
    from ._truth import cells_with_truth, error_summary

    membership = hasattr(res, "auc") and hasattr(res, "cell_auc")
    level = f"{100 * (1 - res.alpha):g}%"
    frame = res.to_frame()
    if "post" not in frame:
        frame.insert(3, "post", frame["time"] >= frame["cohort"])
    post = frame[frame["post"]]
    items = (f"<li>{html.escape(res.estimator)} on {html.escape(outcome_label(res))}: "
             f"{len(frame)} cells ({len(post)} post-treatment), of which "
             f"{int(post['significant'].sum())} post-treatment cells have a pointwise {level} "
             "interval that excludes zero. These cells have pointwise intervals only (no "
             "simultaneous band, no aggregation, no pre-test).</li>"
             f"<li>Assumption: {html.escape(res.assumption)}</li>")
    if membership:
        items = _auc_finding(res) + items
    out = [f"<h2>{html.escape(str(name))}</h2>", f"<div class='finding'><ul>{items}</ul></div>"]
    figures = []
    if membership:
        figures.append(figure_block(
            figure_png(plotting.plot_membership_auc(res)), "membership AUC",
            f"<b>Membership AUC</b> at each checkpoint with its pointwise {level} interval: "
            "how well the score tells the instances trained on by then from the "
            "validation instances. The dashed line is chance."))
        figures.append(figure_block(
            figure_png(plotting.plot_profile(res)), "implied profile",
            "<b>Implied profile</b>: the mean score of cohort g minus the non-members' at "
            f"checkpoint c, drawn where its pointwise {level} interval excludes zero."))
    if figures:
        out.append(f"<div class='figs'>{''.join(figures)}</div>")
    if membership:
        out.append("<h3>Membership AUC per checkpoint</h3>" + table(res.auc, 4))
    if truth is not None:
        cells = cells_with_truth(res, truth)
        out.append(f"<h3>Estimates and truth</h3><p>{html.escape(error_summary(cells).describe())}"
                   ".</p>")
        frame = cells
    out.append(f"<h3>Every cell</h3><p>{len(frame)} cells (cohort g, checkpoint c); "
               f"<code>ci_lower</code>, <code>ci_upper</code>: pointwise {level} intervals.</p>"
               + table(frame.drop(columns=[c for c in ("post",) if c in frame]), 4))
    rows = [("estimator", res.estimator), ("outcome", outcome_label(res))]
    rows += [(k, v) for k, v in dict(res.params).items()]
    body = "".join(f"<tr><td class='k'>{html.escape(str(k))}</td>"
                   f"<td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    out.append(f"<h3>Settings</h3><table class='settings'>{body}</table>")
    return out
