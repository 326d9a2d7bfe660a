"""Monte Carlo checks of inference on simulated panels with a known profile."""

from __future__ import annotations

import warnings

import numpy as np

from . import datasets
from ._validation import Count, defaults_of, validate_params
from .errors import SmallCohortWarning
from .estimators import DiDEstimator
from .inference.bands import normal_quantile
from .panel import Panel

__all__ = ["band_coverage"]

_ESTIMATOR = defaults_of(DiDEstimator)  # the estimator's defaults, not written again here


@validate_params({"reps": Count(1)}, owner="band_coverage")
def band_coverage(reps: int = 300, *, units_per_cohort: int = 200, n_cohorts: int = 4,
                  n_never_treated: int | None = None, n_times: int = 6,
                  n_bootstrap: int = _ESTIMATOR["n_bootstrap"],
                  multiplier: str | None = _ESTIMATOR["multiplier"],
                  control_group: str = _ESTIMATOR["control_group"],
                  noise_sd: float = 1.0, effect_sd: float = 0.0,
                  alpha: float = _ESTIMATOR["alpha"],
                  small_sample: bool = _ESTIMATOR["small_sample"], seed: int = 0) -> dict:
    """Coverage of the simultaneous band of :class:`~didmem.DiDEstimator` by simulation.

    Each replication draws a panel with :func:`didmem.datasets.simulate_panel` and checks
    whether the band covers the whole true profile: every cell, pre-treatment cells (whose
    truth is 0 under the varying base period) included.

    Parameters
    ----------
    reps : int
        Count.
    units_per_cohort, n_cohorts, n_never_treated, n_times, noise_sd, effect_sd
        The simulated design (``n_never_treated`` defaults to twice ``units_per_cohort``).
    n_bootstrap, multiplier, control_group, alpha, small_sample
        The estimator's settings (``small_sample=False``: R's band).
    seed : int
        Seed of the whole study.

    Returns
    -------
    dict
        ``simultaneous_coverage`` (share of replications whose band covers every cell),
        ``pointwise_coverage`` (share of cells covered by ``estimate +- z se``, ``z`` the
        normal quantile at ``alpha``),
        ``mean_critical_value``, ``cells`` and the settings.
    """
    n_never = 2 * units_per_cohort if n_never_treated is None else n_never_treated
    rng = np.random.default_rng(seed)
    z = normal_quantile(1 - alpha / 2)
    hits = 0
    pointwise = 0.0
    crits = np.empty(reps)
    n_cells = 0
    for r in range(reps):
        df, truth = datasets.simulate_panel(
            n_cohorts=n_cohorts, units_per_cohort=units_per_cohort, n_never_treated=n_never,
            n_times=n_times, noise_sd=noise_sd, effect_sd=effect_sd,
            seed=int(rng.integers(2**63)))
        panel = Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallCohortWarning)
            res = DiDEstimator(n_bootstrap=n_bootstrap, multiplier=multiplier, alpha=alpha,
                               control_group=control_group, small_sample=small_sample,
                               seed=int(rng.integers(2**63))).fit(panel)
        frame = res.to_frame().merge(truth, on=["cohort", "time"], how="left")
        tau = np.where(frame["post"], frame["tau"], 0.0)
        hits += bool(((frame["ci_lower"] <= tau) & (tau <= frame["ci_upper"])).all())
        pointwise += float(np.mean(np.abs(frame["estimate"] - tau) <= z * frame["std_error"]))
        crits[r] = res.critical_value
        n_cells = len(frame)
    return {"units_per_cohort": units_per_cohort, "multiplier": multiplier,
            "small_sample": small_sample, "reps": reps,
            "simultaneous_coverage": hits / reps, "pointwise_coverage": pointwise / reps,
            "mean_critical_value": float(crits.mean()), "cells": n_cells}
