"""The finding in words, generated from a result: what was found, how large, how long it lasts.

Every sentence is computed from the result's aggregations (instantaneous, persistent,
residual) under its band, the calibrated pre-test with its power, and, when given, the
sensitivity analysis and the truth.
"""

from __future__ import annotations

import html

import numpy as np

from .._outcomes import outcome_unit
from ..errors import DidmemError
from ._html import fmt, plural
from ._pretest import calibrated_test, pretest_sentence

__all__ = ["finding_html", "checkpoint_step", "exposure_of", "exposure_words"]


def checkpoint_step(result) -> float | None:
    """The spacing of the checkpoints when it is regular, else None."""
    times = np.sort(result.to_frame()["time"].unique())
    if times.size < 2:
        return None
    steps = np.diff(times)
    return float(steps[0]) if np.allclose(steps, steps[0]) else None


def _after(e: float, step: float | None) -> str:
    """``"60 training steps (3 checkpoints)"``."""
    text = f"{fmt(e)} training step{'' if e == 1 else 's'}"
    if step:
        text += f" ({plural(int(round(e / step)), 'checkpoint')})"
    return text


def _aggregate(result, aggregation):
    try:
        return result.aggregate(aggregation)
    except DidmemError:
        return None


def exposure_of(result) -> int:
    """Which exposure a fitted or saved result is the effect of (1: the first)."""
    return int(dict(getattr(result, "params", {}) or {}).get("exposure", 1) or 1)


def _ordinal(k: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(k, f"{k}th")


def _truths(result, agg, aggregation, cells):
    """The truth of each key of ``agg`` and of its overall value, or (None, None).

    Per key from :func:`~didmem.report._truth.true_aggregate`; the overall value averages
    them as the estimate does: by the cohorts' weights for per-cohort aggregations
    (instantaneous, residual), plainly over event times (persistent).
    """
    if cells is None or "tau" not in cells:
        return None, None
    from ._truth import cohort_weights, true_aggregate

    weights = cohort_weights(result)
    by_key = true_aggregate(cells, aggregation, agg.key_name, weights)
    keys = agg.to_frame()[agg.key_name].to_numpy()
    by_key = by_key.reindex(keys)
    if by_key.isna().any():
        return by_key, None
    if aggregation == "persistent":
        return by_key, float(by_key.mean())
    if weights is None:
        treated = cells[cells["event_time"] == 0].set_index("cohort")["n_treated"]
        w = treated.reindex(keys).to_numpy(float)
    else:
        w = np.array([weights.get(g, np.nan) for g in keys], dtype=float)
    if not np.all(np.isfinite(w)) or w.sum() <= 0:
        return by_key, None
    return by_key, float(np.dot(w, by_key.to_numpy(float)) / w.sum())


def _truth_note(value, lower=None, upper=None) -> str:
    """``"; truth 0.0603"``, with ``", outside this interval"`` when it is."""
    if value is None or not np.isfinite(value):
        return ""
    text = f"; truth {fmt(value)}"
    if lower is not None and not lower <= value <= upper:
        text += ", outside this interval"
    return text


def _truth_paren(value) -> str:
    """``" (truth 0.0603)"``, or "" where the truth is not known."""
    if value is None or not np.isfinite(value):
        return ""
    return f" (truth {fmt(value)})"


def _range(values) -> str:
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)} to {fmt(hi)}"


def _average(agg, unit, true_overall) -> str:
    """``"0.0688 nats per token (pointwise 95% CI 0.0611 to 0.0764; truth 0.0603)"``."""
    o = agg.overall
    level = f"{100 * (1 - agg.alpha):g}%"
    return (f"{fmt(o.estimate)} {html.escape(unit)} (pointwise {level} CI {fmt(o.ci_lower)} "
            f"to {fmt(o.ci_upper)}{_truth_note(true_overall, o.ci_lower, o.ci_upper)})")


def _not_significant(t, sig, unit, truth, what) -> str:
    """What the bands of the keys that are not significant cannot exclude."""
    rest = ~sig
    if not rest.any():
        return ""
    upper = float(t.loc[rest, "ci_upper"].max())
    lower = float(t.loc[rest, "ci_lower"].min())
    n = int(rest.sum())
    unit = html.escape(unit)
    which = ((f"the one {what[0]}" if n == 1 else f"all {n} {what[1]}") if n == len(rest)
             else (f"the other {what[0]}" if n == 1 else f"the other {n} {what[1]}"))
    prep = "At" if what[0] == "event time" else "In"
    if n == 1:
        text = (f" {prep} {which} the band ({fmt(lower)} to {fmt(upper)} {unit}) includes zero "
                f"but does not exclude an effect as large as {fmt(upper)}")
    else:
        text = (f" {prep} {which} the bands include zero but reach up to {fmt(upper)} {unit} "
                f"(down to {fmt(lower)}): they do not exclude effects that large")
    if truth is not None:
        true = truth.to_numpy(float)[rest]
        if np.isfinite(true).any():
            text += f" (the truth there: {_range(true)})"
    return text + "; not significant does not mean absent."


def _band_name(agg) -> str:
    """``"simultaneous 95% band over the 7 keys"``; one key's band is its pointwise interval."""
    level = f"{100 * (1 - agg.alpha):g}%"
    return (f"simultaneous {level} band over the {len(agg.keys)} keys" if agg.band ==
            "simultaneous" and len(agg.keys) > 1 else f"pointwise {level} interval")


def _instantaneous(result, unit, cells) -> tuple[str, float | None]:
    agg = _aggregate(result, "instantaneous")
    if agg is None:
        return "Instantaneous memorisation is not available for this result.", None
    t = agg.to_frame()
    truth, true_overall = _truths(result, agg, "instantaneous", cells)
    n = len(t)
    sig = (t["significant"] & (t["estimate"] > 0)).to_numpy(bool)
    neg = int((t["significant"] & (t["estimate"] < 0)).sum())
    band = _band_name(agg).replace(f"the {n} keys", f"the {plural(n, 'cohort')}")
    o = agg.overall
    text = (f"<b>Instantaneous memorisation is significant in {int(sig.sum())} of "
            f"{plural(n, 'cohort')}</b> (where the {band} excludes zero). On average it is "
            f"{_average(agg, unit, true_overall)}")
    if n > 1:
        text += f", from {fmt(t['estimate'].min())} to {fmt(t['estimate'].max())} across cohorts"
        if truth is not None and truth.notna().any():
            text += f" (truth {_range(truth.to_numpy(float))})"
    text += ": right after training on an instance, the model predicts it better by that much."
    text += _not_significant(t, sig | (t["significant"] & (t["estimate"] < 0)).to_numpy(bool),
                             unit, truth, ("cohort", "cohorts"))
    if not sig.any() and (o.ci_lower > 0 or o.ci_upper < 0):
        text += (" No single cohort's band excludes zero, but the average's pointwise "
                 "interval does: together the cohorts show an effect that each alone is too "
                 "small to show.")
    if neg:
        text += f" In {plural(neg, 'cohort')} the effect is significantly negative."
    return text, float(o.estimate)


def _steps(values, step) -> str:
    """``"20, 40 and 60 training steps"``."""
    words = [fmt(v) for v in values]
    listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return f"{listed} training step{'' if len(words) == 1 and words[0] == '1' else 's'}"


def _persistent(result, unit, step, cells) -> str:
    agg = _aggregate(result, "persistent")
    if agg is None:
        return "Persistent memorisation is not available (no checkpoint after treatment)."
    t = agg.to_frame()
    if t.empty:
        return "Persistent memorisation cannot be estimated: no checkpoint after treatment."
    key = agg.key_name
    truth, true_overall = _truths(result, agg, "persistent", cells)
    sig = (t["significant"] & (t["estimate"] > 0)).to_numpy(bool)
    n = len(t)
    band = _band_name(agg).replace(f"the {n} keys", f"the {plural(n, 'later event time')}")
    head = (f"<b>Persistent memorisation is significant at {int(sig.sum())} of "
            f"{plural(n, 'later event time')}</b> (where the {band} excludes zero)")
    if sig.any():
        at = t.loc[sig, key].to_numpy(float)
        last = t.loc[sig].iloc[-1]
        true_last = (float(truth.iloc[np.flatnonzero(sig)[-1]]) if truth is not None
                     else None)
        head += (f": {_steps(at, step)} after treatment; at {_after(last[key], step)} it is "
                 f"{fmt(last['estimate'])} {html.escape(unit)}{_truth_paren(true_last)}.")
    else:
        first = t.iloc[0]
        true_first = float(truth.iloc[0]) if truth is not None else None
        head += (f"; {_after(first[key], step)} after treatment it is "
                 f"{fmt(first['estimate'])} {html.escape(unit)}{_truth_paren(true_first)}.")
    head += _not_significant(t, sig | (t["significant"] & (t["estimate"] < 0)).to_numpy(bool),
                             unit, truth, ("event time", "event times"))
    if n > 1:
        head += f" Averaged over the later event times: {_average(agg, unit, true_overall)}."
    return head


def _residual(result, unit, instantaneous, cells) -> str:
    agg = _aggregate(result, "residual")
    if agg is None:
        return "Residual memorisation is not available for this result."
    t = agg.to_frame()
    truth, true_overall = _truths(result, agg, "residual", cells)
    n = len(t)
    sig = (t["significant"] & (t["estimate"] > 0)).to_numpy(bool)
    last = fmt(result.to_frame()["time"].max())
    band = _band_name(agg).replace(f"the {n} keys", f"the {plural(n, 'cohort')}")
    o = agg.overall
    text = (f"<b>At the last checkpoint ({last}) it is significant in {int(sig.sum())} of "
            f"{plural(n, 'cohort')}</b> (where the {band} excludes zero).")
    text += _not_significant(t, sig | (t["significant"] & (t["estimate"] < 0)).to_numpy(bool),
                             unit, truth, ("cohort", "cohorts"))
    text += f" On average it is {_average(agg, unit, true_overall)}"
    if instantaneous and instantaneous > 0 and np.isfinite(o.estimate):
        text += f", {100 * o.estimate / instantaneous:.0f}% of the instantaneous average"
    return text + "."


def exposure_words(result) -> str:
    """``"Exposure 2 (the second time training sees an instance)"``, or "" for the first."""
    k = exposure_of(result)
    if k == 1:
        return ""
    return (f"Exposure {k}: the effect of the {_ordinal(k)} time training sees an instance, "
            f"against instances with the same earlier exposures not (yet) seen a {_ordinal(k)} "
            f"time; cohorts are the checkpoints of the {_ordinal(k)} exposure.")


def finding_html(result, *, sensitivity=None, truth_error=None, cells=None) -> str:
    """The finding as an HTML list: instantaneous, persistent, residual, pre-test, robustness.

    ``cells``: the result's cells with the true ``tau`` beside them, where the truth is known;
    the truth then stands beside every average and every range of estimates.
    """
    unit = outcome_unit(result.outcome)
    inst_text, inst = _instantaneous(result, unit, cells)
    items = [inst_text, _persistent(result, unit, checkpoint_step(result), cells),
             _residual(result, unit, inst, cells)]
    items.append(pretest_sentence(result, calibrated_test(result), inst, unit))
    if sensitivity is not None:
        items.append(_sensitivity_sentence(sensitivity))
    if truth_error is not None:
        text = html.escape(truth_error.describe())
        items.append(text[:1].upper() + text[1:] + ".")
    sign = " (sign flipped: lower is better)" if result.lower_is_better else ""
    exposure = exposure_words(result)
    lead = ((f"<p><b>{html.escape(exposure)}</b></p>" if exposure else "")
            + f"<p>Outcome <code>{html.escape(str(result.outcome))}</code>{sign}, in "
            f"{html.escape(unit)}; {result.n_units} instances (units). A positive effect means "
            "training on the instances raised the outcome (memorisation). Significant means "
            "that the interval excludes zero; an interval that includes zero does not show "
            "that the effect is zero.</p>")
    body = "".join(f"<li>{item}</li>" for item in items)
    title = "Finding" + (f": exposure {exposure_of(result)}" if exposure else "")
    return f"<div class='finding'><h3>{title}</h3>{lead}<ul>{body}</ul></div>"


def _sensitivity_sentence(s) -> str:
    bound = "M" if s.restriction == "smoothness" else "Mbar"
    if s.breakdown == 0:
        return ("Sensitivity (Rambachan &amp; Roth 2023): the interval at the target already "
                "contains zero under exact parallel trends.")
    if np.isinf(s.breakdown):
        return (f"Sensitivity (Rambachan &amp; Roth 2023, {s.restriction.replace('_', ' ')}): "
                f"no {bound} searched makes the interval contain zero.")
    return (f"Sensitivity (Rambachan &amp; Roth 2023, {s.restriction.replace('_', ' ')}): the "
            f"effect stays significant for violations of parallel trends up to {bound} = "
            f"{fmt(s.breakdown)} (breakdown value).")
