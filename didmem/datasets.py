"""Simulated memorisation-like panels with a known profile tau(g, c)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ._validation import Integral, Interval, OneOf, Satisfies, Seed, validate_params
from .errors import ParameterError

__all__ = ["simulate_panel", "simulate_runs", "memorisation_profile", "simulate_exposures",
           "EXPOSURE_DGPS",
           "simulate_doses", "DOSE_DGPS"]


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


def _finite_scales(value) -> bool:
    return value is None or bool(np.all(np.isfinite(np.asarray(value, dtype=float))))


_SIMULATE_PANEL = {
    "n_cohorts": Integral(1), "units_per_cohort": Integral(1), "n_never_treated": Integral(0),
    "n_times": Integral(2, allow_none=True),
    "time_step": Interval(0, None, closed="right"),
    "instantaneous": Interval(), "decay": Interval(0), "residual": Interval(),
    "cohort_scale": Satisfies(_finite_scales, "None or finite numbers, one per cohort"),
    "unit_sd": Interval(0), "noise_sd": Interval(0), "effect_sd": Interval(0),
    "learning_curve": Interval(), "seed": Seed(),
    "never_treated_value": Satisfies(
        lambda v: isinstance(v, (int, float, np.integer, np.floating))
        and not isinstance(v, bool), "a number (inf, NaN or a code such as R's 0)"),
}


_BYTES_PER_ROW = 64  # the frame's four float columns and the arrays they are made from


def _check_panel_fits(n_units: int, n_times: int, owner: str = "simulate_panel") -> None:
    """Refuse a panel larger than this machine's memory, naming its size, before numpy does
    with its own message ("Maximum allowed size exceeded", or an allocation error)."""
    rows = n_units * n_times
    need = rows * _BYTES_PER_ROW
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # no sysconf (Windows): numpy's own limit
        have = np.iinfo(np.intp).max
    if need > have:
        raise ParameterError(
            f"{owner} would make {rows:.3g} rows ({n_units:.3g} units = cohorts x "
            f"units_per_cohort + n_never_treated, times {n_times:.3g} checkpoints), about "
            f"{need / 2**30:.3g} GiB, more than this machine's {have / 2**30:.3g} GiB of "
            "memory; lower the cohorts, units_per_cohort, n_never_treated or n_times.")


@validate_params(_SIMULATE_PANEL, owner="simulate_panel")
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
    _check_panel_fits(int(n_cohorts) * int(units_per_cohort) + int(n_never_treated),
                      int(n_times))
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


#: the first exposure's effect path of :func:`simulate_exposures` (both still change when the
#: second exposure comes)
EXPOSURE_DGPS = ("decay", "growth", "heterogeneous")


def _first_effect(event_time, dgp, rank=None, factor=None):
    e = np.maximum(event_time, 0.0)
    if dgp == "heterogeneous":  # by first cohort (rank 0..1): size 0.6..1.4, half-life 1..4
        size = 0.6 + 0.8 * rank[:, None]
        half_life = 1.0 + 3.0 * rank[:, None]
        path = size * (0.2 + 0.8 * 0.5 ** (e / half_life)) * factor[:, None]
    elif dgp == "decay":  # a jump of 1 that decays to 0.2 (half-life one period)
        path = 0.2 + 0.8 * 0.5 ** e
    else:  # "growth": memorisation that keeps growing towards 1
        path = 1.0 - 0.6 * 0.7 ** e
    return np.where(event_time >= 0, path, 0.0)


def _second_effect(event_time, scale):
    e = np.maximum(event_time, 0.0)
    return np.where(event_time >= 0, scale * (0.3 + 0.7 * 0.6 ** e), 0.0)


def _gaps(value) -> bool:
    values = np.asarray(value)
    return (not isinstance(value, (str, bytes, dict)) and values.ndim == 1 and values.size > 0
            and values.dtype.kind in "iu" and bool((values >= 0).all())
            and bool((values <= 10**6).all()))


_SIMULATE_EXPOSURES = {
    "n_first": Integral(1), "units_per_cohort": Integral(1), "n_never_treated": Integral(0),
    "n_times": Integral(2, allow_none=True), "repeat_share": Interval(0, 1, closed="right"),
    "gaps": Satisfies(_gaps, "a non-empty list of non-negative integers (periods, at most "
                             "10**6)"),
    "dgp": OneOf(*EXPOSURE_DGPS), "second_scale": Interval(), "gap_slope": Interval(),
    "unit_sd": Interval(0), "noise_sd": Interval(0), "learning_curve": Interval(),
    "seed": Seed(),
}


@validate_params(_SIMULATE_EXPOSURES, owner="simulate_exposures")
def simulate_exposures(
    n_first: int = 4,
    units_per_cohort: int = 60,
    n_never_treated: int = 100,
    n_times: int | None = None,
    *,
    repeat_share: float = 0.5,
    gaps=(2, 4),
    dgp: str = "decay",
    second_scale: float = 0.5,
    gap_slope: float = 0.0,
    unit_sd: float = 1.0,
    noise_sd: float = 0.5,
    learning_curve: float = 1.0,
    seed: int | None = 0,
):
    """A panel where a share of the instances is seen a second time (two exposures).

    First exposures come at the times ``1 .. n_first`` (cohort ``g``, ``units_per_cohort``
    instances each, plus never-seen units). A share ``repeat_share`` of each cohort is seen
    again ``gap`` periods later, ``gap`` drawn uniformly from ``gaps`` (staggered second
    exposures; none when that falls after the last time). The outcome is

    .. math:: Y_{ic} = \\alpha_i + \\lambda_c + \\tau_1(c - g_{1i}) + \\tau_{2i}(c - g_{2i})
              + \\varepsilon_{ic}

    with the first exposure's effect ``tau_1`` still changing for several periods
    (``dgp="decay"``: ``0.2 + 0.8 * 0.5**e``; ``"growth"``: ``1 - 0.6 * 0.7**e``) and the
    second's ``second_scale * (0.3 + 0.7 * 0.6**e) * (1 + gap_slope * (gap - min(gaps)))``
    (``gap_slope`` makes it depend on the history). With ``dgp="heterogeneous"`` the first
    effect differs by first cohort and by instance,
    ``a_g (0.2 + 0.8 * 0.5**(e / h_g)) * f_i`` with ``a_g`` from 0.6 (first cohort) to 1.4
    (last), half-life ``h_g`` from 1 to 4 periods and ``f_i = max(1 + 0.5 z_i, 0)``, and the
    second effect is multiplied by ``a_g`` too: treated and controls of one history share
    the first effect only in expectation, and every history's second effect is its own. Controls of another first cohort drift
    differently, so only history-matched comparisons are unbiased.

    Parameters
    ----------
    n_first, units_per_cohort, n_never_treated : int
        First-exposure cohorts, instances in each, never-seen instances.
    n_times : int, optional
        Number of times (default ``n_first + max(gaps) + 3``).
    repeat_share : float
        Share of each cohort that is seen again.
    gaps : sequence of int
        Periods between the two exposures.
    dgp : {"decay", "growth", "heterogeneous"}
        The first exposure's effect path.
    second_scale, gap_slope : float
        Size of the second exposure's effect and its dependence on the gap.
    unit_sd, noise_sd, learning_curve : float
        As in :func:`simulate_panel`.
    seed : int or None

    Returns
    -------
    data : pandas.DataFrame
        Columns ``unit``, ``time``, ``cohort``, ``cohort_2`` (NaN without a second exposure
        in the panel), ``y``.
    truth : pandas.DataFrame
        Columns ``exposure``, ``cohort``, ``time``, ``event_time``, ``tau``: for exposure 2
        the mean effect of the second exposure over its cohort's instances; for exposure 1
        the mean total effect over the first cohort's instances (what the first exposure's
        estimator identifies: the first exposure and the repeats that follow it).
    """
    gaps = np.asarray(gaps, dtype=np.int64)
    if dgp not in EXPOSURE_DGPS:
        raise ParameterError(f"The 'dgp' parameter of simulate_exposures must be one of "
                             f"{set(EXPOSURE_DGPS)}. Got {dgp!r}.")
    if gaps.size == 0 or gaps.min() < 0 or not 0 < repeat_share <= 1 or n_first < 1:
        raise ParameterError(
            "simulate_exposures needs n_first >= 1, non-negative gaps and 0 < repeat_share "
            f"<= 1; got n_first={n_first}, gaps={gaps.tolist()}, repeat_share={repeat_share}.")
    n_times = n_first + int(gaps.max()) + 3 if n_times is None else n_times
    if n_times < n_first + 1:
        raise ParameterError(f"n_times must be at least n_first + 1 = {n_first + 1}; "
                             f"got {n_times}.")
    _check_panel_fits(n_first * units_per_cohort + n_never_treated, n_times,
                      "simulate_exposures")
    rng = np.random.default_rng(seed)
    times = np.arange(n_times, dtype=float)
    n_treated = n_first * units_per_cohort
    n = n_treated + n_never_treated
    g1 = np.concatenate([np.repeat(times[1:n_first + 1], units_per_cohort),
                         np.full(n_never_treated, np.inf)])
    gap = rng.choice(gaps, size=n).astype(float)
    again = np.zeros(n, dtype=bool)
    again[:n_treated] = rng.random(n_treated) < repeat_share
    g2 = np.where(again, g1 + gap, np.inf)
    g2[g2 > times[-1]] = np.inf
    scale = second_scale * (1.0 + gap_slope * (gap - gaps.min()))
    rank = factor = None
    if dgp == "heterogeneous":
        rank = np.where(np.isfinite(g1), g1 - 1.0, 0.0) / max(n_first - 1, 1)
        factor = np.maximum(1.0 + 0.5 * rng.standard_normal(n), 0.0)
        scale = scale * (0.6 + 0.8 * rank)
    tau1 = _first_effect(times[None, :] - g1[:, None], dgp, rank, factor)
    tau2 = np.where(np.isfinite(g2)[:, None],
                    _second_effect(times[None, :] - g2[:, None], scale[:, None]), 0.0)
    y = (unit_sd * rng.standard_normal(n)[:, None]
         + learning_curve * np.log1p(times)[None, :]
         + noise_sd * rng.standard_normal((n, n_times)) + tau1 + tau2)
    data = pd.DataFrame({
        "unit": np.repeat(np.arange(n), n_times),
        "time": np.tile(times, n),
        "cohort": np.repeat(np.where(np.isinf(g1), np.nan, g1), n_times),
        "cohort_2": np.repeat(np.where(np.isinf(g2), np.nan, g2), n_times),
        "y": y.ravel(),
    })
    rows = []
    for exposure, cohorts, effect in ((1, g1, tau1 + tau2), (2, g2, tau2)):
        for g in np.unique(cohorts[np.isfinite(cohorts)]):
            tau = effect[cohorts == g].mean(axis=0)
            rows.append(pd.DataFrame({"exposure": exposure, "cohort": g, "time": times,
                                      "event_time": times - g, "tau": tau}))
    return data, pd.concat(rows, ignore_index=True)


DOSE_DGPS = ("loglinear", "saturating")


def simulate_doses(doses=(0, 1, 2, 4, 8, 16, 32, 64), units_per_dose: int = 100,
                   n_times: int = 6, *, dgp: str = "loglinear", slope: float = 0.1,
                   effect_sd: float = 0.5, unit_sd: float = 1.0, noise_sd: float = 0.3,
                   seed: int | None = 0):
    """A panel where each instance is inserted a random number of times (Hubble's design).

    Each of ``units_per_dose`` instances per dose ``d`` is seen ``d`` times, at random
    steps spread over training (``0 < c`` in ``1 .. n_times - 1``; time 0 is before
    training). Its cumulative effect at time ``c`` is ``theta(d) * c / (n_times - 1)`` for
    ``d > 0`` (the exposures so far, in expectation), with ``theta(d) = slope * log2(1 + d)``
    (``dgp="loglinear"``: extraction grows log-linearly with duplication) or
    ``slope * 4 * (1 - 2**-(d / 4))`` (``"saturating"``), times an instance factor
    ``1 + effect_sd * z_i`` (mean 1: instances differ in how much they memorise, so the
    spread of the outcome grows with the dose). The outcome is
    ``alpha_i + log(1 + c) + effect + noise``; ``theta`` in ``truth`` is the mean effect.

    Returns
    -------
    data : pandas.DataFrame
        ``unit, time, dose, y``.
    truth : pandas.DataFrame
        ``dose, time, theta``: the effect of ``d`` exposures against none, ``d > 0``.
    """
    if dgp not in DOSE_DGPS:
        raise ParameterError(f"The 'dgp' parameter of simulate_doses must be one of "
                             f"{set(DOSE_DGPS)}. Got {dgp!r}.")
    doses = np.asarray(doses, dtype=float)
    rng = np.random.default_rng(seed)
    d = np.repeat(doses, units_per_dose)
    times = np.arange(n_times, dtype=float)
    if dgp == "loglinear":
        theta = slope * np.log2(1.0 + doses)
    else:
        theta = slope * 4.0 * (1.0 - 2.0 ** (-doses / 4.0))
    ramp = times / max(n_times - 1, 1)
    factor = 1.0 + effect_sd * rng.standard_normal(d.size)
    effect = (np.repeat(theta, units_per_dose) * factor)[:, None] * ramp[None, :]
    y = (unit_sd * rng.standard_normal(d.size)[:, None] + np.log1p(times)[None, :]
         + effect + noise_sd * rng.standard_normal((d.size, n_times)))
    data = pd.DataFrame({"unit": np.repeat(np.arange(d.size), n_times),
                         "time": np.tile(times, d.size), "dose": np.repeat(d, n_times),
                         "y": y.ravel()})
    keep = doses > 0
    truth = pd.DataFrame({"dose": np.repeat(doses[keep], n_times),
                          "time": np.tile(times, int(keep.sum())),
                          "theta": (theta[keep][:, None] * ramp[None, :]).ravel()})
    return data, truth


_SIMULATE_RUNS = {
    "n_runs": Integral(2), "n_cohorts": Integral(1), "units_per_cohort": Integral(1),
    "n_never_treated": Integral(0), "n_times": Integral(2, allow_none=True),
    "instantaneous": Interval(), "decay": Interval(0), "residual": Interval(),
    "unit_sd": Interval(0), "path_sd": Interval(0), "noise_sd": Interval(0),
    "effect_sd": Interval(0), "run_effect_sd": Interval(0), "run_shift_sd": Interval(0),
    "learning_curve": Interval(), "seed": Seed(),
}


@validate_params(_SIMULATE_RUNS, owner="simulate_runs")
def simulate_runs(
    n_runs: int = 3,
    n_cohorts: int = 4,
    units_per_cohort: int = 50,
    n_never_treated: int = 100,
    n_times: int | None = None,
    *,
    instantaneous: float = 1.0,
    decay: float = 0.5,
    residual: float = 0.2,
    unit_sd: float = 1.0,
    path_sd: float = 0.3,
    noise_sd: float = 0.3,
    effect_sd: float = 0.2,
    run_effect_sd: float = 0.1,
    run_shift_sd: float = 0.0,
    learning_curve: float = 1.0,
    seed: int | None = 0,
):
    """A panel of several training runs: the same instances, each run with its own data order.

    Every run trains the same ``n_cohorts * units_per_cohort`` instances, each run in its
    own random order (``units_per_cohort`` per cohort); ``n_never_treated`` validation
    instances are trained by no run. The outcome of instance ``i`` in run ``r`` is

    .. math:: Y_{ric} = \\alpha_i + \\beta_{ic} + \\lambda_c + \\mu_{rc}
                         + \\tau(g_r(i), c)(1 + u_{re})(1 + \\eta_i) + \\varepsilon_{ric},

    with the instance's difficulty ``alpha_i ~ N(0, unit_sd^2)`` and its own learning path
    ``beta_ic``, a Gaussian random walk over the checkpoints with steps ``N(0, path_sd^2)``,
    both shared by every run (what the within-instance comparison
    removes and the across-instance DiD averages away), a learning curve ``lambda_c`` as
    :func:`simulate_panel`'s, a run's shift at each checkpoint ``mu_rc ~ N(0,
    run_shift_sd^2)`` (an initialisation's), a run's effect factor ``u_re ~ N(0,
    run_effect_sd^2)`` per event time ``e`` (how memorisation depends on the run), instance
    effect heterogeneity ``eta_i ~ N(0, effect_sd^2)`` and noise ``N(0, noise_sd^2)``.
    The profile ``tau(g, c)`` is :func:`memorisation_profile`'s.

    Returns
    -------
    data : pandas.DataFrame
        Columns ``run``, ``unit``, ``time``, ``cohort`` (NaN for validation instances),
        ``y``.
    truth : pandas.DataFrame
        One row per (run, cohort, time): ``run, cohort, time, event_time, tau`` (run ``r``'s
        effect ``tau(g, c)(1 + u_re)``, its mean over the population of instances) and
        ``tau_mean`` (``tau(g, c)``: the mean over the population of runs, the pooled
        profile's target).
    """
    n_times = n_cohorts + 2 if n_times is None else n_times
    if n_times < n_cohorts + 1:
        raise ParameterError(f"n_times must be at least n_cohorts + 1 = {n_cohorts + 1} so that "
                             f"every cohort has a pre-treatment period; got {n_times}.")
    n_treated = n_cohorts * units_per_cohort
    n = n_treated + n_never_treated
    _check_panel_fits(n * n_runs, int(n_times), "simulate_runs")
    rng = np.random.default_rng(seed)
    times = np.arange(n_times, dtype=float)
    cohorts = times[1:n_cohorts + 1]
    tau = memorisation_profile(cohorts, times, instantaneous=instantaneous, decay=decay,
                               residual=residual)  # cohorts x times
    base = (unit_sd * rng.standard_normal(n)[:, None]
            + path_sd * np.cumsum(np.concatenate([np.zeros((n, 1)),
                                                   rng.standard_normal((n, n_times - 1))], 1), 1)
            + learning_curve * np.log1p(times)[None, :])
    hetero = 1.0 + effect_sd * rng.standard_normal(n_treated)
    event = times[None, :] - cohorts[:, None]  # cohorts x times
    run_factor = 1.0 + run_effect_sd * rng.standard_normal((n_runs, n_times))  # by event time
    block = np.repeat(np.arange(n_cohorts), units_per_cohort)
    y = np.empty((n_runs, n, n_times))
    unit_cohort = np.empty((n_runs, n))
    run_tau = np.empty((n_runs, n_cohorts, n_times))
    for r in range(n_runs):
        order = rng.permutation(n_treated)
        blocks = np.empty(n_treated, dtype=np.int64)
        blocks[order] = block
        run_tau[r] = tau * run_factor[r][np.clip(event, 0, None).astype(np.int64)]
        y[r] = (base + run_shift_sd * rng.standard_normal(n_times)[None, :]
                + noise_sd * rng.standard_normal((n, n_times)))
        y[r, :n_treated] += run_tau[r][blocks] * hetero[:, None]
        unit_cohort[r] = np.concatenate([cohorts[blocks], np.full(n_never_treated, np.nan)])
    data = pd.DataFrame({
        "run": np.repeat(np.arange(n_runs), n * n_times),
        "unit": np.tile(np.repeat(np.arange(n), n_times), n_runs),
        "time": np.tile(times, n_runs * n),
        "cohort": np.repeat(unit_cohort.ravel(), n_times),
        "y": y.ravel(),
    })
    truth = pd.DataFrame({
        "run": np.repeat(np.arange(n_runs), n_cohorts * n_times),
        "cohort": np.tile(np.repeat(cohorts, n_times), n_runs),
        "time": np.tile(times, n_runs * n_cohorts),
        "event_time": np.tile(event.ravel(), n_runs),
        "tau": run_tau.ravel(),
        "tau_mean": np.tile(tau.ravel(), n_runs),
    })
    return data, truth
