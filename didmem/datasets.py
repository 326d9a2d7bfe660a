"""Simulated memorisation-like panels with a known profile tau(g, c)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .errors import ParameterError

__all__ = ["simulate_panel", "memorisation_profile"]


def memorisation_profile(cohorts, times, *, instantaneous=1.0, decay=0.5, residual=0.2,
                         cohort_scale=None) -> np.ndarray:
    """The true profile: 0 before ``g``, then a decaying effect with a residual floor.

    .. math:: \\tau(g, c) = a_g \\left(r + (1 - r)\\, \\delta^{(c - g) / s}\\right), \\quad c \\ge g,

    with ``a_g = instantaneous * cohort_scale[g]``, ``r = residual``, ``delta = decay`` and
    ``s`` the spacing of the times.

    Returns
    -------
    ndarray (n_cohorts, n_times)
    """
    cohorts = np.asarray(cohorts, dtype=float)
    times = np.asarray(times, dtype=float)
    step = np.min(np.diff(times)) if times.size > 1 else 1.0
    scale = np.ones(cohorts.size) if cohort_scale is None else np.asarray(cohort_scale, float)
    if scale.shape != cohorts.shape:
        raise ParameterError(
            f"cohort_scale must have one value per cohort ({cohorts.size}); got shape {scale.shape}."
        )
    event = (times[None, :] - cohorts[:, None]) / step
    with np.errstate(invalid="ignore", over="ignore"):
        shape = residual + (1.0 - residual) * np.power(decay, np.maximum(event, 0.0))
    return np.where(event >= 0, instantaneous * scale[:, None] * shape, 0.0)


def simulate_panel(
    n_cohorts: int = 4,
    units_per_cohort: int = 50,
    n_never_treated: int = 200,
    n_times: int | None = None,
    *,
    time_step: float = 1.0,
    instantaneous: float = 1.0,
    decay: float = 0.5,
    residual: float = 0.2,
    cohort_scale=None,
    unit_sd: float = 1.0,
    noise_sd: float = 0.5,
    effect_sd: float = 0.0,
    learning_curve: float = 1.0,
    seed: int | None = 0,
    never_treated_value: float = np.inf,
):
    """A balanced panel of training and validation instances scored at every checkpoint.

    Cohort ``j`` (``j = 1 .. n_cohorts``) is treated at the ``j``-th time after the first, so
    every cohort has a pre-treatment period. The outcome is

    .. math:: Y_{ic} = \\alpha_i + \\lambda_c + \\tau_i(g_i, c) + \\varepsilon_{ic},

    with unit effects ``alpha ~ N(0, unit_sd^2)`` (instance difficulty), a learning curve
    ``lambda_c = learning_curve * log(1 + c / time_step)`` shared by all instances (the
    model improves), Gaussian noise, and an instance-level effect
    ``tau_i = tau(g, c) (1 + eta_i)``, ``eta_i ~ N(0, effect_sd^2)``, whose mean over the
    cohort is the true profile of :func:`memorisation_profile`. Parallel trends hold by
    construction.

    Parameters
    ----------
    n_cohorts, units_per_cohort, n_never_treated : int
        Treated cohorts, units in each, and never-treated (validation) units.
    n_times : int, optional
        Number of checkpoints; at least ``n_cohorts + 1`` (default ``n_cohorts + 2``).
    time_step : float
        Spacing of the checkpoints (e.g. 1000 steps).
    instantaneous, decay, residual, cohort_scale
        The profile, see :func:`memorisation_profile`.
    unit_sd, noise_sd, effect_sd, learning_curve : float
        Scales of the unit effects, the noise, the instance-level effect heterogeneity and
        the common learning curve.
    seed : int or None
        Seed of the generator.
    never_treated_value : float
        Cohort code of never-treated units (``inf``; R uses ``0``).

    Returns
    -------
    data : pandas.DataFrame
        Columns ``unit``, ``time``, ``cohort``, ``y``.
    truth : pandas.DataFrame
        Columns ``cohort``, ``time``, ``event_time``, ``tau``: the true ATT of every
        (cohort, time) cell.
    """
    n_times = n_cohorts + 2 if n_times is None else n_times
    if n_cohorts < 1 or units_per_cohort < 1 or n_never_treated < 0:
        raise ParameterError(
            "simulate_panel needs n_cohorts >= 1, units_per_cohort >= 1 and "
            f"n_never_treated >= 0; got {n_cohorts}, {units_per_cohort}, {n_never_treated}."
        )
    if n_times < n_cohorts + 1:
        raise ParameterError(
            f"n_times must be at least n_cohorts + 1 = {n_cohorts + 1} so that every cohort has "
            f"a pre-treatment period; got {n_times}."
        )
    rng = np.random.default_rng(seed)
    times = np.arange(n_times) * float(time_step)
    cohorts = times[1 : n_cohorts + 1]
    tau = memorisation_profile(cohorts, times, instantaneous=instantaneous, decay=decay,
                               residual=residual, cohort_scale=cohort_scale)
    n_treated = n_cohorts * units_per_cohort
    n = n_treated + n_never_treated
    block = np.repeat(np.arange(n_cohorts), units_per_cohort)
    unit_cohort = np.concatenate([cohorts[block], np.full(n_never_treated, np.inf)])
    y = (unit_sd * rng.standard_normal(n)[:, None]
         + learning_curve * np.log1p(times / time_step)[None, :]
         + noise_sd * rng.standard_normal((n, n_times)))
    heterogeneity = 1.0 + effect_sd * rng.standard_normal(n_treated)
    y[:n_treated] += tau[block] * heterogeneity[:, None]
    cohort_column = np.where(np.isinf(unit_cohort), never_treated_value, unit_cohort)
    data = pd.DataFrame({
        "unit": np.repeat(np.arange(n), n_times),
        "time": np.tile(times, n),
        "cohort": np.repeat(cohort_column, n_times),
        "y": y.ravel(),
    })
    truth = pd.DataFrame({
        "cohort": np.repeat(cohorts, n_times),
        "time": np.tile(times, n_cohorts),
        "event_time": (times[None, :] - cohorts[:, None]).ravel(),
        "tau": tau.ravel(),
    })
    return data, truth
