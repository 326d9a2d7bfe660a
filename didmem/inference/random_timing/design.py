r"""Roth & Sant'Anna's efficient estimator under random (staggered) timing, from cohort moments.

Under random timing (the cohort of every unit is drawn at random, cohort sizes fixed) every
estimand below is ``theta = sum_g A_theta[g] . E[Y_g]`` over cohorts ``g`` and outcome paths
``Y``, and every pre-treatment comparison ``X = sum_g A_0[g] . Ybar_g`` has mean zero. The
estimator is

.. math:: \hat\theta_\beta = \sum_g A_{\theta,g} \bar Y_g - \beta \sum_g A_{0,g} \bar Y_g,

(``beta = 0``: difference in means; ``beta = 1``: Callaway & Sant'Anna with not-yet-treated
controls, or Sun & Abraham with the last cohort; the plug-in efficient
``beta* = Cov(X, theta0) / Var(X)`` with the design-based moments
``Var(X) = sum_g A_0g S_g A_0g' / N_g`` and ``Cov = sum_g A_0g S_g A_theta g' / N_g``, where
``S_g`` is cohort ``g``'s sample covariance of the outcome paths). Its design-based variance
is bounded by the Neyman form ``sum_g (A_theta g - beta A_0g) S_g (...)' / N_g``
(``se_neyman``); ``se`` subtracts the estimable part of the treatment-effect heterogeneity
(Roth & Sant'Anna 2023, Proposition 3.1): with ``g_min`` the first cohort with a non-zero
``A_theta``, ``M`` the selector of the periods before ``g_min``, ``b = sum_{g >= g_min}
(M S_g M')^+ M S_g A_theta g'`` and ``Q`` the mean of ``M S_g M'`` over those cohorts,
``se^2 = se_neyman^2 - b' Q b / N``. Both follow R ``staggered`` (1.2.3) formula for formula,
including its conventions (``beta`` solved by normal equations, ``0`` when ``Var(X) = 0``;
negative variances set to 0; the generalised inverse with R ``MASS::ginv``'s tolerance).

Everything is computed from the per-cohort counts, means and covariance matrices of the
outcome paths (:class:`~didmem.inference.moments.cohort.CohortMoments` without weights), so a fit
costs nothing that grows with the units once those are gathered.

References
----------
Roth, J. and Sant'Anna, P. H. C. (2023). Efficient estimation for staggered rollout designs.
Journal of Political Economy Microeconomics 1(4), 669-709.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ...errors import EstimationError

__all__ = ["TimingDesign", "LinearEstimates", "EstimandRows", "linear_estimates", "cell_estimates",
           "event_study_vcv", "generalised_inverse", "Projections", "plug_in_beta"]

_GINV_TOL = np.sqrt(np.finfo(np.float64).eps)


@dataclass(frozen=True, eq=False)
class TimingDesign:
    """Per-cohort moments of a balanced panel on coded positions.

    Attributes
    ----------
    times : ndarray (T,)
        The times, ascending.
    cohorts : ndarray (K,)
        The cohorts, ascending (``inf`` for never-treated units).
    codes : ndarray (K,)
        Each cohort's position: the index of its first treated time (``T + r`` for the
        ``r``-th cohort after the last time, ``inf`` for never-treated, ``-r`` for the
        ``r``-th-latest cohort before the first time, ``0`` for one treated at it).
    count : ndarray (K,)
        Units per cohort.
    mean : ndarray (K, T)
        Mean outcome path per cohort.
    cov : ndarray (K, T, T)
        Sample covariance (divisor ``N_g - 1``) of the outcome paths per cohort.
    """

    times: np.ndarray
    cohorts: np.ndarray
    codes: np.ndarray
    count: np.ndarray
    mean: np.ndarray
    cov: np.ndarray

    @classmethod
    def from_moments(cls, moments) -> "TimingDesign":
        """The design of unweighted :class:`~didmem.inference.moments.cohort.CohortMoments`."""
        if np.any(moments.weight != moments.count) or np.any(moments.weight_sq != moments.count):
            raise EstimationError("The random-timing estimator takes unweighted moments; "
                                  "these carry sampling weights.")
        if np.any(moments.count < 2):
            small = moments.cohorts[moments.count < 2]
            raise EstimationError(f"Cohorts {small.tolist()} have fewer than 2 units: their "
                                  "covariance is undefined.")
        cov = moments.cross / (moments.count - 1.0)[:, None, None]
        return cls(times=np.asarray(moments.times, dtype=np.float64),
                   cohorts=np.asarray(moments.cohorts, dtype=np.float64),
                   codes=cohort_codes(moments.times, moments.cohorts),
                   count=np.asarray(moments.count, dtype=np.float64),
                   mean=np.asarray(moments.mean), cov=cov)

    @classmethod
    def from_paths(cls, times, cohorts, y) -> "TimingDesign":
        """The design of the outcome paths ``y`` (units x times) with their cohorts."""
        from ..moments.cohort import CohortMoments

        return cls.from_moments(CohortMoments.from_paths(times, cohorts, y))

    @property
    def n_times(self) -> int:
        return int(self.times.size)

    @property
    def n_units(self) -> int:
        return int(self.count.sum())


def cohort_codes(times, cohorts) -> np.ndarray:
    """Positions of ``cohorts`` on the grid ``times`` (see :class:`TimingDesign`).

    Raises
    ------
    EstimationError
        When two cohorts would share a position (both first treated at the same time).
    """
    times = np.asarray(times, dtype=np.float64)
    cohorts = np.asarray(cohorts, dtype=np.float64)
    n_t = times.size
    codes = np.searchsorted(times, cohorts, side="left").astype(np.float64)
    after = np.isfinite(cohorts) & (cohorts > times[-1])
    codes[after] = n_t + np.arange(int(after.sum()))
    before = cohorts < times[0]
    codes[before] = -np.arange(int(before.sum()), 0, -1) + 0.0
    codes[np.isinf(cohorts) & (cohorts > 0)] = np.inf
    if np.unique(codes).size != codes.size:
        inside = ~after & ~before & np.isfinite(cohorts)
        raise EstimationError(
            "Cohorts must be treated first at distinct times of the grid; cohorts "
            f"{cohorts[inside][np.diff(np.r_[-1.0, codes[inside]]) == 0].tolist()} share "
            "their first treated time with another cohort.")
    return codes


def generalised_inverse(a: np.ndarray) -> np.ndarray:
    """Moore-Penrose inverse of symmetric matrices (stacked), with R ``MASS::ginv``'s
    tolerance: singular values below ``sqrt(eps)`` times the largest count as zero.

    A matrix whose condition number is certainly below that threshold (the 1-norm bound
    ``m * cond_1``) has no singular value cut, and its inverse is the plain one (LU, much
    cheaper than the eigendecomposition that the others take).
    """
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 2:
        return generalised_inverse(a[None])[0]
    m = a.shape[-1]
    out = np.empty_like(a)
    plain = np.zeros(a.shape[0], dtype=bool)
    with np.errstate(all="ignore"):
        try:
            inv = np.linalg.inv(a)
        except np.linalg.LinAlgError:
            inv = None
    if inv is not None:
        cond = np.abs(a).sum(axis=-2).max(axis=-1) * np.abs(inv).sum(axis=-2).max(axis=-1)
        plain = np.isfinite(cond) & (m * cond < 0.1 / _GINV_TOL)
        out[plain] = inv[plain]
    rest = np.flatnonzero(~plain)
    if rest.size:
        vals, vecs = np.linalg.eigh(a[rest])
        mag = np.abs(vals)
        keep = mag > _GINV_TOL * mag.max(axis=-1, keepdims=True)
        kept = np.where(keep, 1.0 / np.where(keep, vals, 1.0), 0.0)
        out[rest] = (vecs * kept[..., None, :]) @ np.swapaxes(vecs, -1, -2)
    return out


@dataclass(frozen=True, eq=False)
class LinearEstimates:
    """Estimates of a stack of linear estimands (one per row)."""

    estimate: np.ndarray
    std_error: np.ndarray
    std_error_neyman: np.ndarray
    beta: np.ndarray
    x_hat: np.ndarray
    theta0: np.ndarray
    df: np.ndarray  # Welch-Satterthwaite degrees of freedom of the Neyman variance


def _welch_df(per_cohort: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``(sum_k V_k)^2 / sum_k V_k^2 / (N_k - 1)`` of per-cohort variance parts (K, J)."""
    total = per_cohort.sum(axis=0)
    denom = (per_cohort ** 2 / (n - 1.0)[:, None]).sum(axis=0)
    return np.where(denom > 0, total ** 2 / np.where(denom > 0, denom, 1.0), np.inf)


def _first_cohort(a_theta: np.ndarray) -> np.ndarray:
    """Index of the first cohort with a non-zero row of ``A_theta`` (R's ``computeGMin``)."""
    nonzero = np.abs(a_theta).max(axis=-1) != 0  # (J, K)
    return np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), 0)


class Projections:
    """``(M S_g M')^+ M S_g`` of the cohorts from a first one on, computed once per first
    cohort and shared by every estimand of a fit (the cells and the aggregations)."""

    def __init__(self, design: TimingDesign):
        self.design = design
        self._cache: dict = {}

    def __call__(self, first: int):
        """``(proj (L, m, T), Q (m, m))`` for the cohorts ``first ..`` (L of them), or None
        when the first cohort is treated at or before the first time."""
        if first not in self._cache:
            design = self.design
            m = design.codes[first]
            if not m > 0:
                self._cache[first] = None
            else:
                m = int(min(m, design.n_times))
                s = design.cov[first:]
                pre = s[:, :m, :m]
                # (many small products: the fit runs them under one BLAS thread; a limit
                # here, set per first cohort, cost 0.13 s CPU of the paper-scale fit)
                proj = generalised_inverse(pre) @ s[:, :m, :]
                self._cache[first] = (proj, pre.mean(axis=0))
        return self._cache[first]


def _heterogeneity_terms(projections: Projections, a_theta: np.ndarray, first: int):
    """``b`` (J, m) and ``Q`` (m, m) of the refinement for the cohorts from ``first`` on (the
    cohorts are sorted, so those with ``g >= g_min`` are ``first ..``), or None."""
    got = projections(first)
    if got is None:
        return None
    proj, q = got
    b = np.einsum("lmt,jlt->jm", proj, a_theta[:, first:, :])
    return b, q


@dataclass(frozen=True, eq=False)
class EstimandRows:
    """A stack of estimands' ``A_theta``, ``A_0`` (J, K, T), with the cohort-major copies
    (K, J, T) that the per-cohort products take: prepared once where the same estimands are
    evaluated on many designs (the permutations of a Fisher test)."""

    a_theta: np.ndarray
    a_0: np.ndarray
    blocks: tuple  # (rows, (a0 lo, hi), (theta lo, hi), A_0 block, A_theta block)

    @classmethod
    def of(cls, a_theta, a_0, block_rows: int = 16) -> "EstimandRows":
        """Rows sorted by where their non-zero times lie, in blocks of ``block_rows``, each
        block cut to the times any of its rows uses (an event time's rows use about half of
        them), so that the quadratic forms cost ``|block| x |times|^2`` per cohort."""
        a_theta = np.asarray(a_theta, dtype=np.float64)
        a_0 = np.asarray(a_0, dtype=np.float64)
        if a_theta.ndim == 2:
            a_theta, a_0 = a_theta[None], a_0[None]
        a_lo, a_hi = _time_range(a_0)
        t_lo, t_hi = _time_range(a_theta)
        order = np.lexsort((a_lo, t_lo))
        blocks = []
        for start in range(0, order.size, block_rows):
            rows = np.sort(order[start:start + block_rows])
            a = (int(a_lo[rows].min()), int(a_hi[rows].max()))
            t = (int(t_lo[rows].min()), int(t_hi[rows].max()))
            blocks.append((rows, a, t,
                           np.ascontiguousarray(a_0[rows][:, :, a[0]:a[1]].transpose(1, 0, 2)),
                           np.ascontiguousarray(
                               a_theta[rows][:, :, t[0]:t[1]].transpose(1, 0, 2))))
        return cls(a_theta=a_theta, a_0=a_0, blocks=tuple(blocks))

    def quadratic_forms(self, cov: np.ndarray):
        """Per cohort and row, ``A_0 S A_0'``, ``A_0 S A_theta'`` and ``A_theta S A_theta'``
        (each (K, J); ``cov`` (K, T, T) the cohorts' ``S``)."""
        k, n_rows = cov.shape[0], self.a_theta.shape[0]
        x_var, x_theta, theta_var = (np.zeros((k, n_rows)) for _ in range(3))
        for rows, (alo, ahi), (tlo, thi), a0, th in self.blocks:
            if ahi > alo:
                x_var[:, rows] = np.einsum("kjs,kjs->kj", a0 @ cov[:, alo:ahi, alo:ahi], a0)
            if thi > tlo:
                lo, hi = min(alo, tlo) if ahi > alo else tlo, max(ahi, thi)
                th_s = th @ cov[:, tlo:thi, lo:hi]
                theta_var[:, rows] = np.einsum("kjs,kjs->kj", th_s[:, :, tlo - lo:thi - lo], th)
                if ahi > alo:
                    x_theta[:, rows] = np.einsum("kjs,kjs->kj",
                                                 th_s[:, :, alo - lo:ahi - lo], a0)
        return x_var, x_theta, theta_var


def _time_range(a: np.ndarray):
    """Each row's first and one-past-last time with a non-zero weight (0, 0 when none)."""
    used = np.abs(a).max(axis=1) != 0  # (J, T)
    lo = np.where(used.any(axis=1), used.argmax(axis=1), 0)
    hi = np.where(used.any(axis=1), a.shape[-1] - used[:, ::-1].argmax(axis=1), 0)
    return lo, hi


def plug_in_beta(x_theta, x_var, beta, shape) -> np.ndarray:
    """Each row's ``beta``: the given one, or (``beta=None``) the plug-in efficient
    ``beta* = Xtheta / Xvar``, 0 where ``Xvar = 0`` (R solves ``(Xvar' Xvar) beta = Xvar'
    Xtheta`` by LDLT, which gives 0 there)."""
    if beta is None:
        tiny = x_var * x_var <= np.finfo(np.float64).tiny
        return np.where(tiny, 0.0, x_theta / np.where(tiny, 1.0, x_var))
    return np.full(shape, float(beta))


def linear_estimates(design: TimingDesign, a_theta, a_0=None, beta=None, *,
                     first_cohort=None, refine: bool = True,
                     projections: Projections | None = None) -> LinearEstimates:
    """Estimates, design-based and Neyman standard errors of linear estimands.

    Parameters
    ----------
    design : TimingDesign
    a_theta, a_0 : array (J, K, T) or (K, T)
        The estimands' ``A_theta`` and ``A_0`` (see :mod:`~didmem.inference.
        random_timing_weights`); or ``a_theta`` an :class:`EstimandRows` and ``a_0`` None.
    beta : float, optional
        The coefficient on ``Xhat``; None for the plug-in efficient ``beta*`` of each row.
    first_cohort : int, optional
        Index of ``g_min`` for all rows (default: each row's own).
    refine : bool
        Subtract the estimable heterogeneity term (``se``); False leaves ``std_error``
        equal to the Neyman one (cheaper: no generalised inverse).
    projections : Projections, optional
        Shared with other estimands of the same design.

    Returns
    -------
    LinearEstimates
    """
    rows = a_theta if isinstance(a_theta, EstimandRows) else EstimandRows.of(a_theta, a_0)
    a_theta, a_0 = rows.a_theta, rows.a_0
    n_rows = a_theta.shape[0]
    inv_n = 1.0 / design.count
    mean = design.mean.ravel()
    theta0 = a_theta.reshape(n_rows, -1) @ mean
    x_hat = a_0.reshape(n_rows, -1) @ mean
    # per cohort, (J x T) @ (T x T) products (batched BLAS) on blocks of rows cut to the
    # times they use, then row-wise dots
    x_var_k, x_theta_k, theta_var_k = (inv_n[:, None] * f
                                       for f in rows.quadratic_forms(design.cov))
    x_var, x_theta, theta_var = x_var_k.sum(0), x_theta_k.sum(0), theta_var_k.sum(0)
    b = plug_in_beta(x_theta, x_var, beta, theta0.shape)
    estimate = theta0 - x_hat * b
    var_neyman = theta_var + b * b * x_var - 2.0 * x_theta * b
    var_neyman = np.maximum(var_neyman, 0.0)
    df = _welch_df(np.maximum(theta_var_k + b * b * x_var_k - 2.0 * x_theta_k * b, 0.0),
                   design.count)
    var = var_neyman.copy()
    if refine:
        firsts = (_first_cohort(a_theta) if first_cohort is None
                  else np.full(theta0.size, int(first_cohort)))
        projections = projections or Projections(design)
    for first in (np.unique(firsts) if refine else ()):
        rows = np.flatnonzero(firsts == first)
        terms = _heterogeneity_terms(projections, a_theta[rows], int(first))
        if terms is None:
            continue
        bsum, q = terms
        adjust = np.einsum("jm,mn,jn->j", bsum, q, bsum) / design.n_units
        var[rows] = np.maximum(var_neyman[rows] - adjust, 0.0)
    return LinearEstimates(estimate=estimate, std_error=np.sqrt(var),
                           std_error_neyman=np.sqrt(var_neyman), beta=b, x_hat=x_hat,
                           theta0=theta0, df=df)


def event_study_vcv(design: TimingDesign, a_theta, a_0, beta=None):
    """R ``staggered``'s ``return_full_vcv``: the covariance of several estimands.

    Returns ``(vcv, vcv_neyman)``; the refinement uses the earliest ``g_min`` of all rows, and
    the block of rows and columns with a negative variance is set to 0, as R does.
    """
    with threadpool_limits(limits=1, user_api="blas"):  # many small products
        return _event_study_vcv(design, a_theta, a_0, beta)


def _event_study_vcv(design, a_theta, a_0, beta):
    a_theta = np.asarray(a_theta, dtype=np.float64)
    a_0 = np.asarray(a_0, dtype=np.float64)
    est = linear_estimates(design, a_theta, a_0, beta)
    comb = a_theta - est.beta[:, None, None] * a_0  # (J, K, T)
    cs = np.einsum("jkt,kts->jks", comb, design.cov)
    vcv_neyman = np.einsum("jks,iks,k->ji", cs, comb, 1.0 / design.count)
    first = int(_first_cohort(a_theta).min())
    vcv = vcv_neyman.copy()
    terms = _heterogeneity_terms(Projections(design), a_theta, first)
    if terms is not None:
        bsum, q = terms
        vcv = vcv_neyman - bsum @ q @ bsum.T / design.n_units
    negative = np.flatnonzero(np.diag(vcv) < 0)
    vcv[np.ix_(negative, negative)] = 0.0
    return vcv, vcv_neyman


@dataclass(frozen=True, eq=False)
class CellEstimates:
    """Every identified ``(g, t)`` cell (``t < max(g)``, ``g`` after the first time)."""

    cohort_index: np.ndarray
    time_index: np.ndarray
    estimate: np.ndarray
    std_error: np.ndarray
    std_error_neyman: np.ndarray
    beta: np.ndarray
    control_start: np.ndarray  # first control cohort (K: none) of each cell
    df: np.ndarray  # Welch-Satterthwaite degrees of freedom of the Neyman variance


def cell_estimates(design: TimingDesign, beta=None, last_treated: bool = False,
                   *, refine: bool = True, projections: Projections | None = None,
                   with_df: bool = True) -> CellEstimates:
    """All cells ``(g, t)`` at once (R's ``create_Atheta_list_for_ATE_tg`` per cell).

    Vectorised through suffix sums over the cohorts (the not-yet-treated controls of a cell
    are the cohorts after ``max(g, t)``), so that a profile of thousands of cells costs a
    few array passes; the refinement of ``se`` needs one generalised inverse per pair of a
    cohort and a later cohort. ``refine=False`` leaves ``std_error`` equal to the Neyman one;
    ``with_df=False`` leaves ``df`` NaN (its (cells x cohorts) arrays are the larger part of
    a Fisher permutation's cost, and the statistics do not use it).
    """
    codes, n_t = design.codes, design.n_times
    k = codes.size
    top = codes.max()
    n, mean, cov = design.count, design.mean, design.cov
    treated_later = np.isfinite(codes) & (codes > 0)
    gi, ti = np.nonzero(treated_later[:, None] & (np.arange(n_t) < top)[None, :])
    gi, ti = gi.astype(np.int64), ti.astype(np.int64)
    # a cell needs controls other than its own cohort
    if last_treated:
        keep = (codes[-1] > ti) & (gi != k - 1)
    else:
        keep = np.searchsorted(codes, np.maximum(codes[gi], ti), side="right") < k
    gi, ti = gi[keep], ti[keep]
    # controls of each cell: a suffix of the cohorts, starting at `start`
    if last_treated:
        has = codes[-1] > ti
    else:
        start = np.searchsorted(codes, np.maximum(codes[gi], ti), side="right")
        has = start < k
    suffix_n = np.r_[np.cumsum(n[::-1])[::-1], 0.0]
    suffix_ny = np.concatenate([np.cumsum((n[:, None] * mean)[::-1], axis=0)[::-1],
                                np.zeros((1, n_t))])
    suffix_ns = np.concatenate([np.cumsum((n[:, None, None] * cov)[::-1], axis=0)[::-1],
                                np.zeros((1, n_t, n_t))])
    if last_treated:  # the last cohort (row k - 1 of the suffix sums) or none (row k)
        start = np.where(has, k - 1, k)
    nc = suffix_n[start]
    nc_safe = np.where(nc > 0, nc, 1.0)
    p = (codes[gi] - 1).astype(np.int64)
    theta0 = mean[gi, ti] - suffix_ny[start, ti] / nc_safe
    x_hat = mean[gi, p] - suffix_ny[start, p] / nc_safe
    c2 = 1.0 / nc_safe ** 2
    theta_var = cov[gi, ti, ti] / n[gi] + suffix_ns[start, ti, ti] * c2
    x_var = cov[gi, p, p] / n[gi] + suffix_ns[start, p, p] * c2
    x_theta = cov[gi, p, ti] / n[gi] + suffix_ns[start, p, ti] * c2
    if beta is None:
        tiny = x_var * x_var <= np.finfo(np.float64).tiny
        b = np.where(tiny, 0.0, x_theta / np.where(tiny, 1.0, x_var))
    else:
        b = np.full(gi.size, float(beta))
    estimate = theta0 - b * x_hat
    var_neyman = np.maximum(theta_var + b * b * x_var - 2.0 * b * x_theta, 0.0)
    var = var_neyman.copy()
    df = (_cell_df(design, gi, ti, p, start, b, var_neyman, c2) if with_df
          else np.full(gi.size, np.nan))
    if refine:
        var = _refined_cell_variance(projections or Projections(design), gi, ti, start,
                                     nc_safe, var_neyman)
    return CellEstimates(cohort_index=gi, time_index=ti, estimate=estimate,
                         std_error=np.sqrt(var), std_error_neyman=np.sqrt(var_neyman), beta=b,
                         control_start=start, df=df)


def _cell_df(design, gi, ti, p, start, b, var_neyman, c2):
    """Welch-Satterthwaite degrees of freedom of the cells' Neyman variances."""
    n, cov, k = design.count, design.cov, design.codes.size
    # Welch-Satterthwaite: the treated cohort's part and each control cohort's
    # (N_c / N_C)^2 q_c / N_c, whose squares over N_c - 1 sum to N_c^2 / (N_c - 1) q_c^2 / N_C^4
    treated = np.maximum(cov[gi, ti, ti] - 2 * b * cov[gi, p, ti] + b * b * cov[gi, p, p],
                         0.0) / n[gi]
    wq = (n * n / np.maximum(n - 1.0, 1.0))
    c4 = c2 * c2

    tt, pt, pp = cov[:, ti, ti].T, cov[:, p, ti].T, cov[:, p, p].T  # (J, K)
    q = tt - 2 * b[:, None] * pt + (b * b)[:, None] * pp  # each cohort's quadratic form
    controls = np.arange(k)[None, :] >= start[:, None]
    control_sq = (wq[None, :] * q * q * controls).sum(axis=1) * c4
    control_var = np.maximum(var_neyman - treated, 0.0)
    denom = treated ** 2 / (n[gi] - 1.0) + control_sq
    return np.where(denom > 0, (treated + control_var) ** 2 / np.where(denom > 0, denom, 1.0),
                    np.inf)


def _refined_cell_variance(projections, gi, ti, start, nc, var_neyman):
    design = projections.design
    n = design.count
    out = var_neyman.copy()
    for a in np.unique(gi):
        rows = np.flatnonzero(gi == a)
        got = projections(int(a))
        if got is None:
            continue
        proj, q = got  # (L, m, T) for cohorts a, a+1, ...
        t = ti[rows]
        # the controls' N_c P_c summed at each cell's time: one pass over the projections
        # with the cells' control weights N_c [c >= start] per (cohort, time) (the cohort's
        # cells have distinct times)
        control = np.zeros((proj.shape[0], proj.shape[2]))
        later = np.arange(a, a + proj.shape[0])[:, None] >= start[rows][None, :]
        control[:, t] = np.where(later, n[a:][:, None], 0.0)
        ctrl = np.einsum("lt,lmt->mt", control, proj)[:, t]  # (m, J)
        b = proj[0][:, t] - ctrl / nc[rows]
        adjust = np.einsum("mj,mn,nj->j", b, q, b) / design.n_units
        out[rows] = np.maximum(var_neyman[rows] - adjust, 0.0)
    return out
