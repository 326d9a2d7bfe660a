"""The power, minimum detectable effect and cost of each design of a power analysis (the work behind
:func:`didmem.power_analysis`, declared in :mod:`didmem.power`)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from .._progress import progress as progress_line
from .._validation import check_fits_memory
from ..errors import ParameterError
from ..inference.prepared import MIN_COHORT_SIZE
from ..estimators import DiDEstimator
from ..suites import get_suite
from ._analytic import (analytic_power, key_contrasts, key_covariance_parts,
                        small_sample_critical, sup_t_critical, t_power, welch_df)
from ._choices import AGGREGATION
from ._pilot import Pilot, centred, fit_quiet, pilot_from
from ._random_timing import (centring_params, check_random_timing, exchangeable,
                             is_random_timing, random_timing_keys)
from ._shrinkage import shrink
from ._types import PAPER_TOKENS_PER_INSTANCE, Assumptions, PowerAnalysis

EFFECT_DRAWS = 400  # posterior draws of the pilot's key effects, for the power interval
POWER_INTERVAL = 0.9  # central probability of the interval of the planned power


def grid(values) -> list[int]:
    """A design parameter (one integer or a sequence of them) as a list of ints."""
    return [int(v) for v in ([values] if np.isscalar(values) else values)]


def design_table(source, units_per_cohort, n_validation, checkpoint_every, target, effect,
                 method, pool, estimator, n_simulations, mde_power, alpha, seed,
                 tokens_per_instance, tokens_per_second, suite, progress=None) -> PowerAnalysis:
    """:func:`didmem.power_analysis` on arguments its declaration has checked."""
    units = grid(units_per_cohort)
    every = grid(checkpoint_every)
    published = None if suite is None else get_suite(suite)
    if tokens_per_instance is None:
        tokens_per_instance = (PAPER_TOKENS_PER_INSTANCE if published is None
                               else published.tokens_per_instance)
    estimator = DiDEstimator() if estimator is None else estimator
    rng = np.random.default_rng(seed)
    random_timing = is_random_timing(estimator)
    if random_timing:
        check_random_timing(source, method, target)

    if isinstance(source, Assumptions):
        if method == "simulated":
            raise ParameterError("With Assumptions only method='analytic' is available; "
                                 f"got {method!r}. Give a pilot to simulate.")
        if effect is None:
            raise ParameterError("power_analysis with Assumptions needs effect= (the effect to "
                                 "detect, on the outcome's scale).")
        method, pilot, params = "analytic", None, estimator.get_params()
        validation = grid(2000 if n_validation is None else n_validation)
        _check_validation(validation, params, "Assumptions")
    else:
        method = "simulated" if method is None else method
        pilot, params = pilot_from(source, estimator)
        n_never = int(np.isinf(pilot.cohorts).sum())
        validation = grid(n_never if n_validation is None else n_validation)
        # a pilot too small to resample from (< 2 never-treated) is told so by _check_pilot
        _check_validation(validation, params, f"the pilot ({n_never} never-treated units)",
                          minimum=MIN_COHORT_SIZE if n_validation is not None or n_never >= 2
                          else 1)
    alpha = params["alpha"] if alpha is None else alpha
    params["alpha"] = alpha
    if method == "analytic" and (params["control_group"], params["base_period"],
                                 params["anticipation"]) != ("never_treated", "varying", 0):
        raise ParameterError(
            "method='analytic' assumes never-treated controls, the varying base period and no "
            f"anticipation; the estimator has control_group={params['control_group']!r}, "
            f"base_period={params['base_period']!r}, anticipation={params['anticipation']!r}. "
            "Use the simulated route (a pilot) for these settings.")

    fitter = _Fitter(params, target, random_timing)
    rows = []
    n_designs = len(every) * len(units) * len(validation)
    simulated = method == "simulated"
    with progress_line(n_designs * (n_simulations if simulated else 1),
                       f"power_analysis ({method}, {n_designs} designs)", progress,
                       unit="fits" if simulated else "designs") as bar:
        for k in every:
            rows.extend(_designs_at(k, source, pilot, params, method, target, units, validation,
                                    alpha, effect, pool, n_simulations, mde_power, rng,
                                    published, tokens_per_instance, tokens_per_second, bar,
                                    fitter))
    return PowerAnalysis(table=pd.DataFrame(rows), target=target, method=method,
                      effect_source="stated" if effect is not None else "pilot",
                      mde_power=mde_power, alpha=alpha)


class _Fitter:
    """The fit of one simulated study (or of the pilot) and its keys: the planned
    estimator's, DiDEstimator's or RandomTimingEstimator's (its overall effect)."""

    def __init__(self, params, target, random_timing: bool):
        self.params, self.target, self.random_timing = params, target, random_timing

    def centring(self, pilot: Pilot) -> dict:
        """The DiD settings that centre the pilot (its own with DiD, a DiD fit for others)."""
        return centring_params(pilot.cohorts) if self.random_timing else self.params

    def keys(self, panel, seed=None, pilot: bool = False):
        """``(keys, estimates, standard errors, critical value)`` of the target."""
        if self.random_timing:
            from ..estimators.random_timing import RandomTimingEstimator

            p = dict(self.params)  # the overall interval needs no draws, and no Fisher test
            p.update(n_fisher=0, n_draws=0, **({} if seed is None else {"seed": seed}))
            return random_timing_keys(fit_quiet(RandomTimingEstimator, p, panel))
        p = {**self.params, **({"n_bootstrap": 0} if pilot else {}),
             **({} if seed is None else {"seed": seed})}
        return _keys(fit_quiet(DiDEstimator, p, panel, AGGREGATION[self.target]), self.target)


def _designs_at(k, source, pilot, params, method, target, units, validation, alpha, effect,
                pool, n_simulations, mde_power, rng, published, tokens_per_instance,
                tokens_per_second, bar, fitter) -> list:
    """The rows of the designs that keep every ``k``-th checkpoint."""
    rows = []
    if pilot is None:
        pos, n_kept, sigma = source.kept_checkpoints(k)
        shrunk = None
    else:
        thin = pilot.thinned(k)
        _check_pilot(thin, k, params, validation)
        pos = np.searchsorted(thin.times, thin.treated_cohorts)
        n_kept = thin.times.size
    if pilot is None or method == "analytic":
        if pilot is not None:
            sigma, shrunk = _pilot_covariance(thin, params, target)
        stats = _analytic_layout(pos, n_kept, sigma, target)
    else:
        _check_simulated_sizes(pos.size, n_kept, units, validation)
        centre, _ = centred(thin, DiDEstimator, fitter.centring(thin))
        if fitter.random_timing:  # the null of random timing: exchangeable groups
            centre = exchangeable(centre)
        sampler = centre.sampler(pool)
        shrunk = shrink(*fitter.keys(thin.panel(), pilot=True)[1:3])
    # the pilot's key effects as the truth: shrunk towards their pooled mean, and drawn
    # from their posterior for the interval of the planned power
    draws = None if effect is not None or shrunk is None else \
        shrunk.draws(EFFECT_DRAWS, rng)
    keys_effect = None if shrunk is None else shrunk.posterior_mean
    for u, v in itertools.product(units, validation):
        bar.say(f"units_per_cohort={u}, n_validation={v}, checkpoint_every={k}")
        if method == "analytic":
            power, mc, mde, crit, eff, band = _analytic_design(
                stats, u, v, alpha, effect, keys_effect, draws, mde_power, rng,
                small_sample=bool(params.get("small_sample", False)))
            bar.step()
        else:
            est, se, cr = _simulate(sampler, u, v, fitter, n_simulations, rng, bar)
            power, mc, mde, crit, eff, band = _simulated_design(
                est, se, cr, effect, keys_effect, draws, mde_power)
        n_inst = pos.size * u + v
        if published is not None and n_kept > len(published.checkpoints):
            raise ParameterError(
                f"The design keeps {n_kept} checkpoints; suite {published.name!r} publishes "
                f"{len(published.checkpoints)}.")
        tokens = float(n_inst) * n_kept * tokens_per_instance
        rows.append({
            "units_per_cohort": u, "n_validation": v, "checkpoint_every": k,
            "n_cohorts": int(pos.size), "checkpoints": int(n_kept), "instances": n_inst,
            "tokens": tokens,
            "gpu_hours": np.nan if tokens_per_second is None
            else tokens / tokens_per_second / 3600.0,
            "effect": eff, "power": power, "power_lower": band[0], "power_upper": band[1],
            "power_mc_error": mc, "mde": mde,
            "critical_value": crit, "method": method,
            **({} if published is None else {"suite": published.name})})
    return rows


_BYTES_PER_ROW = 64  # a simulated study's panel: its frame's columns and the fit's arrays


def _check_simulated_sizes(n_cohorts, n_kept, units, validation) -> None:
    """Each simulated study is a panel of ``n_cohorts * units_per_cohort + n_validation``
    instances at every kept checkpoint, held whole: refuse one larger than memory, naming
    the parameter that makes it so."""
    treated, never = n_cohorts * max(units), max(validation)
    name, value = (("units_per_cohort", max(units)) if treated >= never
                   else ("n_validation", never))
    check_fits_memory("power_analysis", name, value,
                      float(treated + never) * n_kept * _BYTES_PER_ROW,
                      f"each simulated study's panel ({treated + never:,} instances x "
                      f"{n_kept:,} checkpoints)")


def _check_validation(validation, params, source, minimum=1) -> None:
    """Never-treated controls need validation instances (``minimum`` of them: the estimator
    that a pilot's simulations run refuses fewer than ``MIN_COHORT_SIZE``); not-yet-treated
    ones can do without."""
    if params["control_group"] == "never_treated" and min(validation) < minimum:
        raise ParameterError(
            f"power_analysis: with {source} the designs have n_validation={validation}, but the "
            "estimator compares with never-treated (validation) instances "
            f"(control_group='never_treated'), so every design needs at least {minimum}: give "
            "n_validation=, a pilot with validation instances, or an estimator with "
            "control_group='not_yet_treated'.")


def _check_pilot(pilot: Pilot, every: int, params, validation) -> None:
    sizes = pd.Series(pilot.cohorts).value_counts()
    if not np.isfinite(pilot.cohorts).any():
        raise ParameterError(f"With checkpoint_every={every} no treated cohort of the pilot has "
                             "a kept pre-treatment checkpoint and a kept checkpoint after it.")
    n_never = int(np.isinf(pilot.cohorts).sum())
    if n_never == 0 and max(validation) > 0:
        raise ParameterError(
            f"power_analysis: the pilot has no never-treated (validation) units to resample, so "
            f"n_validation must be 0; got {validation}.")
    need_never = 2 if params["control_group"] == "never_treated" or n_never else 0
    if n_never < need_never or sizes[np.isfinite(sizes.index)].min() < 2:
        raise ParameterError("The pilot needs at least 2 never-treated units and 2 units in "
                             f"every cohort to resample from; its cohort sizes are "
                             f"{sizes.sort_index().to_dict()}.")


def _keys(agg, target):
    if target == "overall":  # the fit's own critical value of its overall interval
        o = agg.overall
        crit = (o.ci_upper - o.estimate) / o.std_error if o.std_error > 0 else np.nan
        return np.array([0.0]), np.array([o.estimate]), np.array([o.std_error]), crit
    return agg.keys, np.asarray(agg.estimates), np.asarray(agg.std_errors), agg.critical_value


def _pilot_covariance(pilot: Pilot, params, target):
    """Pooled within-group covariance over checkpoints, and the pilot's own key estimates."""
    agg = fit_quiet(DiDEstimator, {**params, "n_bootstrap": 0}, pilot.panel(),
                    AGGREGATION[target])
    labels = np.where(np.isfinite(pilot.cohorts), pilot.cohorts, -1.0)
    resid = pilot.y.copy()
    groups = np.unique(labels)
    for g in groups:
        resid[labels == g] -= resid[labels == g].mean(axis=0)
    sigma = resid.T @ resid / (resid.shape[0] - groups.size)
    return sigma, shrink(*_keys(agg, target)[1:3])


def _analytic_layout(pos, n_kept, sigma, target):
    n_c = int(np.size(pos))
    cells = {"instantaneous": n_c, "persistent": n_c * n_kept, "overall": n_c * n_kept}[target]
    # the contrasts: keys x groups x checkpoints, and their cells (one such array each)
    keys = {"instantaneous": n_c, "persistent": n_kept, "overall": 1}[target]
    check_fits_memory("power_analysis", "target", target,
                      8.0 * (n_c + 1) * n_kept * (keys + cells),
                      f"the contrasts of its keys over {n_c:,} cohorts and {n_kept:,} kept "
                      "checkpoints (keep fewer checkpoints: checkpoint_every)")
    L = key_contrasts(np.asarray(pos), n_kept, AGGREGATION[target])
    return key_covariance_parts(L, sigma)


def _power_band(power_of, draws) -> tuple[float, float]:
    """The central ``POWER_INTERVAL`` of the power over draws of the effects (NaN without)."""
    if draws is None:
        return (np.nan, np.nan)
    powers = np.array([power_of(d) for d in draws])
    tail = (1 - POWER_INTERVAL) / 2
    return tuple(float(q) for q in np.quantile(powers, [tail, 1 - tail]))


def _analytic_design(parts, u, v, alpha, effect, keys_effect, draws, mde_power, rng,
                     small_sample=False):
    treated, control = np.diag(parts[0]) / u, np.diag(parts[1]) / v
    cov = parts[0] / u + parts[1] / v
    se = np.sqrt(np.diag(cov))
    crit = sup_t_critical(cov, alpha, rng)
    delta = np.full(se.size, float(effect)) if effect is not None else np.asarray(keys_effect)
    if small_sample:  # the default band: t quantiles at the sup-t's pointwise level
        df = welch_df(treated, control, u, v)
        crits = small_sample_critical(crit, df)

        def power_of(d):
            return t_power(d, se, crits, df)

        crit = float(np.max(crits))
    else:
        def power_of(d):
            return analytic_power(d, se, crit)
    power = power_of(delta)
    hi = (crit + 10.0) * se.max()
    mde = brentq(lambda d: power_of(np.full(se.size, d)) - mde_power, 0.0, hi)
    return (power, 0.0, float(mde), crit, float(np.mean(delta)),
            _power_band(power_of, draws))


def _simulate(sampler, u, v, fitter, n_sim, rng, bar=None):
    est = se = ref_keys = None
    crit = np.empty(n_sim)
    for s in range(n_sim):
        seed = int(rng.integers(2**63))
        keys, e, sd, c = fitter.keys(sampler.draw(u, v, rng).panel(), seed=seed)
        if ref_keys is None:
            ref_keys = keys
            est, se = np.full((n_sim, keys.size), np.nan), np.full((n_sim, keys.size), np.nan)
        at = np.searchsorted(ref_keys, keys)
        fine = (at < ref_keys.size) & (ref_keys[np.minimum(at, ref_keys.size - 1)] == keys)
        est[s, at[fine]], se[s, at[fine]] = e[fine], sd[fine]
        crit[s] = c
        if bar is not None:
            bar.step()
    return est, se, crit


def _sim_power(est, se, crit, delta):
    """Per-simulation share of significant keys at effect ``delta`` (keys,)."""
    with np.errstate(invalid="ignore"):
        sig = np.abs(est + delta) > crit[:, None] * se
    return sig.mean(axis=1)


def _simulated_design(est, se, crit, effect, keys_effect, draws, mde_power):
    delta = np.full(est.shape[1], float(effect)) if effect is not None else np.asarray(keys_effect)
    band = _power_band(lambda d: float(_sim_power(est, se, crit, d).mean()), draws)
    per_sim = _sim_power(est, se, crit, delta)
    power = float(per_sim.mean())
    mc = float(per_sim.std(ddof=1) / np.sqrt(per_sim.size))
    top = float(np.nanmax(np.abs(est) + crit[:, None] * se)) * 1.01
    grid = np.linspace(0.0, top, 801)
    curve = np.array([_sim_power(est, se, crit, d).mean() for d in grid])
    above = np.flatnonzero(curve >= mde_power)
    if above.size == 0:
        mde = np.nan
    elif above[0] == 0:
        mde = 0.0
    else:
        i = above[0]
        lo, hi = curve[i - 1], curve[i]
        mde = float(grid[i - 1] + (mde_power - lo) / (hi - lo) * (grid[i] - grid[i - 1]))
    return power, mc, mde, float(np.mean(crit)), float(np.mean(delta)), band
