"""The fit of :class:`~didmem.RunsEstimator`: each run's DiD, then the pooled and the
within-instance profiles from the runs' influence functions (:mod:`didmem.inference.runs`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import EstimationError, ParameterError
from ..inference.cell_inference import CellInference, InferenceSettings
from ..inference.runs.pooled import RunCells, pooled_band, pooled_cells
from ..inference.runs.combined import combine_cells
from ..inference.runs.within import WithinInfluence, within_cells
from ..results.common import _interval, _significant
from ..results.runs import RunsProfile, RunsResult
from .did import DiDEstimator

__all__ = ["fit_runs"]

_DID_PARAMS = ("control_group", "base_period", "anticipation", "est_method", "n_bootstrap",
               "multiplier", "alpha", "cband", "outcome", "lower_is_better", "small_sample")


def _check_panel(panel) -> None:
    if panel.run_column is None:
        raise ParameterError("RunsEstimator.fit needs a panel of several runs: build it with "
                             "didmem.Panel(..., run='run'); a panel of one run is fitted by "
                             "DiDEstimator.")
    if panel.n_runs < 2:
        raise ParameterError(f"RunsEstimator.fit needs at least 2 runs; the panel's run "
                             f"column {panel.run_column!r} holds one ({panel.runs[0]!r}).")
    first = panel.run_panel(panel.runs[0])
    if first.cluster_column is not None:
        raise ParameterError(
            f"RunsEstimator clusters by instance (the same instance enters every run); the "
            f"panel's cluster column {first.cluster_column!r} is not used by it: build the "
            "Panel without cluster=..., or fit each run's panel with DiDEstimator.")
    if len(first.cohort_columns) > 1:
        raise ParameterError("RunsEstimator estimates the first exposure; the panel has the "
                             f"cohort columns {list(first.cohort_columns)}: build it with the "
                             "first alone.")
    for run in panel.runs:
        if panel.run_panel(run).layout != "balanced":
            raise ParameterError(
                f"RunsEstimator needs every run observed at every checkpoint; run {run!r} is "
                f"{panel.run_panel(run).layout!r}. Build the Panel with the instances observed "
                "everywhere (the within-instance comparison reads each instance's whole path "
                "in every run).")


def _run_cells(result, units: pd.Index) -> RunCells:
    """One run's cells, their influence functions on the panel's instances.

    With the run's small-sample correction (``small_sample=True``), each cell's influence
    is scaled by the square root of its Welch factor, so that ``psi' psi`` is the corrected
    variance of the run's own band (and the pooled components, its cross-products, are
    corrected alike: about 2% of variance with 40 instances a cohort)."""
    frame = result.to_frame()
    dense = result.inference.influence.dense()
    correction = result.small_sample
    if correction is not None:
        dense = dense * np.sqrt(np.nan_to_num(np.asarray(correction.factor, float), nan=1.0))
    psi = np.zeros((len(units), dense.shape[1]))
    psi[units.get_indexer(result.prepared.unit_labels)] = dense
    return RunCells(cohort=frame["cohort"].to_numpy(float), time=frame["time"].to_numpy(float),
                    base_time=frame["base_time"].to_numpy(float),
                    estimate=np.asarray(result.estimates, dtype=float), psi=psi,
                    live=np.isfinite(np.asarray(result.analytic_std_errors)))


def _cells_frame(cohort, time, base_time, estimate, std_errors, critical_values,
                 extra: dict) -> pd.DataFrame:
    lo, hi = _interval(estimate, std_errors, critical_values)
    return pd.DataFrame({
        "cohort": cohort, "time": time, "base_time": base_time, "event_time": time - cohort,
        "post": cohort <= time, "estimate": estimate, "std_error": std_errors,
        "ci_lower": lo, "ci_upper": hi, "significant": _significant(lo, hi), **extra})


def _within_profile(panel, runs, cohorts, params, seed):
    """The within-instance comparison through the shared inference: its cells
    (:func:`~didmem.inference.runs.within.within_cells`) as a
    :class:`~didmem.inference.runs.within.WithinInfluence`, their band and small-sample
    correction and the Wald pre-test of the pre-treatment cells from
    :class:`~didmem.inference.cell_inference.CellInference`. Returns the cells' frame, the
    band, the pre-test ``(statistic, df, pvalue)``, the cells with their influence functions
    scaled by the square roots of their Welch factors (``psi' psi`` is then each cell's
    corrected variance; what the combination with the pooled DiD reads), and the inference
    (the aggregations')."""
    sign = -1.0 if params["lower_is_better"] else 1.0
    outcome = params["outcome"]
    y = np.stack([sign * panel.run_panel(r).outcome_matrix(outcome) for r in runs])
    within = within_cells(y, cohorts, panel.times, base_period=params["base_period"],
                          anticipation=params["anticipation"], run_trends=params["run_trends"])
    settings = InferenceSettings.from_params({**params, "seed": int(seed)}, "RunsEstimator")
    # the shared inference over the cells with an estimate (a pair with a control run, or a
    # reference cell); the others stay in the table with NaN
    keep = within.estimable
    live = within.subset(keep)
    cohort_values = np.unique(live.cohort)
    pairs = [(cohorts == g).sum() for g in cohort_values]  # (run, instance) pairs first at g
    influence = WithinInfluence.build(live, panel.times, pairs)
    inference = CellInference.draw(influence, settings)
    analytic, band = inference.cell_band(inference.variance)
    per_cell = (band.cell_critical_values if band.cell_critical_values is not None
                else np.full(analytic.size, band.critical_value))
    se, crit = np.full(keep.size, np.nan), np.full(keep.size, np.nan)
    se[keep], crit[keep] = band.std_errors, per_cell
    frame = _cells_frame(within.cohort, within.time, within.base_time, within.estimate, se,
                         crit, {"n_pairs": within.n_pairs, "n_instances": within.n_instances})
    before = (live.time < live.cohort) & ~live.reference & (live.n_pairs > 0)
    pre = np.flatnonzero(before & np.isfinite(analytic))
    stat, df, p, _ = inference.pretest(live.estimate, pre, n_before=int(before.sum()))
    psi = np.zeros_like(within.psi)
    psi[:, keep] = live.psi
    if inference.correction is not None:
        psi[:, keep] *= np.sqrt(np.nan_to_num(np.asarray(inference.correction.factor, float),
                                              nan=1.0))
    return frame, band, (stat, df, p), (within, psi), inference


def _combined_columns(pooled, within, within_psi) -> dict:
    """The efficient combination of the pooled DiD with the runs held fixed and the
    within-instance comparison, on the within-instance cells that the pooled profile has
    (:func:`~didmem.inference.runs.combined.combine_cells`; NaN elsewhere)."""
    where = {key: j for j, key in enumerate(zip(pooled.cohort.tolist(), pooled.time.tolist()))}
    idx = np.array([where.get(key, -1) for key in zip(within.cohort.tolist(),
                                                       within.time.tolist())])
    has = (idx >= 0) & ~within.reference
    out = {name: np.full(idx.size, np.nan) for name in
           ("combined_estimate", "combined_std_error", "combined_weight")}
    if has.any():
        both = combine_cells(pooled.estimate[idx[has]], pooled.instance_psi[:, idx[has]],
                             within.estimate[has], within_psi[:, has])
        out["combined_estimate"][has] = both.estimate
        out["combined_std_error"][has] = both.std_error
        out["combined_weight"][has] = both.weight
    return out


def fit_runs(panel, params) -> RunsResult:
    """Fit each run, pool them and compare each instance with itself (see
    :class:`~didmem.RunsEstimator`)."""
    _check_panel(panel)
    runs = list(panel.runs)
    cohorts = np.stack([panel.run_panel(r).cohorts for r in runs])
    validation = int(np.all(np.isinf(cohorts) | (cohorts > panel.times[-1]), axis=0).sum())
    if params["run_trends"] == "never_treated" and validation < 2:  # before any run's fit
        raise EstimationError(
            "RunsEstimator: run_trends='never_treated' removes each run's shift at each "
            "checkpoint with the instances that no run trains (validation instances), but the "
            f"panel has {validation}. Add validation instances, or pass run_trends='none' "
            "(runs that differ only in their data order).")
    seed = params["seed"]
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    seeds = rng.integers(0, 2**63 - 1, size=len(runs) + 2)
    did = {name: params[name] for name in _DID_PARAMS}
    per_run = {run: DiDEstimator(**did, seed=int(s)).fit(panel.run_panel(run))
               for run, s in zip(runs, seeds)}
    first = per_run[runs[0]]
    outcome = first.outcome
    simultaneous = params["cband"] is not False and panel.n_times > 2
    band_options = dict(alpha=params["alpha"], n_draws=params["n_bootstrap"],
                        simultaneous=simultaneous)

    pooled = pooled_cells([_run_cells(per_run[r], panel.units) for r in runs])
    band = pooled_band(pooled, rng=np.random.default_rng(seeds[-2]), **band_options)
    pooled_frame = _cells_frame(
        pooled.cohort, pooled.time, pooled.base_time, pooled.estimate, band.std_errors,
        band.critical_values,
        {"df": pooled.df, "between_sd": np.sqrt(pooled.between_variance),
         "instance_se": np.sqrt(np.diag(pooled.instance_covariance)),
         "n_runs": np.full(pooled.cohort.size, len(runs), dtype=np.int64)})

    within_frame, wband, pretest, (within, within_psi), winference = _within_profile(
        panel, runs, cohorts, {**params, "outcome": outcome}, seeds[-1])
    within_frame = within_frame.assign(**_combined_columns(pooled, within, within_psi))

    common = dict(outcome=outcome, alpha=float(params["alpha"]))
    return RunsResult(
        run_column=panel.run_column, runs=tuple(runs), per_run=per_run,
        pooled=RunsProfile(estimand="pooled", cells=pooled_frame,
                           critical_value=band.critical_value, band=band.rule,
                           n_dropped=pooled.n_dropped, **common),
        within=RunsProfile(estimand="within_instance", cells=within_frame,
                           critical_value=wband.critical_value, band=wband.rule,
                           pretest=pretest, inference=winference, **common),
        params=dict(params), lower_is_better=bool(params["lower_is_better"]),
        n_units=panel.n_units, **common)
