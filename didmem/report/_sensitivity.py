"""The report's sensitivity section: didmem.sensitivity's intervals, breakdown and figure."""

from __future__ import annotations

import html
from typing import Mapping

import numpy as np

from ..errors import EstimationError, ParameterError
from ._html import figure_block, figure_png, table

__all__ = ["sensitivity_options", "check_sensitivity", "compute_sensitivity", "sensitivity_html"]


def sensitivity_options() -> list[str]:
    """The keywords of :func:`didmem.sensitivity` (its signature, the one source) that the
    report passes on: all but the data."""
    from .._validation import defaults_of
    from ..honest import sensitivity

    return list(defaults_of(sensitivity))


def check_sensitivity(options):
    """The report's ``sensitivity`` argument, checked (None stays None)."""
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise ParameterError("sensitivity must be a mapping of didmem.sensitivity's arguments, "
                             f"e.g. {{'restriction': 'relative_magnitudes', 'm': [0, 1]}}; got "
                             f"{type(options).__name__}.")
    known = sensitivity_options()
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ParameterError(f"Unknown sensitivity option(s) {unknown}; choose from {known}.")
    if "m" not in options:
        raise ParameterError("The report's sensitivity section needs 'm', the values of M "
                             "(smoothness) or Mbar (relative magnitudes).")
    return dict(options)


def compute_sensitivity(result, options):
    """``(SensitivityResult, "")``, or ``(None, why)`` when the result does not suit it."""
    from ..honest import sensitivity

    try:
        return sensitivity(result.aggregate("dynamic"), **options), ""
    except EstimationError as exc:  # the result does not suit it; other options are the caller's
        return None, str(exc)


def sensitivity_html(s, why: str) -> str:
    """The section for a computed analysis ``s``, or its reason ``why`` it is missing."""
    from ..honest.result import VARIANT_TEXT
    from ..results.plotting import plot_sensitivity

    head = "<h3>Sensitivity to violations of parallel trends</h3>"
    if s is None:
        return head + f"<p>Not available: {html.escape(why)}</p>"
    bound = "M" if s.restriction == "smoothness" else "Mbar"
    used = s.target[s.target != 0]
    target = (f"the effect at event time {used.index[0]:g}" if used.size == 1 else
              "the weighted average of event times " + ", ".join(f"{e:g}" for e in used.index))
    if s.breakdown == 0:
        reading = "the original interval already contains zero"
    elif np.isinf(s.breakdown):
        reading = "no bound searched makes the interval contain zero"
    else:
        reading = (f"the conclusion that {target} differs from zero holds for {bound} below "
                   f"{s.breakdown:.4g} and no further")
    restriction = ("smoothness (the violation's slope changes by at most M per period)"
                   if s.restriction == "smoothness" else
                   "relative magnitudes (each post-treatment change of the violation at most "
                   "Mbar times the largest pre-treatment one)")
    if s.variant is not None:
        restriction += ", with " + VARIANT_TEXT[s.variant]
    caption = (f"Each bar is the {1 - s.alpha:.0%} confidence interval of {html.escape(target)} "
               f"when parallel trends may fail by up to {bound}; the grey bar assumes they hold. "
               "Where a bar crosses the dashed zero line the conclusion no longer holds.")
    return (head + f"<p>{1 - s.alpha:.0%} confidence intervals of {html.escape(target)} under "
            f"{html.escape(restriction)}, Rambachan &amp; Roth (2023). Breakdown {bound} = "
            f"{s.breakdown:.4g}: {html.escape(reading)}.</p>" + table(s.to_frame())
            + "<div class='figs'>" + figure_block(figure_png(plot_sensitivity(s)),
                                                  "sensitivity figure", caption) + "</div>")
