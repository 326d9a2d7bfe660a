"""Plan a memorisation study before paying for it: power, minimum detectable effect, cost.

:func:`power_analysis` takes a pilot (a :class:`~didmem.Panel` or a fitted
:class:`~didmem.GroupTimeResult`) or stated :class:`Assumptions` and a grid of designs
(instances per cohort, validation instances, every k-th checkpoint) and returns a
:class:`PowerAnalysis`: the power for the target under the band the estimator reports, the
minimum detectable effect at a target power and the scoring cost of every design.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._validation import (Alpha, Count, Instance, Integral, Interval, OneOf, Satisfies,
                           Seed, validate_params)
from ._choices import METHODS, POOLS, TARGETS
from ._types import PAPER_TOKENS_PER_INSTANCE, POWER, Assumptions, PowerAnalysis

__all__ = ["Assumptions", "PowerAnalysis", "power_analysis", "PAPER_TOKENS_PER_INSTANCE"]


def _integers(low):
    """An integer >= ``low``, or a non-empty sequence of them (the designs' grid)."""
    def ok(values):
        values = [values] if np.isscalar(values) else list(values)
        return bool(values) and all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                    and v >= low for v in values)
    return Satisfies(ok, f"an integer >= {low} or a non-empty sequence of them")


_CONSTRAINTS = {
    "units_per_cohort": _integers(2),
    "n_validation": Satisfies(lambda v: v is None or _integers(0)(v),
                              "None, an integer >= 0 or a non-empty sequence of them"),
    "checkpoint_every": _integers(1),
    "target": OneOf(*TARGETS),
    "effect": Interval(allow_none=True),
    "method": OneOf(None, *METHODS),
    "pool": OneOf(*POOLS),
    "estimator": Instance("didmem.estimators.did:DiDEstimator",
                          "didmem.estimators.random_timing:RandomTimingEstimator",
                          allow_none=True),
    "n_simulations": Count(2),
    "mde_power": POWER,
    "alpha": Alpha(allow_none=True),
    "seed": Seed(),
    "tokens_per_instance": Integral(1, allow_none=True),
    "suite": Satisfies(lambda v: v is None or isinstance(v, str), "a suite name (str) or None"),
    "tokens_per_second": Interval(0, None, closed="neither", allow_none=True),
    "progress": OneOf(None, True, False),
}


@validate_params(_CONSTRAINTS, owner="power_analysis")
def power_analysis(source, *, units_per_cohort, n_validation=None, checkpoint_every=1,
                target="instantaneous", effect=None, method=None, pool="all", estimator=None,
                n_simulations=200, mde_power=0.8, alpha=None, seed=None,
                tokens_per_instance=None, tokens_per_second=None, suite=None,
                progress=None) -> PowerAnalysis:
    r"""Power, minimum detectable effect and scoring cost of a grid of study designs.

    Parameters
    ----------
    source : Panel, GroupTimeResult or Assumptions
        A pilot (a cheap run on a few instances, or on a smaller model) or stated
        assumptions about the outcome.
    units_per_cohort : int or sequence of int
        Instances sampled per cohort (macro-batch between two kept checkpoints).
    n_validation : int or sequence of int, optional
        Never-treated (validation) instances; by default the pilot's number, or 2,000 (the
        paper's) with assumptions.
    checkpoint_every : int or sequence of int
        Score every k-th checkpoint (from the first); the batches between two kept
        checkpoints form one cohort.
    target : {"instantaneous", "persistent", "overall"}
        Power of what: each cohort's instantaneous effect under the simultaneous band of
        ``aggregate("instantaneous")`` (averaged over cohorts), each event time's persistent
        effect under the band of ``aggregate("persistent")`` (averaged over event times),
        or the overall effect (``aggregate("overall")``, pointwise interval).
    effect : float, optional
        The effect of every key to detect (on the outcome's scale, positive =
        memorisation). Required with assumptions; with a pilot, None plans at the pilot's
        own estimates of the keys shrunk towards their pooled mean by their noise (empirical
        Bayes; see Notes), and reports an interval of the planned power.
    method : {"simulated", "analytic"}, optional
        ``"simulated"`` (the default with a pilot): resample the pilot's units, fit the real
        estimator, count significance under its band. ``"analytic"`` (the only choice with
        assumptions): the closed-form covariance of the keys and a Gaussian sup-t critical
        value; with a pilot, the outcome covariance is estimated from it. Under the
        estimator's small-sample correction (``small_sample=True``, the default) each key
        takes the t quantile at the sup-t's pointwise level with Welch-Satterthwaite
        degrees of freedom and its power is a noncentral t probability, as the band the
        fit will use.
    pool : {"all", "cohort"}
        Simulated route: where a new unit's deviation from its group's mean comes from:
        any pilot unit (``"all"``, the default: training and validation instances are
        exchangeable before training, so one variance structure is estimated from all of
        them, which matters with a small pilot) or a unit of its own cohort (``"cohort"``,
        plain resampling; keeps cohort-specific variances and effect heterogeneity).
    estimator : DiDEstimator or RandomTimingEstimator, optional
        The estimator the study will use (default ``DiDEstimator()``, whose default band is
        used); ignored when ``source`` is a result, whose settings are used. Only the
        simulated route uses its band rule; the analytic route assumes never-treated
        controls and the varying base period. A :class:`~didmem.RandomTimingEstimator`
        (Roth & Sant'Anna's efficient estimator, for a randomly shuffled training order)
        takes a pilot panel, the simulated route and ``target="overall"``: the same
        simulated studies as DiD's with the same seed, each fitted with it, so that a plan
        says how many fewer instances it needs for the same power (see Notes).
    n_simulations : int
        Simulated studies per design (2 to 1,000,000).
    mde_power : float
        The power at which the minimum detectable effect is computed.
    alpha : float, optional
        One minus the band's coverage; by default the estimator's.
    seed : None, int or numpy.random.Generator
    tokens_per_instance : int, optional
        Tokens scored per instance and checkpoint; by default the suite's, else 2,049
        (Pythia's).
    tokens_per_second : float, optional
        Scoring throughput, for ``gpu_hours``.
    suite : str, optional
        A suite by name (``"pythia-1.4b-deduped"``, ``"olmo-7b"``, ``"olmo-2-1124-7b"``,
        ``"hubble-1b-100b"``, ...; see :data:`didmem.suites.SUITES` and the docs' *Suites*
        page): its tokens per instance price the design, and its published checkpoints bound
        it (a design cannot keep more checkpoints than the suite has); the table gets a
        ``suite`` column.
    progress : bool, optional
        Show progress (the design being planned, fits done, time left) on standard error:
        by default when it is a terminal (from a second on); ``True`` always, ``False``
        never.

    Returns
    -------
    PowerAnalysis

    Notes
    -----
    Cost: ``tokens = (n_cohorts * units_per_cohort + n_validation) * checkpoints *
    tokens_per_instance``.

    The pilot's own effects: power is convex in the effect where it is small, so planning at
    each key's noisy pilot estimate overstates the power on average. The keys' estimates
    ``est_k`` (standard errors ``s_k``) are shrunk to ``mu + A / (A + s_k^2) (est_k - mu)``
    with ``A`` the method-of-moments between-key variance and ``mu`` the pooled mean
    (Efron & Morris 1975; DerSimonian & Laird 1986): with no evidence that the keys differ,
    every key is planned at the pooled mean. ``power_lower`` and ``power_upper`` are the 5%
    and 95% quantiles of the power over 400 draws of the effects from that posterior (the
    pooled mean drawn from its sampling distribution). Evidence on two data-generating
    processes is in the docs' *Planning* page.

    Simulated route: the pilot's checkpoints are thinned, every post-treatment cell's
    estimate is removed from its cohort's units (so the resampled population has no
    post-treatment effect, while its pre-trends, variances and correlations are the
    pilot's), units are drawn with replacement to the design's sizes (each a group mean plus
    a pilot residual, see ``pool``) and the estimator is fitted. Adding an effect ``delta`` to the target's cells shifts the key estimates by
    ``delta`` and leaves standard errors and bootstrap bands unchanged, so one set of fits
    gives the power at every effect: ``mean 1{|est + delta| > crit * se}``; the MDE is found
    on a fine grid of ``delta`` with these common random numbers.

    Analytic route: with ``Sigma`` the outcome covariance over the kept checkpoints, a key
    is a contrast ``L`` of group means and ``Cov = L_T Sigma L_T' / n_g + L_C Sigma L_C' /
    n_C``; the band's critical value is the ``1 - alpha`` quantile of the largest absolute
    entry of a Gaussian vector with that correlation (20,000 draws), and the power of a key
    is ``Phi(delta/se - c) + Phi(-delta/se - c)``. It is a normal approximation: with
    fewer than about 30 instances per cohort the bootstrap band of the estimator differs
    from it (see the docs' *Planning* page), and the simulated route should be used.

    Random timing: the pilot is centred by a DiD fit (never-treated controls where it has
    validation instances), units are resampled as above, and each study is fitted with the
    random-timing estimator (no Fisher test); a key is significant when ``|estimate + delta|
    > critical_value * std_error_neyman``, the interval its result reports for the overall
    (``simple``) effect. Its power is the interval's, not the Fisher test's.
    """
    from ._designs import design_table

    return design_table(source, units_per_cohort, n_validation, checkpoint_every, target,
                        effect, method, pool, estimator, n_simulations, mde_power, alpha,
                        seed, tokens_per_instance, tokens_per_second, suite, progress)
