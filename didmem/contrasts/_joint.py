"""Joint inference on contrasts of profiles from the units' stacked influence functions.

A contrast of profiles (a difference of two, the deviations of several from the first) is
linear in the profiles, so its influence on a unit is the same contrast of the unit's
influence on each profile: ``psi_a(i) - psi_b(i)``. Units are matched by their labels; a
unit in one result only contributes its influence there (zero in the other), so shared
instances are paired, disjoint ones add their variances, and a partial overlap is the
mixture of the two. From the contrast's units x rows influence ``D``:

* standard errors ``sqrt(sum_i D_ir**2)`` (analytic, the protocol's scale);
* a simultaneous band over the rows: the ``1 - alpha`` quantile of ``max_r |Z_r| / se_r``
  with ``Z ~ N(0, D'D)`` (the Gaussian multiplier bootstrap given the data, drawn from its
  exact law);
* a Wald test that every row is zero, ``est' (D'D)^+ est`` against chi-squared with the
  covariance's rank, and a max-t test (the largest ``|est_r| / se_r`` against the draws'
  maxima), which stays calibrated when the rows are many against the units.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import chdtrc

from ..inference.bands import DEGENERATE, normal_quantile
from ..inference.small_sample import block_welch, normal_level, t_critical_values, t_to_normal
from ._unit_influence import UnitInfluence

__all__ = ["Contrast", "JointTest", "contrast", "overlap", "standard_errors"]


def overlap(units_a, units_b) -> tuple[int, int, int]:
    """``(shared, only_a, only_b)`` counts of two sets of unit labels."""
    a, b = pd.Index(units_a), pd.Index(units_b)
    shared = int(a.isin(b).sum())
    return shared, int(a.size - shared), int(b.size - shared)


def pairing_of(shared: int, n_a: int, n_b: int) -> str:
    """``"paired"`` (the same units), ``"independent"`` (none shared) or ``"partial"``."""
    if shared == 0:
        return "independent"
    return "paired" if shared == n_a == n_b else "partial"


def contrast(parts: list[UnitInfluence], coefficients) -> UnitInfluence:
    """``sum_k coefficients[k] * parts[k]`` on the union of their units (matched by label)."""
    index = pd.Index(parts[0].units)
    for part in parts[1:]:
        index = index.union(pd.Index(part.units), sort=False)
    psi = np.zeros((index.size, parts[0].psi.shape[1]))
    estimates = np.zeros(parts[0].psi.shape[1])
    labels = {}
    for k, (part, coef) in enumerate(zip(parts, coefficients)):
        rows = index.get_indexer(pd.Index(part.units))
        if part.groups is not None:
            column = np.full(index.size, "-", dtype=object)
            column[rows] = np.asarray(part.groups).astype(str)
            labels[k] = column
        if coef == 0:
            continue
        np.add.at(psi, rows, coef * part.psi)
        estimates = estimates + coef * np.asarray(part.estimates, dtype=float)
    groups = None
    if len(labels) == len(parts):  # a unit's group: its blocks in every part
        groups = pd.DataFrame(labels).groupby(list(labels), sort=False).ngroup().to_numpy()
    return UnitInfluence(np.asarray(index), psi, estimates, groups)


@dataclass(frozen=True)
class JointTest:
    """A test that a set of contrasts is zero.

    Attributes
    ----------
    method : {"wald", "max_t"}
    statistic, pvalue : float
    df : int
        The Wald statistic's degrees of freedom (the covariance's rank); the number of rows
        tested for ``max_t``.
    note : str
        Why a test is NaN (no row with a variance), empty otherwise.
    """

    method: str
    statistic: float
    pvalue: float
    df: int
    note: str = ""

    def describe(self) -> str:
        if not np.isfinite(self.pvalue):
            return f"{self.method} test not available ({self.note})"
        return f"{self.method} test: statistic {self.statistic:.4g}, df {self.df}, p = {self.pvalue:.4g}"


@dataclass(frozen=True, eq=False)
class Contrast:
    """Estimates, standard errors, band and tests of contrasts with influence ``psi``.

    ``draws`` are ``n_draws`` Gaussian draws of the rows' sampling errors (on the scale of
    the estimates); rows without a variance (``se <= DEGENERATE``) stay out of the band and
    the tests. With the small-sample correction (units' ``groups`` known), ``std_errors``
    are Welch's (each group's plug-in part times ``n_g / (n_g - 1)``), ``df`` the
    Welch-Satterthwaite degrees of freedom, and each row's critical value the t quantile at
    the pointwise level of the normal-scale sup-t value (as
    :mod:`didmem.inference.small_sample` does for a fit's cells); without it,
    ``std_errors`` are ``sqrt(sum_i psi_i**2)`` and every row takes the sup-t value.
    """

    estimates: np.ndarray
    std_errors: np.ndarray
    covariance: np.ndarray = field(repr=False)
    draws: np.ndarray = field(repr=False)
    critical_value: float
    alpha: float
    #: the uncorrected analytic standard errors (which studentise the draws)
    raw_std_errors: np.ndarray = field(default=None, repr=False)
    #: each row's degrees of freedom (inf without the correction)
    df: np.ndarray = field(default=None, repr=False)
    #: each row's critical value (the band's multiplier of its standard error)
    row_critical_values: np.ndarray = field(default=None, repr=False)

    @classmethod
    def of(cls, influence: UnitInfluence, *, alpha: float, n_draws: int, rng,
           band_rows=None, small_sample: bool = True) -> "Contrast":
        """The contrasts with influence ``influence``; the band covers ``band_rows`` (all
        rows by default; an aggregation's band leaves its overall value out)."""
        psi = influence.psi
        cov = psi.T @ psi
        raw = np.sqrt(np.maximum(np.diag(cov), 0.0))
        draws = gaussian_draws(psi, cov, n_draws, rng)
        live = raw > DEGENERATE
        if band_rows is not None:
            live &= np.isin(np.arange(raw.size), band_rows)
        crit = sup_t(draws[:, live], raw[live], alpha)
        se, df = standard_errors(influence, small_sample)
        factor = np.where(raw > DEGENERATE, se / np.where(raw > 0, raw, 1.0), 1.0)
        cov = cov * factor[:, None] * factor[None, :]
        row_crit = t_critical_values(normal_level(crit), df)
        if band_rows is not None:  # rows outside the band: pointwise
            outside = ~np.isin(np.arange(raw.size), band_rows)
            row_crit[outside] = t_critical_values(1 - alpha / 2, df[outside])
        return cls(np.asarray(influence.estimates, dtype=float), se, cov, draws,
                   float(np.nanmax(row_crit[live])) if live.any() else crit, alpha,
                   raw, df, row_crit)

    @staticmethod
    def normal(alpha: float) -> float:
        """The pointwise critical value ``z_{1 - alpha / 2}``."""
        return normal_quantile(1 - alpha / 2)

    @property
    def live(self) -> np.ndarray:
        """Rows with a variance (and a finite estimate)."""
        return (self.raw_std_errors > DEGENERATE) & np.isfinite(self.estimates)

    def interval(self):
        """The band: each row's estimate plus or minus its critical value times its SE."""
        crit = self.row_critical_values
        return (self.estimates - crit * self.std_errors,
                self.estimates + crit * self.std_errors)

    def wald(self, rows=None) -> JointTest:
        """Wald test that the rows (all live rows by default) are zero."""
        rows = self._rows(rows)
        if rows.size == 0:
            return JointTest("wald", np.nan, np.nan, 0, "no contrast has a variance: are the "
                             "two profiles the same?")
        cov = self.covariance[np.ix_(rows, rows)]
        values, vectors = np.linalg.eigh(cov)
        keep = values > values.max() * rows.size * np.finfo(float).eps * 10
        z = vectors[:, keep].T @ self.estimates[rows]
        stat = float(np.sum(z * z / values[keep]))
        df = int(keep.sum())
        return JointTest("wald", stat, float(chdtrc(df, stat)), df)

    def max_t(self, rows=None) -> JointTest:
        """The largest ``|t|`` of the rows against the maxima of the draws."""
        rows = self._rows(rows)
        if rows.size == 0:
            return JointTest("max_t", np.nan, np.nan, 0, "no contrast has a variance: are the "
                             "two profiles the same?")
        # each |t| on the normal scale of its df, against the draws studentised by the
        # uncorrected standard errors (the band's rule)
        t = np.abs(self.estimates[rows]) / self.std_errors[rows]
        stat = float(np.max(t_to_normal(t, self.df[rows])))
        maxima = np.max(np.abs(self.draws[:, rows]) / self.raw_std_errors[rows], axis=1)
        pvalue = (1 + np.sum(maxima >= stat)) / (1 + maxima.size)
        return JointTest("max_t", stat, float(pvalue), int(rows.size))

    def _rows(self, rows) -> np.ndarray:
        live = self.live
        if rows is not None:
            mask = np.zeros(live.size, dtype=bool)
            mask[np.asarray(rows)] = True
            live &= mask
        return np.flatnonzero(live)


def standard_errors(influence: UnitInfluence, small_sample: bool = True):
    """``(std_errors, df)`` of the rows: Welch's over the units' groups with
    ``small_sample`` (and groups known), else ``sqrt(sum_i psi_i**2)`` with ``df = inf``."""
    psi = influence.psi
    raw = np.sqrt(np.einsum("ij,ij->j", psi, psi))
    if not small_sample or influence.groups is None or psi.shape[0] == 0:
        return raw, np.full(raw.size, np.inf)
    codes = pd.factorize(np.asarray(influence.groups))[0]
    parts = np.zeros((int(codes.max()) + 1, raw.size))
    np.add.at(parts, codes, psi * psi)
    var, df = block_welch(parts, np.bincount(codes, minlength=parts.shape[0]))
    se = np.where(raw > DEGENERATE, np.sqrt(var), raw)
    return se, np.where(np.isfinite(df) & (raw > DEGENERATE), df, np.inf)


def gaussian_draws(psi: np.ndarray, cov: np.ndarray, n_draws: int, rng) -> np.ndarray:
    """``n_draws`` draws of ``N(0, psi'psi)``: the Gaussian multiplier bootstrap
    ``sum_i U_i psi_i`` in law, formed from the covariance when the rows are fewer than the
    units (its eigenvectors), else from the units' influence."""
    n_units, n_rows = psi.shape
    if n_draws == 0 or n_rows == 0:
        return np.zeros((n_draws, n_rows))
    if n_rows < n_units:
        values, vectors = np.linalg.eigh(cov)
        root = vectors * np.sqrt(np.maximum(values, 0.0))[None, :]
        return rng.standard_normal((n_draws, n_rows)) @ root.T
    return rng.standard_normal((n_draws, n_units)) @ psi


def sup_t(draws: np.ndarray, se: np.ndarray, alpha: float) -> float:
    """The ``1 - alpha`` quantile (type 1, as R's) of ``max_r |draw_r| / se_r``; the normal
    quantile when there is one row or none, and never below it."""
    normal = normal_quantile(1 - alpha / 2)
    if se.size <= 1 or draws.shape[0] == 0:
        return normal
    maxima = np.max(np.abs(draws) / se[None, :], axis=1)
    return float(max(normal, np.quantile(maxima, 1 - alpha, method="inverted_cdf")))
