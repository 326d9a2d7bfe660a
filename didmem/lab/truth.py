"""Ground truth from counterfactual runs: per instance, per cohort, and the exact check.

With ``Y_c(x)`` the score of analysed instance ``x`` at checkpoint ``c`` in the main run and
``Y_c^twin(x)`` its score in the twin run (where ``x`` and every other analysed instance were
replaced by fresh ones), the effect on ``x`` is ``Y_c(x) - Y_c^twin(x)`` and

.. math:: \\tau(g, c) = \\frac{1}{|G_g|} \\sum_{x \\in G_g} \\big(Y_c(x) - Y_c^{twin}(x)\\big).

Any retraining on another order also moves the scores of instances it did not change (the
run drifts as a whole, by the luck of its path): the *spillover*, the mean effect on the
never-treated (validation) instances, which DiD's comparison subtracts. The truth that DiD
targets is therefore the *direct* effect, the total effect minus the spillover
(:func:`mean_effect`, :func:`direct_effects`); the not-yet-treated comparison subtracts the
spillover on its own controls (:func:`not_yet_treated_effect`).

The twin also lacks the *other* cohorts' analysed instances, which moves its scores a little.
The exact run of cohort ``g`` removes only cohort ``g``'s instances: it is the main run up to
step ``g - checkpoint_every`` and resumes from there, so before ``g`` its effect is exactly
zero and from ``g`` on it is the exact truth. :func:`combine_effects` puts the exact effect
beside the twin's for every instance; :func:`cohort_truth` averages both. All functions here
take the backend's long tables (``unit``, ``time``, one column per metric).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import EstimationError

__all__ = ["instance_effects", "combine_effects", "cohort_truth", "exact_check", "mean_effect",
           "not_yet_treated_effect", "direct_effects", "draw_noise"]


def instance_effects(main: pd.DataFrame, counterfactual: pd.DataFrame, cohorts: pd.Series,
                     metrics) -> pd.DataFrame:
    """Per-instance effects ``Y_c(x) - Y_c^cf(x)`` in long form.

    Parameters
    ----------
    main, counterfactual : pandas.DataFrame
        Scores with columns ``unit``, ``time`` and the metrics. Rows of ``main`` without a
        counterpart in ``counterfactual`` are dropped; a counterfactual that is missing some
        (unit, time) present in ``main`` for the units in ``cohorts`` is an error.
    cohorts : pandas.Series
        Cohort of each analysed unit, indexed by unit.
    metrics : sequence of str

    Returns
    -------
    pandas.DataFrame
        Columns ``unit``, ``cohort``, ``time``, ``metric``, ``effect``, sorted.
    """
    metrics = list(metrics)
    keep = main[main["unit"].isin(cohorts.index)]
    merged = keep.merge(counterfactual, on=["unit", "time"], how="left",
                        suffixes=("", "_cf"), validate="one_to_one")
    missing = merged[metrics[0] + "_cf"].isna()
    if missing.any():
        row = merged[missing].iloc[0]
        raise EstimationError(
            f"The counterfactual run lacks {int(missing.sum())} scores, e.g. unit "
            f"{int(row['unit'])} at time {int(row['time'])}."
        )
    parts = []
    for m in metrics:
        parts.append(pd.DataFrame({
            "unit": merged["unit"].to_numpy(),
            "cohort": cohorts.loc[merged["unit"]].to_numpy(dtype=np.int64),
            "time": merged["time"].to_numpy(dtype=np.int64),
            "metric": m,
            "effect": merged[m].to_numpy(np.float64) - merged[m + "_cf"].to_numpy(np.float64),
        }))
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["metric", "cohort", "unit", "time"], kind="stable").reset_index(
        drop=True)


def combine_effects(twin_effects: pd.DataFrame, exact_effects: dict) -> pd.DataFrame:
    """Per-instance effects with the exact value where a cohort has an exact run.

    Parameters
    ----------
    twin_effects : pandas.DataFrame
        :func:`instance_effects` of the main run against the twin, for every analysed unit.
    exact_effects : dict of int to pandas.DataFrame
        For some cohorts ``g``, :func:`instance_effects` of the main run against the exact
        run of ``g`` at the times ``>= g``.

    Returns
    -------
    pandas.DataFrame
        Columns ``unit``, ``cohort``, ``time``, ``metric``, ``effect`` (exact where the
        cohort has an exact run: zero before ``g``, the exact run's effect from ``g`` on;
        otherwise the twin's), ``effect_twin`` and ``exact`` (bool), in the order of
        ``twin_effects``.

    Raises
    ------
    ValueError
        If an exact run lacks a post-treatment (unit, time, metric) of the twin's table.
    """
    out = twin_effects.rename(columns={"effect": "effect_twin"})
    exact_flag = out["cohort"].isin(list(exact_effects)).to_numpy()
    effect = out["effect_twin"].to_numpy(np.float64).copy()
    if exact_effects:
        keys = ["unit", "time", "metric"]
        exact = pd.concat([e[keys + ["effect"]] for e in exact_effects.values()],
                          ignore_index=True)
        merged = out[keys].merge(exact, on=keys, how="left", validate="one_to_one")
        value = merged["effect"].to_numpy(np.float64)
        post = out["time"].to_numpy() >= out["cohort"].to_numpy()
        gap = exact_flag & post & np.isnan(value)
        if gap.any():
            row = out[gap].iloc[0]
            raise EstimationError(
                f"The exact run of cohort {int(row['cohort'])} lacks the score of unit "
                f"{int(row['unit'])} at time {int(row['time'])} ({row['metric']})."
            )
        effect[exact_flag] = np.where(post[exact_flag], value[exact_flag], 0.0)
    out = out.assign(effect=effect, exact=exact_flag)
    return out[["unit", "cohort", "time", "metric", "effect", "effect_twin", "exact"]]


def cohort_truth(effects: pd.DataFrame) -> pd.DataFrame:
    """Average per-instance effects within cohort: the truth τ(g, c).

    Parameters
    ----------
    effects : pandas.DataFrame
        Output of :func:`instance_effects` (column ``effect``) or of
        :func:`combine_effects` (also ``effect_twin`` and ``exact``).

    Returns
    -------
    pandas.DataFrame
        Columns ``cohort``, ``time``, ``metric``, ``tau`` (the mean effect), then, for a
        :func:`combine_effects` table, ``tau_twin`` (the twin's mean effect) and ``exact``
        (whether ``tau`` comes from an exact run), then ``sd`` (standard deviation of the
        instance effects behind ``tau``) and ``n_units``; sorted by metric, cohort, time.
    """
    grouped = effects.groupby(["metric", "cohort", "time"], sort=True)
    out = grouped["effect"].agg(tau="mean", sd="std", n_units="size").reset_index()
    out["n_units"] = out["n_units"].astype(np.int64)
    columns = ["cohort", "time", "metric", "tau"]
    if "effect_twin" in effects:
        out["tau_twin"] = grouped["effect_twin"].mean().to_numpy()
        out["exact"] = grouped["exact"].all().to_numpy()
        columns += ["tau_twin", "exact"]
    return out[columns + ["sd", "n_units"]]


def exact_check(twin_truth: pd.DataFrame, exact_effects: dict) -> pd.DataFrame:
    """Compare the twin's truth with the exact per-cohort truth.

    Parameters
    ----------
    twin_truth : pandas.DataFrame
        Output of :func:`cohort_truth` for the twin.
    exact_effects : dict of int to pandas.DataFrame
        For each checked cohort, :func:`instance_effects` of the main run against the exact
        run (which only lacks that cohort's analysed instances). Times before the cohort,
        where both runs are the same model, may be absent: their exact effect is zero.

    Returns
    -------
    pandas.DataFrame
        Columns ``cohort``, ``time``, ``metric``, ``tau_exact``, ``tau_twin`` and
        ``difference`` (twin minus exact), one row per time of the twin's truth.
    """
    rows = []
    for g, effects in sorted(exact_effects.items()):
        exact = cohort_truth(effects).set_index(["metric", "time"])["tau"]
        twin = twin_truth[twin_truth["cohort"] == g]
        tau_exact = np.array([
            float(exact.get((m, t), 0.0)) if t >= g else 0.0
            for m, t in zip(twin["metric"], twin["time"])
        ])
        rows.append(pd.DataFrame({
            "cohort": np.int64(g),
            "time": twin["time"].to_numpy(np.int64),
            "metric": twin["metric"].to_numpy(),
            "tau_exact": tau_exact,
            "tau_twin": twin["tau"].to_numpy(np.float64),
        }))
    if not rows:
        return pd.DataFrame(columns=["cohort", "time", "metric", "tau_exact", "tau_twin",
                                     "difference"])
    out = pd.concat(rows, ignore_index=True)
    out["difference"] = out["tau_twin"] - out["tau_exact"]
    return out.sort_values(["metric", "cohort", "time"], kind="stable").reset_index(drop=True)


def mean_effect(main: pd.DataFrame, counterfactual: pd.DataFrame, ids, metrics) -> pd.Series:
    """Mean effect ``Y_c(x) - Y_c^cf(x)`` over the instances ``ids``, by (metric, time).

    With the never-treated (validation) instances as ``ids`` this is the counterfactual
    run's spillover: how much the retraining moves instances it did not change.
    """
    ids = np.asarray(ids, dtype=np.int64)
    effects = instance_effects(main, counterfactual,
                               pd.Series(np.zeros(ids.size, dtype=np.int64), index=ids), metrics)
    return effects.groupby(["metric", "time"])["effect"].mean()


def not_yet_treated_effect(main: pd.DataFrame, counterfactual: pd.DataFrame, never_ids,
                           later: pd.Series, metrics) -> pd.Series:
    """Mean effect over the controls of a not-yet-treated comparison, by (metric, time).

    At time ``c`` the controls are the never-treated instances ``never_ids`` and the
    instances of ``later`` (cohort by unit) whose cohort is after ``c``, pooled as R
    ``did``'s ``control_group="notyettreated"`` pools them (one mean over units).
    """
    never_ids = np.asarray(never_ids, dtype=np.int64)
    never = np.iinfo(np.int64).max
    codes = pd.concat([pd.Series(np.full(never_ids.size, never, dtype=np.int64),
                                 index=never_ids), later.astype(np.int64)])
    effects = instance_effects(main, counterfactual, codes, metrics)
    controls = effects[effects["cohort"] > effects["time"]]
    return controls.groupby(["metric", "time"])["effect"].mean()


def direct_effects(effects: pd.DataFrame, spillover: pd.Series) -> pd.DataFrame:
    """Per-instance effects less the spillover of their (metric, time): direct effects.

    Parameters
    ----------
    effects : pandas.DataFrame
        :func:`instance_effects` output.
    spillover : pandas.Series
        :func:`mean_effect` by (metric, time); a time it lacks counts as zero (before the
        cohort the exact run is the main run).

    Returns
    -------
    pandas.DataFrame
        ``effects`` with ``effect`` the direct effect and a ``spillover`` column.
    """
    key = pd.MultiIndex.from_arrays([effects["metric"], effects["time"]])
    spill = spillover.reindex(key).fillna(0.0).to_numpy(np.float64)
    return effects.assign(effect=effects["effect"].to_numpy(np.float64) - spill,
                          spillover=spill)


def draw_noise(draws: pd.DataFrame) -> pd.DataFrame:
    """The truth's own noise: the spread of the direct truth over exact runs with other
    replacement draws, pooled over cohorts at each event time.

    Parameters
    ----------
    draws : pandas.DataFrame
        Columns ``draw``, ``cohort``, ``time``, ``metric``, ``tau``: the direct truth of each
        exact run (draw 0 the run behind ``truth.parquet``), post-treatment cells only.

    Returns
    -------
    pandas.DataFrame
        ``metric``, ``event_time``, ``tau_se`` (the square root of the mean over cohorts of
        the variance over draws: the standard deviation of one run's truth around the mean
        over replacement draws) and ``df`` (its degrees of freedom); empty with one draw.
    """
    if draws.empty or draws["draw"].nunique() < 2:
        return pd.DataFrame(columns=["metric", "event_time", "tau_se", "df"])
    cell = draws.groupby(["metric", "cohort", "time"])["tau"].agg(["var", "size"]).reset_index()
    cell["event_time"] = cell["time"] - cell["cohort"]
    cell["df"] = cell["size"] - 1
    pooled = cell.groupby(["metric", "event_time"]).agg(var=("var", "mean"), df=("df", "sum"))
    pooled = pooled.reset_index()
    pooled["tau_se"] = np.sqrt(pooled.pop("var"))
    return pooled[["metric", "event_time", "tau_se", "df"]]
