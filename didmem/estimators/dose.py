r"""The dose-response of repeated exposure: the cumulative effect of ``d`` exposures against
none, where the number of exposures is assigned at random (Hubble).

Hubble (Wei et al. 2025) inserts each perturbation document ``d`` times, ``d`` drawn at
random (up to 256), at random positions of training; held-out documents are never seen. The
dose of a unit is its number of exposures by checkpoint ``at`` (the panel's cohort columns
``cohort``, ``cohort_2``, ... that are at most ``at``). With the dose assigned at random,
units of dose ``d`` and units never exposed are comparable, and

.. math::

    \tau(d) = E[Y_{at}(d) - Y_{at}(0)]

is identified by the difference of the two groups' mean changes from a base checkpoint
before any exposure (the change removes each instance's own difficulty, which makes the
comparison far more precise than one of levels; under random assignment both are unbiased).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import DataDroppedWarning, EstimationError
from ._grouptime import INFERENCE_CONSTRAINTS
from .base import BaseEstimator, Instance

__all__ = ["DoseResponseEstimator"]

_DOSE_CONSTRAINTS = {name: INFERENCE_CONSTRAINTS[name] for name in (
    "n_bootstrap", "alpha", "random_state", "outcome", "lower_is_better")}


class DoseResponseEstimator(BaseEstimator):
    r"""Cumulative effect of ``d`` exposures against none, by dose ``d``, with a band.

    Parameters
    ----------
    at : float or None
        The checkpoint at which the effect is measured (default: the panel's last time).
        A unit's dose is its number of exposures (cohort columns) at or before ``at``.
    base : float or None
        The checkpoint the changes start from (default: the panel's first time). Units
        with an exposure at or before ``base`` have no clean baseline: they are left out
        with a :class:`~didmem.DataDroppedWarning` that says how many.
    n_bootstrap : int
        Multiplier-bootstrap draws (Rademacher weights; per cluster with clusters) for the
        simultaneous band over the doses; 0 gives pointwise intervals.
    alpha : float
        One minus the coverage of intervals and the band.
    random_state : None, non-negative int or numpy.random.Generator
        Seed of the bootstrap.
    outcome : str, optional
        Which of the panel's outcomes to use (needed when it has several).
    lower_is_better : bool
        Flip the outcome's sign first (surprisal, loss), so that memorisation is positive.

    Notes
    -----
    With ``D_i = Y_{i,at} - Y_{i,base}`` and weights ``w_i``, the estimate for dose ``d`` is
    ``mu_d - mu_0``, the weighted means of ``D`` over the units of dose ``d`` and over the
    never-exposed units. Its influence function is ``w_i (D_i - mu_d) / W_d`` on dose ``d``
    and ``-w_i (D_i - mu_0) / W_0`` on the never-exposed; the standard error is
    ``sqrt(sum_i psi_i^2)`` (of cluster sums with clusters), and the band's critical value
    is the ``1 - alpha`` quantile of ``max_d |sum_i U_i psi_i| / se_d`` over the draws.
    Identification rests on the random assignment of the dose (and of the positions), not
    on parallel trends: the base period only adds precision. Because the dose counts the
    exposures up to ``at``, ``tau(d)`` at an ``at`` before the end of training is the
    effect of the first ``d`` exposures of units that may be seen again later.
    """

    _constraints = {
        "at": Instance(float, int, allow_none=True),
        "base": Instance(float, int, allow_none=True),
        **_DOSE_CONSTRAINTS,
    }

    def __init__(self, *, at=None, base=None, n_bootstrap=999, alpha=0.05, random_state=None,
                 outcome=None, lower_is_better=False):
        super().__init__(at=at, base=base, n_bootstrap=n_bootstrap, alpha=alpha,
                         random_state=random_state, outcome=outcome,
                         lower_is_better=lower_is_better)

    def _fit(self, panel, params):
        from ..results.dose import DoseResponseResult

        name = type(self).__name__
        times = np.asarray(panel.times, dtype=float)
        at = times[-1] if params["at"] is None else float(params["at"])
        base = times[0] if params["base"] is None else float(params["base"])
        for what, value in (("at", at), ("base", base)):
            if value not in times:
                raise EstimationError(f"{name}({what}={value:g}): the panel has no time "
                                      f"{value:g}; its times run {times[0]:g} to {times[-1]:g}.")
        if not base < at:
            raise EstimationError(f"{name}: base={base:g} must come before at={at:g}.")
        if panel.has_holes:
            raise EstimationError(f"{name} needs a balanced panel; this one has holes.")
        y = np.asarray(panel.outcome_matrix(params["outcome"]), dtype=float)
        if params["lower_is_better"]:
            y = -y
        change = y[:, np.flatnonzero(times == at)[0]] - y[:, np.flatnonzero(times == base)[0]]
        cohorts = np.asarray(panel.exposure_cohorts, dtype=float)
        early = (cohorts <= base).any(axis=1)
        dose = (cohorts <= at).sum(axis=1)
        if early.any():
            warnings.warn(
                f"{name}: left out {int(early.sum())} of {early.size} units with an exposure "
                f"at or before base={base:g} (no clean baseline), e.g. units "
                f"{list(np.asarray(panel.units)[early][:3])}.", DataDroppedWarning, stacklevel=4)
        keep = ~early
        doses = np.unique(dose[keep])
        treated = doses[doses > 0]
        if not (doses == 0).any() or treated.size == 0:
            raise EstimationError(
                f"{name} needs units never exposed by at={at:g} and units exposed at least "
                f"once; the kept units have doses {doses.tolist()}.")
        w = np.asarray(panel.weights, dtype=float)
        group = np.searchsorted(doses, dose)  # 0: never exposed
        group[~keep] = -1
        n_groups = doses.size
        sw = np.bincount(group[keep], weights=w[keep], minlength=n_groups)
        mu = np.bincount(group[keep], weights=(w * change)[keep], minlength=n_groups) / sw
        # psi of unit i for dose group j (> 0): its own group's term, or the controls' term
        resid = np.where(keep, w * (change - mu[np.maximum(group, 0)]), 0.0) / np.where(
            keep, sw[np.maximum(group, 0)], 1.0)
        estimates = mu[1:] - mu[0]
        clusters = panel.clusters
        variance, draws, crit, band = _inference(resid, group, n_groups, clusters, params,
                                                 name)
        return DoseResponseResult(
            estimator=name, params=params, outcome=panel.resolve_outcome(params["outcome"]),
            at=at, base=base, doses=treated.astype(int), n_units=np.bincount(
                group[keep], minlength=n_groups)[1:], n_control=int((group == 0).sum()),
            estimates=estimates, std_errors=np.sqrt(variance), critical_value=crit,
            band=band, alpha=params["alpha"], draws=draws)


def _inference(resid, group, n_groups, clusters, params, name):
    """Variances, bootstrap draws and the band's critical value of the doses' estimates.

    ``resid`` is each unit's ``w_i (D_i - mu_{g(i)}) / W_{g(i)}``; dose ``j``'s influence
    function is ``resid`` on its units and ``-resid`` on the never-exposed (group 0).
    """
    from ..inference.bands import normal_quantile, sup_t_critical_value
    from ..inference.bootstrap import draw_multipliers

    n = resid.size
    # one row per unit, one column per dose: psi (units x doses), sparse in structure
    psi = np.zeros((n, n_groups - 1))
    mine = group > 0
    psi[np.flatnonzero(mine), group[mine] - 1] = resid[mine]
    psi[group == 0] = -resid[group == 0, None]
    if clusters is not None:
        n_clusters = int(clusters.max()) + 1
        sums = np.zeros((n_clusters, psi.shape[1]))
        np.add.at(sums, clusters, psi)
    else:
        n_clusters, sums = n, psi
    variance = np.einsum("ij,ij->j", sums, sums)
    z = normal_quantile(1 - params["alpha"] / 2)
    if params["n_bootstrap"] == 0 or psi.shape[1] < 2:
        return variance, None, z, "pointwise"
    rng = np.random.default_rng(params["random_state"])
    weights = draw_multipliers(rng, params["n_bootstrap"], n_clusters, "rademacher")
    draws = weights @ sums
    crit = sup_t_critical_value(draws, np.sqrt(variance), params["alpha"],
                                n / np.sqrt(n_clusters))
    if not np.isfinite(crit):
        return variance, draws, z, "pointwise"
    return variance, draws, max(float(crit), z), "simultaneous"
