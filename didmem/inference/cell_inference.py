"""The one owner of a fit's inference: scale, bootstrap draws, alpha and the band rule.

A group-time estimator builds one :class:`CellInference` per fit (drawing the multiplier
bootstrap once) and hands it to its result. The result's cells, every aggregation, the
pre-test and the covariances then ask this object, so the ``n / sqrt(G)`` scale, the
pointwise-or-simultaneous rule and the draws are written and held in one place.

The small-sample correction (:mod:`didmem.inference.small_sample`: Welch variances and
degrees of freedom, t critical values at the sup-t band's pointwise level) is held here too,
as :attr:`CellInference.correction`, and applied by :meth:`CellInference.cell_band` and
:meth:`CellInference.combination`; ``small_sample=False`` leaves R did's rule.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
from scipy import linalg, sparse
from scipy.special import chdtrc
from threadpoolctl import threadpool_limits

from .._arrays import PicklableProxies, readonly
from ..errors import InferenceWarning, ParameterError
from .pretrend import wald as pretrend_wald
from .bands import analytic_se, bootstrap_se, normal_quantile, simultaneous_band
from .bootstrap import (BootstrapDraws, MultiplierChunks, check_draws_fit, design_multipliers,
                        resolve_multiplier)
from .influence import cell_counts
from .linear import combination_draws
from .pretrend.statistics import PretrendTest
from .pretrend.cells import (DEFAULT_PRETREND, PRETREND_METHODS, event_time_test,
                             max_t_cells_test)
from .small_sample import (SmallSampleCorrection, block_welch, cluster_correction, normal_level,
                           small_sample_correction, t_critical_values)

__all__ = ["CellInference", "InferenceSettings", "Band", "Combination", "PretrendTest", "PRETREND_METHODS",
           "DEFAULT_PRETREND", "cell_counts",
           "normal_quantile"]


@dataclass(frozen=True)
class Band:
    """Standard errors and the critical value that multiplies them."""

    std_errors: np.ndarray
    critical_value: float
    rule: str  # "simultaneous" or "pointwise"
    #: one multiplier per cell under the small-sample correction (``critical_value`` is then
    #: the largest of them); None under R's rule
    cell_critical_values: np.ndarray | None = None


@dataclass(frozen=True)
class Combination:
    """Inference on linear combinations of the cells (the rows of an aggregation).

    ``std_errors`` and ``draws`` have one column per row of the weights; ``covariance`` is
    the analytic covariance of all rows; ``band`` covers the keyed rows (all but the last,
    the overall value).
    """

    std_errors: np.ndarray
    covariance: np.ndarray
    draws: np.ndarray | None
    band: Band
    #: the pointwise multiplier of the overall value (the last row)
    overall_critical_value: float = float("nan")  # always given by CellInference.combination


@dataclass(frozen=True)
class InferenceSettings:
    """A fit's inference settings, resolved once from the estimator's parameters.

    Attributes
    ----------
    n_draws : int
        Multiplier-bootstrap draws (the estimator's ``n_bootstrap``; 0: analytic).
    multiplier : str
        The weights' distribution, resolved (:func:`~didmem.inference.bootstrap.
        resolve_multiplier`: Gaussian with the small-sample correction, Rademacher without).
    seed
        Seed of the bootstrap (None, an int, or a Generator: the caller's).
    alpha : float
    cband : bool or None
    small_sample : bool
    owner : str
        The estimator's name, for messages.
    """

    n_draws: int
    multiplier: str
    seed: Any
    alpha: float
    cband: bool | None
    small_sample: bool
    owner: str = "estimator"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], owner: str) -> "InferenceSettings":
        """From the validated parameters of a group-time estimator."""
        return cls(n_draws=params["n_bootstrap"],
                   multiplier=resolve_multiplier(params["multiplier"], params["small_sample"]),
                   seed=params["seed"], alpha=params["alpha"],
                   cband=params["cband"], small_sample=params["small_sample"], owner=owner)


@dataclass(frozen=True, eq=False)
class CellInference(PicklableProxies):
    """Inference of the group-time cells of one fit.

    Parameters
    ----------
    influence : CellInfluence
        The cells' influence functions, in the form of the fit's route
        (:mod:`didmem.inference.influence`): estimates, variances, the small-sample groups,
        the bootstrap kernel and the combinations' covariances. Its ``prepared`` (the
        prepared panel), ``cells`` (the cell layout) and ``stats`` (the cells' grouped
        statistics, read-only here) are this object's too.
    alpha : float
        One minus the coverage of intervals and bands.
    cband : bool or None
        Ask for a simultaneous (sup-t) band over the cells.
    bootstrap : BootstrapDraws or None
        The multiplier-bootstrap draws (None: analytic standard errors, pointwise bands).
    correction : SmallSampleCorrection or None
        The small-sample correction of the cells (None under R's rule).
    multiplier_choice : str
        The multiplier a bootstrap of this fit uses (also for fresh draws of a pre-test).
    variance : ndarray
        The cells' uncorrected analytic variances (NaN at reference cells).
    """

    influence: Any = field(repr=False)
    alpha: float
    cband: bool | None
    bootstrap: BootstrapDraws | None = field(default=None, repr=False)
    correction: SmallSampleCorrection | None = field(default=None, repr=False)
    multiplier_choice: str = "rademacher"
    variance: np.ndarray | None = field(default=None, repr=False)

    _proxies = ("stats",)

    def __post_init__(self):
        frozen = {name: readonly(value) for name, value in self.influence.stats.items()}
        self.__dict__["stats"] = MappingProxyType(frozen)
        if self.variance is not None:
            object.__setattr__(self, "variance", readonly(self.variance))

    @property
    def prepared(self):
        """The prepared panel the cells were estimated on."""
        return self.influence.prepared

    @property
    def cells(self):
        """The layout of the (cohort, time) cells."""
        return self.influence.cells

    @classmethod
    def draw(cls, influence, settings: InferenceSettings,
             multipliers: MultiplierChunks | None = None) -> "CellInference":
        """The fit's inference: the cells' analytic variances, the small-sample correction
        (with ``settings.small_sample``) and the bootstrap (``settings.n_draws > 0``), all
        from ``influence``.

        ``multipliers`` (from :meth:`start_multipliers`) are the bootstrap's weights already
        being drawn in ``influence``'s chunks.

        ``cband=None`` means a simultaneous band whenever there are draws; ``cband=True``
        warns (:class:`~didmem.InferenceWarning`, naming the owner) when the band cannot be
        simultaneous: without draws, or with two periods.
        """
        prepared, owner = influence.prepared, settings.owner
        if settings.cband and settings.n_draws == 0:
            warnings.warn(
                f"{owner}: cband=True needs bootstrap draws for the simultaneous band, but "
                "n_bootstrap=0: the intervals are pointwise. Pass n_bootstrap > 0, or leave "
                "cband=None.", InferenceWarning, stacklevel=4)
        elif settings.cband and prepared.times.size <= 2:
            warnings.warn(
                f"{owner}: cband=True, but the panel has only two periods (after "
                "pre-processing), so there is no band over periods to make simultaneous: "
                "the intervals are pointwise, as in R did.", InferenceWarning, stacklevel=4)
        rng = None
        if settings.n_draws > 0:
            check_draws_fit(settings.n_draws, influence.cells.size, owner)
            rng = np.random.default_rng(settings.seed)
            if multipliers is None and not isinstance(settings.seed, np.random.Generator):
                # the route's chunks, drawn ahead on the other core while the variances and
                # the correction are computed (a caller's Generator is drawn from only by the
                # bootstrap itself, as a fit that fails must leave it untouched)
                multipliers = influence.bootstrap_chunks(settings.n_draws, settings.multiplier,
                                                         rng, prepared.n_clusters)
        try:
            variance = influence.variance(prepared.clusters, prepared.n_clusters)
            variance[influence.cells.ref == 1] = np.nan
            correction = (small_sample_correction(influence, variance) if settings.small_sample
                          else None)
            boot = None
            if settings.n_draws > 0:
                boot = influence.bootstrap(settings.n_draws, settings.multiplier, rng,
                                           prepared.clusters, prepared.n_clusters,
                                           multipliers=multipliers)
        finally:
            if multipliers is not None:
                multipliers.close()
        return cls(influence=influence, alpha=settings.alpha, cband=settings.cband,
                   bootstrap=boot, correction=correction,
                   multiplier_choice=settings.multiplier, variance=variance)

    @staticmethod
    def start_multipliers(prepared, settings: InferenceSettings) -> MultiplierChunks | None:
        """Start drawing the multipliers of :meth:`draw`'s bootstrap on ``prepared`` (the
        balanced route without covariates) in a helper thread, so that they are drawn while
        the fit computes its cells; pass them to :meth:`draw` and close them when the fit
        ends. None without draws, and for a ``seed`` that is a Generator (it is the
        caller's: a fit that fails stays one that drew nothing from it).
        """
        if settings.n_draws == 0 or isinstance(settings.seed, np.random.Generator):
            return None
        return design_multipliers(prepared, settings.n_draws, settings.multiplier,
                                  np.random.default_rng(settings.seed))

    # ------------------------------------------------------------ settings
    @property
    def n_bootstrap(self) -> int:
        """Number of bootstrap draws (0 without the bootstrap)."""
        return 0 if self.bootstrap is None else self.bootstrap.n_draws

    @property
    def multiplier(self) -> str | None:
        return None if self.bootstrap is None else self.bootstrap.multiplier

    @property
    def scale(self) -> float:
        """``n / sqrt(G)``: turns sums of influence functions into standard errors (R's
        ``bres`` scale), with ``G`` the clusters (the units when not clustered)."""
        return self.prepared.n_units / np.sqrt(self.prepared.n_clusters or self.prepared.n_units)

    @property
    def normal_critical_value(self) -> float:
        """The pointwise critical value ``z_{1 - alpha/2}``."""
        return normal_quantile(1 - self.alpha / 2)

    # ------------------------------------------------------------ the band rule
    def critical_value(self, draws: np.ndarray | None, std_errors: np.ndarray, *,
                       simultaneous: bool, at_least_normal: bool) -> tuple[float, str]:
        """The critical value of a band, and whether it is ``"simultaneous"``.

        Pointwise (the normal quantile) without draws or when a simultaneous band is not
        asked for; otherwise the bootstrap sup-t value (see
        :func:`~didmem.inference.bands.simultaneous_band`).
        """
        if draws is None or not simultaneous:
            return self.normal_critical_value, "pointwise"
        crit, rule = simultaneous_band(draws, std_errors, self.alpha, self.scale,
                                       at_least_normal=at_least_normal)
        return float(crit), rule

    def cell_band(self, variance: np.ndarray) -> tuple[np.ndarray, Band]:
        """Analytic standard errors of the cells from their variances, and the cells' band.

        R's rule: with the bootstrap, the band's standard errors come from the draws (NaN
        where the analytic one is NaN, the reference cells); the band is simultaneous unless
        ``cband`` is False, when there are more than two times. With the small-sample
        correction the standard errors are the Welch ones, the draws give only the band's
        dependence between cells (the sup-t value of the draws studentised by the
        uncorrected analytic standard errors), and each cell gets the t quantile with its
        degrees of freedom at that value's pointwise level.
        """
        analytic = analytic_se(variance)
        se = analytic
        if self.correction is not None:
            se = np.where(np.isnan(analytic), np.nan, analytic_se(self.correction.variance))
        crit, rule = self.normal_critical_value, "pointwise"
        if self.bootstrap is not None:
            boot_se = analytic
            if self.correction is None:
                boot_se = bootstrap_se(self.bootstrap.cells, self.scale)
                se = np.where(np.isnan(analytic), np.nan, boot_se)
            crit, rule = self.critical_value(
                self.bootstrap.cells, boot_se,
                simultaneous=self.cband is not False and self.prepared.times.size > 2,
                at_least_normal=False)
        cell_crit = None
        if self.correction is not None:
            cell_crit = readonly(t_critical_values(normal_level(crit), self.correction.df))
            if np.isfinite(cell_crit).any():
                crit = float(np.nanmax(cell_crit))
        return analytic, Band(se, crit, rule, cell_crit)

    def combination(self, weights: np.ndarray, omega, *, simultaneous: bool) -> Combination:
        """Inference on ``weights @ cells`` (rows: the keys, then the overall value).

        ``omega`` carries the estimated-weights term of R's aggregations; ``simultaneous``
        asks for a sup-t band over the keyed rows (given only when the cells' band is).
        BLAS runs on one thread: its products here are many and small, and more threads
        spin against each other and against the numba kernels (measured: 7x the CPU time).
        """
        with threadpool_limits(limits=1, user_api="blas"):
            return self._combination(weights, omega, simultaneous=simultaneous)

    def _combination(self, weights, omega, *, simultaneous: bool) -> Combination:
        cov, parts = self.influence.combination_moments(weights, omega,
                                                        blocks=self.correction is not None)
        se = analytic_se(np.diag(cov).copy())
        draws = None
        if self.bootstrap is not None:
            draws = combination_draws(self.prepared, self.bootstrap, weights, omega)
            se = bootstrap_se(draws, self.scale)
        crit, rule = self.critical_value(None if draws is None else draws[:, :-1], se[:-1],
                                         simultaneous=simultaneous, at_least_normal=True)
        overall = self.normal_critical_value
        if self.correction is not None:
            se, crit, overall = self._corrected_rows(cov, parts, draws, rule, crit)
        return Combination(std_errors=se, covariance=cov, draws=draws,
                           band=Band(se[:-1], crit, rule), overall_critical_value=overall)

    def _corrected_rows(self, cov, parts, draws, rule, crit):
        """Welch-corrected standard errors and t critical values of combinations' rows.

        Each row's variance is corrected block by block (:func:`~didmem.inference.
        small_sample.block_welch`; CR1 with clusters). A simultaneous band's normal-scale
        sup-t value comes from the draws studentised by the uncorrected analytic standard
        errors, and the keyed rows share the largest of their t quantiles at its pointwise
        level. Returns the standard errors, the keys' critical value and the overall value's
        (pointwise) one.
        """
        raw = np.diag(cov).copy()
        if self.prepared.clusters is not None:
            var, df = cluster_correction(raw, self.prepared.n_clusters)
        else:
            var, df = block_welch(parts, np.diff(self.prepared.starts))
        raw_se = analytic_se(raw)
        se = np.where(np.isnan(raw_se), np.nan, analytic_se(var))
        overall = float(t_critical_values(1 - self.alpha / 2, df[-1:])[0])
        level = 1 - self.alpha / 2
        if rule == "simultaneous":
            c_normal, _ = simultaneous_band(draws[:, :-1], raw_se[:-1], self.alpha, self.scale,
                                            at_least_normal=True)
            level = normal_level(c_normal)
        keys_crit = t_critical_values(level, df[:-1])
        if np.isfinite(keys_crit).any():
            crit = float(np.nanmax(keys_crit))
        return se, crit, overall

    # ------------------------------------------------------------ tests
    def covariance(self, which: np.ndarray) -> np.ndarray:
        """Analytic covariance of the cells ``which``: ``sum_i psi_ci psi_di``, or with
        clusters that of the cluster sums of ``psi``, as R ``did`` 2.5.1 forms the ``V`` of
        its standard errors and Wald pre-test when it clusters without the bootstrap."""
        if self.prepared.clusters is None:
            return self.influence.pretest_covariance(which)
        pick = sparse.csr_matrix((np.ones(which.size), (np.arange(which.size), which)),
                                 shape=(which.size, self.cells.k.size))
        return self.influence.combination_moments(
            pick, np.zeros((which.size, self.prepared.n_cohorts)), blocks=False)[0]

    def pretest(self, estimates: np.ndarray, which: np.ndarray, *,
                n_before: int | None = None) -> tuple[float, int, float, str]:
        """Wald test that the cells ``which`` are all zero (R did's pre-test).

        With hundreds of cells and never-treated controls the statistic comes from the
        covariance's structure (:mod:`didmem.inference.pretrend.wald`), not its dense LU.

        Returns ``(statistic, df, pvalue, note)``: ``statistic = tau' V^-1 tau`` with the
        analytic covariance ``V`` (of the cluster sums with clusters: :meth:`covariance`),
        chi-squared with ``df = len(which)``; NaN, with a note and
        an :class:`~didmem.InferenceWarning`, when ``V`` has a NaN or is singular (R:
        ``rcond(V) <= .Machine$double.eps``; with clusters, whenever the cells are at least
        as many as the clusters, since cluster sums of ``psi`` that add up to zero span at
        most ``G - 1`` dimensions). ``n_before`` counts the pre-treatment cells
        before those without a standard error were left out, for the note when none is left.
        """
        if which.size == 0:
            if n_before:
                return (np.nan, 0, np.nan, f"none of the {n_before} pre-treatment cells has a "
                        "standard error; their variance is zero: is the outcome constant?")
            return np.nan, 0, np.nan, "no pre-treatment cells to test"
        if pretrend_wald.applies(self.prepared, self.cells, which, self.influence):
            with threadpool_limits(limits=1, user_api="blas"):  # many small products
                stat = pretrend_wald.structured_wald(self.prepared, self.cells, self.stats,
                                                     which, np.asarray(estimates)[which],
                                                     self.influence.z_gram)
            if stat is not None:
                return stat, int(which.size), float(chdtrc(which.size, stat)), ""
        n_clusters = self.prepared.n_clusters if self.prepared.clusters is not None else 0
        if n_clusters and which.size >= n_clusters:  # rank of V <= clusters - 1: singular
            note = (f"{which.size} pre-treatment cells but {n_clusters} clusters: the "
                    f"clustered covariance has rank at most {n_clusters - 1}, so it is "
                    "singular (R did reports no Wald test then); pretrend_test(), the event-time "
                    "test, still applies")
            warnings.warn(f"Pre-test not computed: {note}.", InferenceWarning, stacklevel=3)
            return np.nan, int(which.size), np.nan, note
        cov = self.covariance(which)
        if not np.all(np.isfinite(cov)):
            warnings.warn("Pre-test not computed: NaN in the pre-treatment covariance.",
                          InferenceWarning, stacklevel=3)
            return np.nan, int(which.size), np.nan, "NaN in the covariance"
        lu, piv = linalg.lu_factor(cov, check_finite=False)
        rcond, _ = linalg.lapack.dgecon(lu, np.abs(cov).sum(axis=0).max(), norm="1")
        if rcond <= np.finfo(float).eps:
            warnings.warn("Pre-test not computed: the pre-treatment covariance is singular.",
                          InferenceWarning, stacklevel=3)
            return np.nan, int(which.size), np.nan, "singular covariance"
        est = np.asarray(estimates)[which]
        stat = float(est @ linalg.lu_solve((lu, piv), est, check_finite=False))
        return stat, int(which.size), float(chdtrc(which.size, stat)), ""

    def pretrend_test(self, method: str | None, *, estimates, std_errors, analytic_std_errors,
                      which: np.ndarray, event_rows, seed) -> PretrendTest:
        """The calibrated pre-tests of parallel trends (``"event"``, the default, or
        ``"max_t"``) over the pre-treatment cells ``which``.

        ``event_rows`` is ``(weights, omega)`` of the dynamic aggregation's rows at negative
        event times (only read by ``"event"``); ``seed`` seeds the draws of the maximum-absolute-t
        test when the fit has none. R's Wald test is :meth:`pretest`.
        """
        method = DEFAULT_PRETREND if method is None else method
        if method == "event":
            weights, omega = event_rows if event_rows is not None else (None, None)
            return event_time_test(self, estimates, std_errors, which, weights, omega)
        if method == "max_t":
            return max_t_cells_test(self, estimates, analytic_std_errors, which, seed)
        raise ParameterError(f"The 'method' parameter of pretrend_test must be one of "
                             f"{set(PRETREND_METHODS)}. Got {method!r}.")

    def std_error_note(self) -> str:
        """Which standard error the results' ``std_error`` column holds (for summaries)."""
        if self.correction is not None:
            return ("std_error: the analytic (influence-function) standard error with the "
                    "small-sample correction (Welch), not R did's bootstrap-IQR one, which can "
                    "be larger; each cell's interval uses its own t critical value, so a band "
                    "can be wider than R's while its std_error is smaller")
        if self.bootstrap is not None:
            return "std_error: the bootstrap standard error (IQR of the draws), as R did reports"
        return ("std_error: the analytic (influence-function) standard error, as R did's "
                "bstrap=FALSE")

    def describe(self, critical_value: float, rule: str,
                 cell_critical_values: np.ndarray | None = None) -> str:
        """One line naming the inference and a band of it (printed in summaries)."""
        corrected = " with small-sample (Welch, t) correction" if self.correction else ""
        if self.bootstrap is None:
            return f"analytic standard errors (influence function){corrected}; pointwise intervals"
        if cell_critical_values is not None:
            crit = np.asarray(cell_critical_values)
            crit = crit[np.isfinite(crit)]
            lo_c, hi_c = (crit.min(), crit.max()) if crit.size else (np.nan, np.nan)
            return (f"multiplier bootstrap, {self.n_bootstrap} {self.multiplier} draws; "
                    f"{rule} {100 * (1 - self.alpha):g}% band{corrected}, critical values "
                    f"{lo_c:.3f}-{hi_c:.3f}")
        return (f"multiplier bootstrap, {self.n_bootstrap} {self.multiplier} "
                f"draws; {rule} {100 * (1 - self.alpha):g}% band, critical value "
                f"{critical_value:.3f}")
