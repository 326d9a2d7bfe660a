r"""The dose-response of repeated exposure where exposure counts are assigned at random.

Hubble (and any design that inserts instances a random number of times) assigns each
instance a dose ``d`` (0, 1, 2, 4, ...) independently of its outcomes, so the cumulative
effect of ``d`` exposures against none at checkpoint ``c`` is identified by a comparison
of means,

.. math:: \theta(d, c) = \bar Z_{c}(d) - \bar Z_{c}(0), \qquad
          Z_{ic} = Y_{ic} \; \text{or} \; Y_{ic} - Y_{ib},

in levels, or in changes since a base checkpoint ``b`` (a difference in differences: the
same target under random assignment, more precise when instances differ in difficulty).
The influence function of unit ``i`` is ``(Z_i - mean_d) / n_d`` in dose group ``d`` and
``-(Z_i - mean_0) / n_0`` among the unexposed; the analytic variance is the sum of its
squares (Welch's unequal-variance standard error up to ``n / (n - 1)``, which is applied),
and a Gaussian multiplier bootstrap of the same sums gives the sup-t critical value of a
band over every (dose, checkpoint) row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import Alpha, Instance, Integral, Seed, validate_params
from ..errors import ParameterError, PanelError
from ..inference.bands import normal_quantile, sup_t_critical_value
from ..results.dose import DoseResponseResult

__all__ = ["dose_response"]

_CONSTRAINTS = {
    "data": Instance(pd.DataFrame, description="a pandas DataFrame"),
    "alpha": Alpha(),
    "n_bootstrap": Integral(0),
    "seed": Seed(),
}


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _wide(data, unit, time, dose, outcome):
    missing = [c for c in (unit, time, dose, outcome) if c not in data.columns]
    if missing:
        raise PanelError(f"dose_response: missing columns {missing}; the data has "
                         f"{list(data.columns)}.")
    frame = data[[unit, time, dose, outcome]]
    doses = frame.groupby(unit, sort=True)[dose].agg(["min", "max"])
    varying = doses.index[doses["min"] != doses["max"]]
    if varying.size:
        raise PanelError(f"dose_response: column {dose!r} changes over time for {varying.size} "
                         f"units, e.g. unit {_plain(varying[0])!r}; it holds the number of exposures "
                         "assigned to a unit, one value per unit.")
    d = doses["min"].to_numpy(dtype=float)
    bad = ~np.isfinite(d) | (d < 0) | (d != np.round(d))
    if bad.any():
        raise PanelError(f"dose_response: column {dose!r} must hold non-negative whole "
                         f"numbers (0: never exposed); {int(bad.sum())} units do not, e.g. "
                         f"unit {_plain(doses.index[bad][0])!r} with {float(d[bad][0])!r}.")
    if frame.duplicated([unit, time]).any():
        raise PanelError(f"dose_response: several rows for one ({unit!r}, {time!r}) pair.")
    y = frame.pivot(index=unit, columns=time, values=outcome).sort_index()
    holes = y.isna().to_numpy()
    if holes.any():
        u = y.index[holes.any(axis=1)]
        raise PanelError(f"dose_response: {int(holes.sum())} missing outcomes in {outcome!r} "
                         f"({u.size} units, e.g. unit {_plain(u[0])!r}); it needs every unit at every "
                         "time.")
    return y.to_numpy(dtype=float), y.columns.to_numpy(), d


@validate_params(_CONSTRAINTS, owner="dose_response")
def dose_response(data, *, unit: str = "unit", time: str = "time", dose: str = "dose",
                  outcome: str = "y", base=None, alpha: float = 0.05, n_bootstrap: int = 999,
                  seed=None) -> DoseResponseResult:
    """Estimate the cumulative effect of ``d`` exposures against none, by ``d`` and checkpoint.

    Parameters
    ----------
    data : pandas.DataFrame
        Long table: one row per (unit, time) with the unit's assigned number of exposures
        in ``dose`` (constant per unit; 0 for instances never inserted, the comparison
        group) and the outcome (higher = better predicted).
    unit, time, dose, outcome : str
        Column names.
    base : optional
        A time whose outcome is subtracted from each unit's (a checkpoint before any
        insertion, e.g. step 0): estimates are then differences in differences. None: in
        levels. The base time's own rows are left out.
    alpha : float
        One minus the band's coverage.
    n_bootstrap : int
        Gaussian multiplier draws for the simultaneous band over all rows; 0 gives
        pointwise intervals.
    seed : None, int or numpy.random.Generator

    Returns
    -------
    DoseResponseResult

    Raises
    ------
    PanelError
        For missing columns or outcomes, a dose that varies within a unit or is not a
        non-negative whole number.
    ParameterError
        Without unexposed units or without any dose above 0, or for a ``base`` that is not
        one of the times.

    Notes
    -----
    Random assignment of the counts is what identifies the effect; where counts follow the
    data (duplicates in a web crawl), the comparison is confounded. Hubble: Wei et al.
    (2025); log-linear growth of extraction with duplication: Carlini et al. (2023).
    """
    y, times, d = _wide(data, unit, time, dose, outcome)
    if base is not None:
        where = np.flatnonzero(times == base)
        if where.size == 0:
            raise ParameterError(f"dose_response: base={_plain(base)!r} is not one of the "
                                 f"times {times.tolist()}.")
        y = np.delete(y - y[:, where], where, axis=1)
        times = np.delete(times, where)
    levels = np.unique(d)
    if levels[0] != 0 or levels.size < 2:
        raise ParameterError(
            f"dose_response needs units with dose 0 (never exposed) and units with a dose "
            f"above 0; the doses are {levels.tolist()}.")
    groups = [np.flatnonzero(d == v) for v in levels]
    means = np.array([y[g].mean(axis=0) for g in groups])  # doses x times
    counts = np.array([g.size for g in groups])
    ss = np.array([((y[g] - means[j]) ** 2).sum(axis=0) for j, g in enumerate(groups)])
    var_mean = ss / np.maximum(counts - 1, 1)[:, None] / counts[:, None]  # Welch
    est = means[1:] - means[0]
    se = np.sqrt(var_mean[1:] + var_mean[0])
    crit, band = normal_quantile(1 - alpha / 2), "pointwise"
    if n_bootstrap > 0 and est.size > 1:
        crit = _sup_t(y, groups, means, counts, se, alpha, n_bootstrap, seed)
        band = "simultaneous"
    rows = pd.DataFrame({
        "dose": np.repeat(levels[1:], times.size),
        "time": np.tile(times, levels.size - 1),
        "estimate": est.ravel(), "std_error": se.ravel(),
        "ci_lower": (est - crit * se).ravel(), "ci_upper": (est + crit * se).ravel(),
        "n_units": np.repeat(counts[1:], times.size), "n_control": counts[0],
    })
    return DoseResponseResult(table=rows, outcome=outcome, base=base, alpha=alpha,
                              critical_value=float(crit), band=band,
                              n_bootstrap=int(n_bootstrap if band == "simultaneous" else 0))


def _sup_t(y, groups, means, counts, se, alpha, n_draws, seed) -> float:
    """The sup-t critical value over all rows from Gaussian multiplier draws.

    Each dose group's draw is ``sum_i U_i (Z_i - mean) / n`` scaled by ``sqrt(n / (n-1))``,
    so that its variance given the data is the Welch variance of the mean.
    """
    rng = np.random.default_rng(seed)
    draws = np.empty((n_draws, len(groups), y.shape[1]))
    for j, g in enumerate(groups):
        scale = np.sqrt(counts[j] / max(counts[j] - 1, 1)) / counts[j]
        draws[:, j] = rng.standard_normal((n_draws, g.size)) @ (y[g] - means[j]) * scale
    rows = (draws[:, 1:] - draws[:, :1]).reshape(n_draws, -1)
    crit = sup_t_critical_value(rows, se.ravel(), alpha, 1.0)
    return float(crit) if np.isfinite(crit) else normal_quantile(1 - alpha / 2)
