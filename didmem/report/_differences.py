"""The report's differences of profiles: each result against the first, in words and drawn.

Two fitted results on the same instances (two models, runs, learning rates) are compared with
:func:`didmem.compare_profiles` (paired on the instances they share); results read from files
keep no per-instance influence, and the section says so instead of a wrong band.
"""

from __future__ import annotations

import html

from ..errors import DidmemError
from ._html import figure_block, figure_png, table

__all__ = ["differences_html"]

SENTENCES = ("instantaneous", "persistent", "residual", "simple")
MAX_INFLUENCE = 20_000_000
"""Largest instances x cells influence matrix a report forms for a difference (160 MB)."""


def _too_large(*results) -> str:
    for res in results:
        cells = getattr(getattr(res, "cells", None), "size", 0)
        if isinstance(cells, int) and getattr(res, "n_units", 0) * cells > MAX_INFLUENCE:
            return (f"{res.n_units} instances x {cells} cells is more influence than a report "
                    "forms; call didmem.compare_profiles on the fitted results")
    return ""


def differences_html(named) -> str:
    """The section comparing every result with the first (empty with fewer than two)."""
    from ..contrasts import compare_profiles  # numerical: loaded when a report is drawn

    names = list(named)
    if len(names) < 2:
        return ""
    out = ["<h2>Differences of profiles</h2>"]
    first = names[0]
    for other in names[1:]:
        out.append(f"<h3>{html.escape(str(first))} − {html.escape(str(other))}</h3>")
        large = _too_large(named[first], named[other])
        if large:
            out.append(f"<p>Not computed here: {html.escape(large)}.</p>")
            continue
        try:
            diff = compare_profiles(named[first], named[other], labels=(str(first), str(other)))
            words = [diff.sentence(name) for name in SENTENCES]
            agg = diff.aggregate("instantaneous")
            test = diff.test().describe()
            src = figure_png(diff.plot("instantaneous"))
        except DidmemError as exc:
            out.append(f"<p>Not available: {html.escape(str(exc))}</p>")
            continue
        out.append("<ul>" + "".join(f"<li>{html.escape(w)}</li>" for w in words) + "</ul>")
        out.append(f"<p>Equal profiles on every post-treatment cell: "
                   f"{html.escape(test)}.</p>")
        out.append(table(agg.to_frame()))
        caption = ("Difference of instantaneous memorisation by cohort, with its simultaneous "
                   "band from the instances' joint influence functions.")
        out.append("<div class='figs'>" + figure_block(src, "difference figure", caption)
                   + "</div>")
    return "\n".join(out)
