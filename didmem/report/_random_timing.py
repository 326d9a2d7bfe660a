"""The report's section for a random-timing result (:class:`~didmem.RandomTimingEstimator`):
the estimator and the randomisation it assumes in words, the overall effect with its
design-based and Neyman standard errors, the Fisher randomisation test where it was run, the
balance test of pre-treatment outcomes, every aggregation and cell, and the settings."""

from __future__ import annotations

import html

from .._outcomes import outcome_label
from ..errors import DidmemError
from ._html import figure_block, figure_png, fmt, table

__all__ = ["is_random_timing", "random_timing_html"]

_AGGREGATIONS = (("simple", "every post-treatment cell, weighted by cohort size (staggered's "
                            "simple)"),
                 ("group", "per cohort g (staggered's cohort)"),
                 ("calendar", "per checkpoint c (staggered's calendar)"),
                 ("dynamic", "per event time c - g (staggered's eventstudy)"))


def is_random_timing(result) -> bool:
    """A result of :class:`~didmem.RandomTimingEstimator`, fitted or read from its file."""
    return hasattr(result, "randomised") and hasattr(result, "balance_test")


def _balance_words(res) -> str:
    try:
        test = res.balance_test()
    except DidmemError as exc:
        return f"<li>Balance test of pre-treatment outcomes: not available ({html.escape(str(exc))}).</li>"
    p = test.attrs["pvalue_wald"]
    verdict = ("speaks against random timing: check the order" if p < 0.05 else
               "gives no evidence against random timing")
    return (f"<li>Balance of the pre-treatment outcomes across cohorts (R staggered's "
            f"balance_checks): joint Wald p = <b>{fmt(p, 3)}</b> (df {fmt(test.attrs['df'])}), "
            f"which {verdict}.</li>")


def random_timing_html(key: str, name: str, res) -> list:
    """The section of one random-timing result (``key`` unused: no interactive table)."""
    del key
    simple = res.aggregate("simple").overall
    level = f"{100 * (1 - float(res.params.get('alpha', 0.05))):g}%"
    items = [
        f"<li>{html.escape(res.estimator)} on {html.escape(outcome_label(res))}: "
        f"{html.escape(res.estimator_words)}; {res.n_units} instances, "
        f"{res.design.cohorts.size} cohorts, {res.design.n_times} checkpoints.</li>",
        f"<li>Assumption: {html.escape(res.assumption)}</li>",
        f"<li>Overall (simple) effect <b>{simple['estimate']:.4g}</b>, design-based standard "
        f"error {simple['std_error']:.3g} (Neyman, conservative: "
        f"{simple['std_error_neyman']:.3g}; {level} interval [{simple['ci_lower']:.4g}, "
        f"{simple['ci_upper']:.4g}], from the Neyman one).</li>",
    ]
    if res.tables.n_fisher:
        items.append(
            f"<li>Fisher randomisation test ({res.tables.n_fisher} permutations of the "
            f"randomised instances' cohorts; exact under the sharp null of no effect on any "
            f"instance): the sup-t over all cells has p = <b>{fmt(res.fisher_sup_pvalue, 3)}"
            f"</b>, the simple effect p = {fmt(simple['fisher_pvalue'], 3)}; every cell, "
            f"overall aggregation, cohort, checkpoint and event time has its own "
            f"(<code>fisher_pvalue</code> in the tables below).</li>")
    else:
        items.append("<li>No Fisher randomisation test was run (n_fisher=0; on the command "
                     "line --fisher N).</li>")
    items.append(_balance_words(res))
    from ..results import plotting

    caption = ("<b>Memorisation profile</b> under random timing: tau(g, c), drawn where the "
               f"simultaneous {level} band over the cells (from the Neyman standard errors) "
               "excludes zero.")
    out = [f"<h2>{html.escape(str(name))}</h2>",
           f"<div class='finding'><ul>{''.join(items)}</ul></div>",
           "<div class='figs'>" + figure_block(figure_png(plotting.plot_profile(res)),
                                               "profile", caption) + "</div>"]
    for aggregation, what in _AGGREGATIONS:
        frame = res.aggregate(aggregation).to_frame()
        out.append(f"<h3>{aggregation.capitalize()}: {html.escape(what)}</h3>"
                   f"<p><code>std_error</code> design-based, <code>std_error_neyman</code> its "
                   f"conservative bound; <code>ci_lower</code>, <code>ci_upper</code>: the "
                   f"{level} band over the keys from the Neyman standard errors (the first "
                   "row, without a key, is the overall value where there is one).</p>"
                   + table(frame))
    cells = res.to_frame()
    out.append(f"<h3>Every cell</h3><p>{len(cells)} cells (cohort g, checkpoint c); "
               f"<code>ci_lower</code>, <code>ci_upper</code>: the simultaneous {level} band "
               "over the cells.</p>" + table(cells))
    rows = [("estimator", res.estimator), ("outcome", outcome_label(res)),
            ("randomised", res.randomised)]
    rows += [(k, "default" if v is None else v) for k, v in dict(res.params).items()
             if k not in ("outcome", "randomised")]
    body = "".join(f"<tr><td class='k'>{html.escape(str(k))}</td>"
                   f"<td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    out.append(f"<h3>Settings</h3><table class='settings'>{body}</table>")
    return out
