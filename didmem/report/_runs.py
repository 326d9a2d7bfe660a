"""The report's part for a result of several runs (:class:`~didmem.RunsResult`): each run is
reported as a result of its own; this section sets them side by side with the pooled profile,
the between-run spread in words and the within-instance comparison."""

from __future__ import annotations

import html

import numpy as np

from ._html import figure_block, figure_png, fmt, table

__all__ = ["is_runs", "expand_runs", "runs_html"]


def is_runs(result) -> bool:
    """Whether ``result`` is a result of several runs."""
    return hasattr(result, "per_run") and hasattr(result, "pooled")


def expand_runs(named: dict, truth):
    """The results to report one by one (each run of a runs result under ``"NAME: run R"``),
    each one's truth (a truth with a ``run`` column gives each run its own rows), and the
    runs results themselves."""
    flat, truths, runs = {}, {}, {}
    for name, res in named.items():
        if not is_runs(res):
            flat[name] = res
            truths[name] = truth
            continue
        runs[name] = res
        for run in res.runs:
            key = f"{name}: run {run}"
            flat[key] = res.per_run[run]
            truths[key] = _run_truth(truth, run)
    return flat, truths, runs


def _run_truth(truth, run):
    if truth is None or "run" not in truth.columns:
        return truth
    rows = truth[truth["run"].astype(str) == str(run)]
    return rows.drop(columns="run") if not rows.empty else None


def mean_truth(truth, outcome: str):
    """The truth averaged over runs per (cohort, time): the pooled profile's target (None
    without a truth that has a ``run`` column)."""
    if truth is None or "run" not in truth.columns:
        return None
    frame = truth
    if "metric" in frame.columns:
        frame = frame[frame["metric"] == outcome]
    if frame.empty:
        return None
    return frame.groupby(["cohort", "time"], as_index=False)["tau"].mean()


def runs_html(name: str, res, truth=None) -> list:
    """The section of one runs result: the spread, the runs side by side, the pooled
    profile, the within-instance comparison and, with a truth per run, the pooled band's
    coverage of the mean truth."""
    from ..results.runs import WITHIN_TARGET  # here: the CLI's parser stays light

    from ..results.plotting import plot_profile, plot_runs

    b = res.between_runs()
    out = [f"<h2>{html.escape(str(name))}: {len(res.runs)} runs compared</h2>",
           f"<div class='finding'><p>{html.escape(res.spread_words())}</p>"]
    ratio = res.se_ratio()
    if np.isfinite(ratio):
        out.append(f"<p>Comparing each instance with itself across runs gives standard errors "
                   f"{fmt(ratio, 2)} times those of the pooled DiD with the runs held fixed "
                   "(median over the shared post-treatment cells).</p>")
    stat, df, p = res.within.pretest if res.within.pretest else (np.nan, 0, np.nan)
    out.append("<p>Pre-test of the within-instance comparison (runs exchangeable given the "
               "instance): " + (f"chi2({df}) = {fmt(stat)}, p = {fmt(p)}." if df else
                                "no pre-treatment cell to test.") + "</p></div>")
    figs = [figure_block(figure_png(plot_runs(res)), "runs side by side",
                         "At event time 0, by cohort: each run's estimate (grey), the pooled "
                         "estimate with its band (black: runs a random factor) and the "
                         "within-instance estimate with its band (red)."),
            figure_block(figure_png(plot_profile(res.pooled)), "pooled profile",
                         "The pooled profile (mean over runs), cells whose band excludes 0.")]
    out.append("<div class='figs'>" + "".join(figs) + "</div>")
    out.append("<h3>The runs side by side</h3><p>Each run's estimate, the pooled and the "
               "within-instance estimates per cell (post-treatment cells).</p>")
    side = res.run_frame()
    side = side[side["time"] >= side["cohort"]]
    out.append(table(side))
    pooled = res.pooled.to_frame()
    target = mean_truth(truth, res.outcome)
    if target is not None:
        both = pooled.merge(target, on=["cohort", "time"], how="inner")
        post = both[both["post"]]
        inside = (post["ci_lower"] <= post["tau"]) & (post["tau"] <= post["ci_upper"])
        out.append(f"<p>The pooled band covers the mean truth over runs in "
                   f"{int(inside.sum())} of {len(post)} post-treatment cells.</p>")
    cols = ["cohort", "time", "estimate", "std_error", "ci_lower", "ci_upper", "df",
            "between_sd", "instance_se"]
    out.append(f"<h3>Pooled profile</h3><p>{html.escape(res.pooled.assumption)}; "
               f"{res.pooled.band} band (critical value {fmt(res.pooled.critical_value)} on the "
               "normal scale, each cell's t quantile with its <code>df</code>)"
               + (f"; {res.pooled.n_dropped} cells that some run lacks are left out"
                  if res.pooled.n_dropped else "") + ".</p>")
    out.append(table(pooled[pooled["post"]][cols]))
    within = res.within.to_frame()
    out.append(f"<h3>Within-instance comparison</h3><p>{html.escape(res.within.assumption)}; "
               f"{html.escape(WITHIN_TARGET)}; "
               f"{res.within.band} band. Cells without a run that has not trained the cohort's "
               "instances by then have no estimate.</p>")
    out.append(table(within[["cohort", "time", "base_time", "estimate", "std_error",
                             "ci_lower", "ci_upper", "n_pairs", "n_instances"]]))
    out.append(f"<p class='meta'>{b['n_cells']} pooled post-treatment cells; between-run SD "
               f"{fmt(b['between_sd'])}.</p>")
    return out
