"""How memorisation varies with a continuous instance moderator: best linear projections.

For cell ``(g, c)`` with base period ``b`` and outcome change ``dY_i = Y_ic - Y_ib``, the
treated cohort's regression of ``dY`` on the moderator ``m`` has slope ``beta_1``, the
controls' ``beta_0``; under parallel trends for every value of ``m`` (the controls' change
has the treated's untreated slope), ``beta_1 - beta_0`` is the slope of the best linear
projection of the instance-level effect ``tau_i(g, c)`` on ``m`` among the cohort's
instances. Aggregations average the cells' slopes with the profile's own weights (R
``did``'s, with the estimated-weights term).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from .._messages import python_scalar
from .._validation import validate_params
from ..errors import EstimationError, ParameterError
from ..inference.influence import add_estimated_weights
from ..results.common import Estimate, level_label
from ..results.aggregations import build_aggregation, canonical_aggregation
from ._joint import Contrast
from ._unit_influence import UnitInfluence, unit_blocks
from .subgroups import FEATURE, INFERENCE_CONSTRAINTS, feature_label, unit_feature

__all__ = ["moderator_slopes", "ModeratorResult", "slope_influence"]

_CONSTRAINTS = {"moderator": FEATURE, **INFERENCE_CONSTRAINTS}


def _slope(m, dy, w, leverage: bool = False):
    """Weighted least-squares slope of ``dy`` on ``m`` and its per-unit influence
    ``w_i (m_i - mbar) e_i / S`` (``S = sum w (m - mbar)**2``); NaN without spread in ``m``.
    With ``leverage``, each term is divided by ``sqrt(1 - h_i)`` (``h`` the hat matrix's
    diagonal), so that the sum of squares is the HC2 variance (MacKinnon & White 1985)."""
    mbar = np.average(m, weights=w)
    dm = m - mbar
    s = np.sum(w * dm * dm)
    if not s > 1e-12 * max(1.0, np.sum(w * m * m)):
        return np.nan, np.zeros_like(m)
    beta = np.sum(w * dm * dy) / s
    resid = dy - np.average(dy, weights=w) - beta * dm
    psi = w * dm * resid / s
    if leverage:
        h = w / np.sum(w) + w * dm * dm / s
        psi = psi / np.sqrt(np.maximum(1.0 - h, 1e-12))
    return beta, psi


def slope_influence(result, moderator: np.ndarray, leverage: bool = False):
    """Every cell's slope difference and its units x cells influence (balanced panels).

    ``moderator`` is aligned with ``result.prepared``'s rows. Returns ``(slopes, treated,
    control, psi)``; reference cells are 0 with no influence.
    """
    prepared, cells = result.prepared, result.cells
    if prepared.y is None or prepared.x is not None:
        raise EstimationError("moderator_slopes needs a balanced panel without covariates "
                              "(the outcome changes of every instance).")
    n_cells = cells.k.size
    slopes, b1, b0 = np.zeros(n_cells), np.zeros(n_cells), np.zeros(n_cells)
    psi = np.zeros((prepared.n_units, n_cells))
    block = prepared.block_of_rows()
    for c in range(n_cells):
        if cells.ref[c]:
            continue
        t, b, k = cells.t[c], cells.b[c], cells.k[c]
        dy = prepared.y[:, t] - (prepared.y[:, b] if b >= 0 else 0.0)
        treated = block == k
        control = (block >= cells.cs[c]) & ~treated
        b1[c], psi_t = _slope(moderator[treated], dy[treated], prepared.w[treated], leverage)
        b0[c], psi_c = _slope(moderator[control], dy[control], prepared.w[control], leverage)
        slopes[c] = b1[c] - b0[c]
        psi[treated, c] = psi_t
        psi[control, c] = -psi_c
    return slopes, b1, b0, psi


@validate_params(_CONSTRAINTS, owner="moderator_slopes")
def moderator_slopes(panel, moderator, *, estimator=None, alpha=None, n_draws=999,
                     seed=0, small_sample=True) -> "ModeratorResult":
    r"""The best linear projection of the instance-level memorisation on a moderator.

    Parameters
    ----------
    panel : Panel
        A balanced single-run panel without covariates.
    moderator : str, pandas.Series or mapping
        A continuous instance feature (length, log token frequency, duplicate count, the
        loss at the first checkpoint): a Series or mapping from unit to value, or a
        covariate of the panel constant within units. Every unit needs a value.
    estimator : DiDEstimator, optional
        Gives the design: control group, base period, anticipation (default
        ``DiDEstimator()``).
    alpha : float, optional
    n_draws : int
        Gaussian draws of the simultaneous bands.
    seed : None, int or Generator
    small_sample : bool
        The regressions' HC2 variances (each residual's term divided by
        ``sqrt(1 - h_i)``, its leverage), Welch's correction by block of instances and t
        multipliers (see :func:`~didmem.compare_profiles`); False: HC0 and the normal-scale
        sup-t value.

    Returns
    -------
    ModeratorResult

    Notes
    -----
    Per cell, ``slope = beta_1 - beta_0`` with weighted least-squares slopes of the outcome
    change on the moderator among the treated cohort (``beta_1``) and the controls
    (``beta_0``). The influence of treated instance ``i`` is
    ``w_i (m_i - mbar_1) e_i / S_1``, of a control ``-w_i (m_i - mbar_0) e_i / S_0``
    (``e`` the residuals, ``S`` the weighted sums of squares of ``m``); standard errors are
    ``sqrt(sum_i psi_i**2)`` (the two regressions' HC0 variances added) or, with
    ``small_sample``, their HC2 variances with Welch's factor by block of instances, and
    the band the Gaussian sup-t band over cells. The slope
    identifies the projection of ``tau_i(g, c)`` on ``m`` when parallel trends hold
    conditionally on ``m`` linearly (the untreated outcome change has the same slope on
    ``m`` in the cohort and the controls); the moderator's own pre-treatment slopes are a
    placebo check of that.
    """
    from ..estimators import DiDEstimator

    estimator = DiDEstimator() if estimator is None else estimator
    values = unit_feature(panel, moderator, owner="moderator_slopes")
    if not pd.api.types.is_numeric_dtype(values.dtype):  # a pandas string dtype too
        raise ParameterError(f"moderator_slopes: the moderator{feature_label(values.name)} is "
                             f"not numeric ({values.dtype}); use heterogeneity for a category.")
    result = estimator.fit(panel)
    m = values.reindex(pd.Index(result.prepared.unit_labels)).to_numpy(dtype=float)
    if not np.all(np.isfinite(m)):
        bad = values.index[~np.isfinite(values.to_numpy(dtype=float))]
        raise ParameterError(f"moderator_slopes: the moderator{feature_label(values.name)} is "
                             f"not finite for unit {python_scalar(bad[0])!r} ({bad.size} "
                             "units); give every instance a finite value.")
    slopes, b1, b0, psi = slope_influence(result, m, leverage=small_sample)
    _refuse_undefined_slopes(values.name, result, m, slopes, b1)
    alpha = float(result.alpha if alpha is None else alpha)
    return ModeratorResult(moderator=values.name, result=result, slopes=slopes,
                           treated_slopes=b1, control_slopes=b0, psi=psi, alpha=alpha,
                           n_draws=n_draws, seed=seed, small_sample=small_sample)


def _refuse_undefined_slopes(name, result, m, slopes, treated_slopes) -> None:
    """A moderator with one value among a cell's treated instances or its controls has no
    slope there (NaN): refused here, naming the cohort, rather than NaN cells and bands (and
    aggregations that cannot be drawn)."""
    bad = np.flatnonzero(~np.isfinite(slopes))
    if not bad.size:
        return
    cells = result.cells
    c = int(bad[0])
    block = result.prepared.block_of_rows()
    cohort = float(np.asarray(result.prepared.cohorts)[cells.k[c]])
    group = block == cells.k[c] if not np.isfinite(treated_slopes[c]) else \
        (block >= cells.cs[c]) & (block != cells.k[c])
    who = "the instances of" if not np.isfinite(treated_slopes[c]) else "the controls of"
    values = np.unique(m[group])
    where = f"cohort {cohort:g} (checkpoint {float(result.prepared.times[cells.t[c]]):g})"
    raise EstimationError(
        f"moderator_slopes: the moderator{feature_label(name)} takes the single value "
        f"{values[0]:g} among {who} {where} ({int(group.sum())} instances), so its slope "
        f"there is not defined ({bad.size} of {slopes.size} cells); give a moderator that "
        "varies within every cohort and among the controls, or compare categories with "
        "heterogeneity.")


@dataclass(frozen=True, eq=False)
class ModeratorResult:
    """Slopes of memorisation on a moderator (from :func:`moderator_slopes`).

    Attributes
    ----------
    moderator : str
    result : GroupTimeResult
        The profile whose design the slopes share.
    slopes, treated_slopes, control_slopes : ndarray
        Per cell of ``result``.
    psi : ndarray
        Units x cells influence of the slopes.
    """

    moderator: object
    result: object = field(repr=False)
    slopes: np.ndarray = field(repr=False)
    treated_slopes: np.ndarray = field(repr=False)
    control_slopes: np.ndarray = field(repr=False)
    psi: np.ndarray = field(repr=False)
    alpha: float
    n_draws: int = field(default=999, repr=False)
    seed: object = field(default=0, repr=False)
    small_sample: bool = field(default=True, repr=False)

    def _influence(self, psi, estimates) -> UnitInfluence:
        prepared = self.result.prepared
        return UnitInfluence(prepared.unit_labels, psi, estimates, unit_blocks(prepared))

    @cached_property
    def _live(self) -> np.ndarray:
        return np.flatnonzero(np.asarray(self.result.cells.ref) == 0)

    @cached_property
    def contrast(self) -> Contrast:
        live = self._live
        return Contrast.of(self._influence(self.psi[:, live], self.slopes[live]),
                           alpha=self.alpha, n_draws=self.n_draws,
                           rng=np.random.default_rng(self.seed), small_sample=self.small_sample)

    def to_frame(self) -> pd.DataFrame:
        """One row per non-reference cell: cohort, time, event_time, post, slope,
        treated_slope, control_slope, std_error, ci_lower, ci_upper (simultaneous band),
        significant."""
        live = self._live
        c = self.contrast
        lo, hi = c.interval()
        r = self.result
        return pd.DataFrame({
            "cohort": r.cohorts[live], "time": r.times[live],
            "event_time": (r.times - r.cohorts)[live], "post": (r.cohorts <= r.times)[live],
            "slope": c.estimates, "treated_slope": self.treated_slopes[live],
            "control_slope": self.control_slopes[live], "std_error": c.std_errors,
            "ci_lower": lo, "ci_upper": hi, "significant": (lo > 0) | (hi < 0)})

    def aggregate(self, aggregation: str = "simple") -> pd.DataFrame:
        """The slopes averaged as the profile's aggregation (default options): one row per
        key and a last row ``overall`` (key NaN); ``ci_lower``/``ci_upper`` are the
        simultaneous band over keys, and pointwise for the overall row."""
        aggregation = canonical_aggregation(aggregation)
        r = self.result
        spec = build_aggregation(r.prepared, r.cells, self.slopes, aggregation)
        est = spec.weights @ self.slopes
        psi = add_estimated_weights(np.array((spec.weights @ self.psi.T).T, dtype=float),
                                    r.prepared, spec.omega)
        n_keys = spec.keys.size
        c = Contrast.of(self._influence(psi, est), alpha=self.alpha,
                        n_draws=self.n_draws, rng=np.random.default_rng(self.seed),
                        band_rows=np.arange(n_keys), small_sample=self.small_sample)
        lo, hi = c.interval()  # the overall row's is pointwise
        return pd.DataFrame({spec.key_name or "key": np.append(spec.keys, np.nan),
                             "overall": np.arange(n_keys + 1) == n_keys,
                             "slope": c.estimates, "std_error": c.std_errors,
                             "ci_lower": lo, "ci_upper": hi,
                             "significant": (lo > 0) | (hi < 0)})

    def overall(self, aggregation: str = "simple") -> Estimate:
        """The overall slope of an aggregation, with a pointwise interval."""
        row = self.aggregate(aggregation).iloc[-1]
        return Estimate(float(row["slope"]), float(row["std_error"]), float(row["ci_lower"]),
                        float(row["ci_upper"]))

    def plot(self, **options):
        """The slope by event time with its band (:func:`didmem.results.plotting.plot_slopes`)."""
        from ..results.plotting import plot_slopes

        return plot_slopes(self, **options)

    def summary(self) -> str:
        lines = [f"Memorisation by moderator {self.moderator!r} (best linear projection; "
                 f"{level_label(self.alpha)} bands)"]
        for name in ("instantaneous", "persistent", "residual", "simple"):
            try:
                o = self.overall(name)
                lines.append(f"  {name}: slope {o.estimate:.4g} (SE {o.std_error:.3g}, "
                             f"CI [{o.ci_lower:.4g}, {o.ci_upper:.4g}])")
            except EstimationError as exc:
                lines.append(f"  {name}: {exc}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<ModeratorResult {self.moderator!r}: {self._live.size} cells>"
