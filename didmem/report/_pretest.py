"""The pre-test of parallel trends in words: the calibrated test, its power, what it cannot rule out.

A pre-test that passes with little power proves little (Roth 2022): beside the p-value the
report gives the linear pre-trend the test would detect with 80% power, so the reader can
set it against the size of the effect.
"""

from __future__ import annotations

import html

import numpy as np

from ._html import fmt

__all__ = ["calibrated_test", "detectable_drift", "pretest_html", "WALD_CAVEAT_DF"]

WALD_CAVEAT_DF = 100
"""From this many pre-treatment cells on, R's Wald test is flagged as over-rejecting."""


def calibrated_test(result):
    """The result's calibrated pre-test, or None (a results file saved without it)."""
    try:
        return result.pretrend_test()
    except (AttributeError, ValueError):
        return None


def _power_curve(test):
    """Power of the Wald test as a function of its noncentrality, or None."""
    from ..inference.pretrend.statistics import noncentral_power

    if test.df is None or not test.df:
        return None
    p, alpha, d2 = float(test.df), float(test.power_alpha), test.df_denominator
    return lambda lam: noncentral_power(lam, p, alpha, None if d2 is None else float(d2))


def detectable_drift(test, power: float = 0.8) -> float | None:
    """The linear pre-trend per period that the test detects with probability ``power``.

    The test's stated power against its drift ``d`` fixes the noncentrality ``lambda_0`` of
    that drift; a drift ``s d`` has noncentrality ``s^2 lambda_0`` (the statistic is a
    quadratic form), so the drift detected with ``power`` is ``d sqrt(lambda / lambda_0)``.
    None when the test has no stated power.
    """
    if test is None or test.power is None or test.drift is None:
        return None
    curve = _power_curve(test)
    stated = float(test.power)
    if curve is None or not np.isfinite(stated) or stated <= test.power_alpha + 1e-9:
        return None

    def solve(target):  # the power increases with the noncentrality: bracket, then bisect
        lo, hi = 0.0, 1.0
        while curve(hi) < target:
            lo, hi = hi, 2.0 * hi
            if hi > 1e8:
                return np.nan
        while hi - lo > 1e-12 * hi:
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if curve(mid) < target else (lo, mid)
        return 0.5 * (lo + hi)

    lam0, lam = solve(stated), solve(power)
    if not (np.isfinite(lam0) and np.isfinite(lam) and lam0 > 0):
        return None
    return float(test.drift) * float(np.sqrt(lam / lam0))


def _verdict(pvalue: float, alpha: float, power: float | None) -> tuple[str, str]:
    level = f"{100 * alpha:g}%"
    if pvalue < alpha:
        return "warn", (f"parallel trends rejected at the {level} level: read the profile with "
                        "care")
    if power is not None and np.isfinite(power) and power < 0.5:
        return "warn", (f"no evidence against parallel trends at the {level} level, but with "
                        f"power {power:.2f} the test says little")
    return "ok", f"no evidence against parallel trends at the {level} level"


def pretest_sentence(result, test, scale: float | None, unit: str) -> str:
    """The finding's line on the pre-test (HTML): p-value, power, the trend it cannot rule out."""
    if test is None or not np.isfinite(test.statistic):
        note = "" if test is None else f" ({html.escape(test.note)})"
        return f"No calibrated pre-test of parallel trends is available{note}."
    cls, verdict = _verdict(test.pvalue, float(result.alpha), test.power)
    text = (f"Pre-test of parallel trends (event-time Wald over {test.n_restrictions} "
            f"pre-treatment event times): p = {test.pvalue:.3g}, "
            f"<span class='{cls}'>{verdict}</span>.")
    drift = detectable_drift(test)
    if drift is not None:
        text += (f" Its power is {test.power:.2f} against a linear pre-trend of "
                 f"{fmt(test.drift)} {html.escape(unit)} per checkpoint interval; it would "
                 f"detect a trend of {fmt(drift)} per interval with 80% power, so a smaller "
                 "violation of parallel trends cannot be ruled out")
        if scale is not None and scale > 0:
            text += (f": in one interval such a trend moves a cell by {100 * drift / scale:.0f}% "
                     "of the mean instantaneous effect")
        text += "."
    return text


def pretest_html(result) -> str:
    """The pre-test section: the calibrated test first, the band's count, then R's Wald test."""
    test = calibrated_test(result)
    frame = result.to_frame()
    pre = frame[~frame["post"]]
    parts = []
    if test is not None:
        line = html.escape(test.describe())
        parts.append(f"<p>{line[:1].upper() + line[1:]}.</p>")
    parts.append(f"<p>{int(pre['significant'].sum())} of {len(pre)} pre-treatment cells are "
                 f"significant under the {html.escape(result.band)} band (0 expected under "
                 "parallel trends).</p>")
    pt = result.pretest
    if not (pt.df and np.isfinite(pt.statistic)):
        parts.append(f"<p>R did's Wald pre-test is not available: {html.escape(pt.note)}.</p>")
        return "".join(parts)
    caveat = ("" if pt.df < WALD_CAVEAT_DF else
              f" <em>With {pt.df} pre-treatment cells the Wald test's covariance is nearly "
              "singular and the test rejects too often even under parallel trends (see the "
              "Inference page); the event-time test above is the calibrated one.</em>")
    lead = ("For comparison, R did's Wald test over all pre-treatment cells"
            if test is not None else "R did's Wald pre-test over all pre-treatment cells")
    parts.append(f"<p>{lead}: W = {pt.statistic:.4g}, df = {pt.df}, p = {pt.pvalue:.4g}."
                 f"{caveat}</p>")
    return "".join(parts)
