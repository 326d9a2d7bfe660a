"""Power under random timing: :func:`didmem.power_analysis` with
:class:`~didmem.RandomTimingEstimator` (Roth & Sant'Anna's efficient estimator).

The simulated route only: resampled studies are drawn from the pilot as for
difference-in-differences (the pilot centred by a DiD fit, so that it has no post-treatment
effect, then made exchangeable: every group's mean path is set to the pooled one, which is
the null of random timing; each new unit is that path plus a pilot unit's residual, drawn with
the generator's draws in the same order as DiD's plan) and each is fitted with the
random-timing estimator. The DiD centring alone would not do: it leaves the pilot's chance
differences in the cohorts' levels, which the random-timing estimator (beta below 1) reads as
an effect, so its planned power would be off by that chance difference (on the pilot of
``tests/test_power_random_timing.py`` a spurious overall effect of 0.11, 1.2 standard errors). The target is the overall effect (``staggered``'s ``simple``
aggregation) under the interval the result reports, ``estimate -/+ critical_value *
std_error_neyman``; a constant effect ``delta`` on every post-treatment cell shifts that
estimate by ``delta`` and leaves the standard errors unchanged (the cohorts' covariances do
not move), so one set of fits gives the power at every effect, as for DiD.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError

__all__ = ["is_random_timing", "check_random_timing", "random_timing_keys",
           "centring_params", "exchangeable"]


def is_random_timing(estimator) -> bool:
    """Whether the plan's estimator is :class:`~didmem.RandomTimingEstimator`."""
    from ..estimators.random_timing import RandomTimingEstimator

    return isinstance(estimator, RandomTimingEstimator)


def check_random_timing(source, method, target) -> None:
    """Refuse, by name, what the random-timing plan does not do."""
    from ..panel import Panel

    if not isinstance(source, Panel):
        raise ParameterError(
            "power_analysis with RandomTimingEstimator resamples a pilot panel and fits the "
            f"estimator to each study; got a {type(source).__name__} as source. Pass the pilot "
            "as a didmem.Panel (Assumptions plan DiDEstimator only, by the analytic route).")
    if method == "analytic":
        raise ParameterError("power_analysis with RandomTimingEstimator has the simulated "
                             "route only; got method='analytic'. Leave method=None.")
    if target != "overall":
        raise ParameterError(
            "power_analysis with RandomTimingEstimator plans target='overall' (the overall "
            f"effect, staggered's simple aggregation, under its interval); got {target!r}.")


def centring_params(pilot_cohorts: np.ndarray) -> dict:
    """The DiD fit that centres the pilot (removes its post-treatment effects): never-treated
    controls where the pilot has validation instances, else the not-yet-treated."""
    control = "never_treated" if np.isinf(pilot_cohorts).sum() >= 2 else "not_yet_treated"
    return {"control_group": control, "n_bootstrap": 0}


def exchangeable(pilot):
    """The pilot with every group's (each cohort's and the validation instances') mean path
    replaced by the pooled mean path over all its units: the population of the sharp null
    under random timing, in which every estimator of the profile has mean zero, with the
    pilot's residuals (variances and correlations over checkpoints) kept."""
    from ._pilot import Pilot

    y = pilot.y.copy()
    pooled = y.mean(axis=0)
    for g in np.unique(pilot.cohorts):
        rows = pilot.cohorts == g
        y[rows] += pooled - y[rows].mean(axis=0)
    return Pilot(y, pilot.times, pilot.cohorts)


def random_timing_keys(result):
    """``(keys, estimates, standard errors, critical value)`` of the overall effect of a
    random-timing fit, as the planner's ``_keys`` gives them for a group-time aggregation:
    the standard error and critical value of the interval the result reports."""
    o = result.aggregate("simple").overall
    se = float(o["std_error_neyman"])
    crit = (o["ci_upper"] - o["estimate"]) / se if se > 0 else np.nan
    return np.array([0.0]), np.array([o["estimate"]]), np.array([se]), float(crit)
