"""The cells of a fit and their inference from per-cohort moments (no unit's path kept).

:func:`prepare_moments` applies R did's pre-processing to :class:`~didmem.inference.moments.cohort.
CohortMoments` (as :func:`~didmem.inference.prepared.prepare_panel` does to a panel) and
returns a :class:`MomentsDesign`: the cohorts as blocks, treated cohorts ascending and the
never-treated last, laid out as the kernels expect, so that :func:`~didmem.inference.
prepared.did_cells` lays out the cells on it unchanged. :class:`MomentsInfluence` then gives
what the inference asks of the cells' influence functions:

* the estimates and the grouped statistics (``mu1``, ``mu0``, ``w1``, ``w0``);
* each cell's variance ``sum_i psi_i**2`` and its treated part (for Welch's correction),
  from the moments about each cohort's mean;
* covariances of cells and of linear combinations of cells (aggregations, with R's
  estimated-weights term), and each block's part of them, as bilinear forms in per-block
  Gram matrices ``G_j = sum_i f_i f_i'`` of the features ``f_i = (w_i y_i, w_i, 1)``;
* the Gaussian multiplier bootstrap: given the data a block's sum ``sum_i U_i f_i`` with
  i.i.d. standard normal ``U_i`` is exactly ``N(0, G_j)``, independent across blocks, so a
  draw is ``xi @ sqrt(G_j)`` per block: the same bootstrap in distribution at a cost of
  ``O(draws x blocks x T**2)``, whatever the number of units.

Within a fit the outcome is centred on its weighted mean path (which leaves every estimate
and influence function unchanged), as the in-memory route centres its columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

import numpy as np

from ...errors import EstimationError
from ..influence import CellInfluence
from .cohort import CohortMoments

__all__ = ["MomentsDesign", "MomentsInfluence", "prepare_moments", "block_gram",
           "cell_estimates", "moments_centre", "CellDrawMap"]

@dataclass(frozen=True, eq=False)
class MomentsDesign:
    """A prepared panel held as moments: blocks are the treated cohorts, then never-treated.

    It answers what the cell layout and the small-sample correction read of a
    :class:`~didmem.inference.prepared.PreparedPanel` (``times``, ``cohorts``,
    ``starts``, ``n_units``, ``cohort_shares``, no clusters) and holds no unit.
    """

    moments: CohortMoments
    cohorts: np.ndarray
    starts: np.ndarray
    clusters: None = None
    n_clusters: int = 0
    y: None = None
    x: None = None
    holes: None = None
    #: where the moments came from, in words (a parquet folder, on Ray, pattern counts);
    #: the result's settings and summary say it
    source: str = ""

    @property
    def times(self) -> np.ndarray:
        return self.moments.times

    @property
    def n_units(self) -> int:
        return int(self.starts[-1])

    @property
    def n_cohorts(self) -> int:
        return int(self.cohorts.size)

    @property
    def block_weights(self) -> np.ndarray:
        return self.moments.weight

    @property
    def cohort_shares(self) -> np.ndarray:
        """R did's ``pg``: each treated cohort's share of the (weighted) units."""
        return self.moments.weight[: self.n_cohorts] / self.n_units

    @property
    def centre(self) -> np.ndarray:
        """The weighted mean path of all units (the outcome's centre within the fit)."""
        return moments_centre(self.moments)


def moments_centre(m: CohortMoments) -> np.ndarray:
    """The weighted mean path of all units of ``m`` (the outcome's centre within a fit)."""
    return m.weight @ m.mean / m.weight.sum()


def block_gram(m: CohortMoments, centre: np.ndarray) -> np.ndarray:
    """``G_j = sum_i f_i f_i'`` per block of ``m``, ``f_i = (w_i y_i, w_i, 1)`` with ``y``
    less ``centre`` (a path; blocks x (T + 2) x (T + 2))."""
    n_t = m.times.size
    delta = m.mean - centre
    out = np.empty((m.cohorts.size, n_t + 2, n_t + 2))
    for j in range(m.cohorts.size):
        d, h, v = delta[j], m.lever[j], m.weight_sq[j]
        out[j, :n_t, :n_t] = m.cross[j] + np.outer(h, d) + np.outer(d, h) + v * np.outer(d, d)
        out[j, :n_t, n_t] = out[j, n_t, :n_t] = h + v * d
        out[j, :n_t, n_t + 1] = out[j, n_t + 1, :n_t] = m.weight[j] * d
        out[j, n_t, n_t] = v
        out[j, n_t, n_t + 1] = out[j, n_t + 1, n_t] = m.weight[j]
        out[j, n_t + 1, n_t + 1] = m.count[j]
    return out


def cell_estimates(m: CohortMoments, cells, centre: np.ndarray) -> tuple[np.ndarray, dict]:
    """Every cell's estimate and grouped statistics (``mu1, mu0, w1, w0``, in the outcome
    less ``centre``, a path) from the block moments ``m``."""
    means = m.mean - centre
    t, b = cells.t, cells.b
    base = b >= 0
    change = means[:, t] - np.where(base, means[:, np.where(base, b, 0)], 0.0)  # blocks x cells
    member = _control_member(cells, m.cohorts.size, live_only=False)
    w1 = m.weight[cells.k]
    w0 = (member * m.weight[:, None]).sum(axis=0)
    mu1 = change[cells.k, np.arange(cells.size)]
    with np.errstate(invalid="ignore", divide="ignore"):
        mu0 = (member * m.weight[:, None] * change).sum(axis=0) / w0
    live = cells.ref == 0
    mu1 = np.where(live, mu1, 0.0)
    mu0 = np.where(live, mu0, 0.0)
    return np.where(live, mu1 - mu0, 0.0), {"mu1": mu1, "mu0": mu0, "w1": w1, "w0": w0}


def prepare_moments(moments: CohortMoments, *, need_never_treated: bool, anticipation: float,
                    lower_is_better: bool, owner: str,
                    never_treated_code: float | None = None) -> MomentsDesign:
    """R did's pre-processing on moments, by the in-memory route's own steps
    (:func:`~didmem.inference.prepared.r_preprocessing` on the units' cohorts, then the
    blocks' checks): the same errors and warnings.

    Cohorts after the last period count as never treated; without never-treated units the
    latest cohort becomes the comparison group and the periods from it on are dropped;
    cohorts treated by the first period plus anticipation are dropped.
    """
    from ..prepared import cohort_blocks, r_preprocessing

    m = moments.negated() if lower_is_better else moments
    times = m.times
    zero_hint = ""
    if never_treated_code is None and np.any(m.cohorts == 0) and 0 <= times[0]:
        zero_hint = (" If 0 marks never-treated units (R did's convention), pass "
                     "never_treated=0 to Panel (CLI: --never-treated 0).")
    per_unit = np.repeat(m.cohorts, m.count)  # the units' cohorts, for the messages' counts
    starts = np.concatenate([[0], np.cumsum(m.count)])
    cut, keep = r_preprocessing(per_unit, times, need_never_treated=need_never_treated,
                                anticipation=anticipation, owner=owner, noun="units",
                                zero_hint=zero_hint)
    now = per_unit[starts[:-1]] if per_unit.size else per_unit  # each cohort's value after it
    kept = keep[starts[:-1]] if per_unit.size else keep
    del per_unit, keep
    m = m.select(kept)
    for old, new in zip(m.cohorts, now[kept]):
        if old != new:  # a late cohort, or the latest without never-treated units
            m = m.merge_cohorts(old, new)
    if not cut.all():
        m = m.at_times(cut)
    if not np.isinf(m.cohorts).any():  # an empty never-treated block (not-yet-treated only)
        m = m + CohortMoments(times=m.times, cohorts=np.array([np.inf]),
                              count=np.zeros(1, dtype=np.int64), weight=np.zeros(1),
                              weight_sq=np.zeros(1), mean=np.zeros((1, m.times.size)),
                              lever=np.zeros((1, m.times.size)),
                              cross=np.zeros((1, m.times.size, m.times.size)))
    cohort_blocks(m.cohorts, np.ones(m.cohorts.size, dtype=bool),
                  lambda block, counts: m.count.astype(float),
                  need_never_treated=need_never_treated, owner=owner, word="units")
    starts = np.concatenate([[0], np.cumsum(m.count)]).astype(np.int64)
    return MomentsDesign(moments=m, cohorts=m.cohorts[:-1].copy(), starts=starts)


@dataclass(frozen=True, eq=False)
class MomentsInfluence(CellInfluence):
    """The cells' influence functions held as per-block moments: a route of the influence
    protocol (:class:`~didmem.inference.influence.CellInfluence`).

    ``prepared`` is a :class:`MomentsDesign` here (fits out of core, on Ray, from pattern
    counts); the balanced route in memory,
    :class:`~didmem.inference.grouped.GroupedInfluence`, holds one with the units' paths
    beside the moments. Build it with :meth:`build`; ``att`` and ``stats`` are the cells'
    estimates and grouped statistics (in the centred outcome). The multiplier bootstrap is
    Gaussian, drawn from its exact law given the data (:meth:`multiplier_chunks`) through
    the one loop of :func:`~didmem.inference.bootstrap.multiplier_bootstrap`; no unit's
    influence is held here (:meth:`dense`).
    """

    prepared: Any
    cells: Any
    stats: Mapping[str, np.ndarray]
    att: np.ndarray | None = field(default=None, repr=False)
    moments: CohortMoments | None = field(default=None, repr=False)
    centred_at: np.ndarray | None = field(default=None, repr=False)

    #: ``stats`` and :meth:`z_gram` give the structured Wald pre-test
    #: (:mod:`~didmem.inference.pretrend.wald`)
    cohort_moments = True

    def __post_init__(self):
        if self.moments is None:
            object.__setattr__(self, "moments", self.prepared.moments)

    @cached_property
    def centre(self) -> np.ndarray:
        """The path the outcome is taken less of in ``stats``: ``centred_at`` when given
        (the balanced route's zero: its paths are centred already), else
        :func:`moments_centre`."""
        return moments_centre(self.moments) if self.centred_at is None else self.centred_at

    @cached_property
    def gram(self) -> np.ndarray:
        """Per-block Gram matrices of the features ``(w_i y_i, w_i, 1)`` (:func:`block_gram`)."""
        return block_gram(self.moments, self.centre)

    def z_gram(self, block: int) -> np.ndarray:
        """``sum_i w_i**2 z_i z_i'`` over the units of ``block``, ``z_i = (y_i, 1)`` with ``y``
        less :attr:`centre` (the outcome ``stats`` are in): of :attr:`gram`'s features."""
        n_z = self.moments.times.size + 1
        return self.gram[block, :n_z, :n_z]

    @property
    def n_cells(self) -> int:
        return int(self.cells.size)

    @property
    def estimates(self) -> np.ndarray:
        return self.att

    def dense(self) -> np.ndarray:
        raise EstimationError("Moments hold no unit's influence function; fit the panel in "
                              "memory for the units x cells matrix.")

    @classmethod
    def build(cls, prepared, cells, moments: CohortMoments | None = None) -> "MomentsInfluence":
        """The cells of ``prepared`` from its block moments (``moments``, by default the
        prepared panel's own)."""
        moments = prepared.moments if moments is None else moments
        att, stats = cell_estimates(moments, cells, moments_centre(moments))
        return cls(prepared=prepared, cells=cells, stats=stats, att=att, moments=moments)

    # ------------------------------------------------------------------ variances
    def _quadratic(self, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``a'C_j a``, ``a'h_j`` and ``a'm_j`` of every cell's change vector ``a``."""
        m = self.moments
        t, b = self.cells.t, self.cells.b
        base = b >= 0
        bb = np.where(base, b, 0)
        c = m.cross[j]
        quad = c[t, t] + np.where(base, c[bb, bb] - 2 * c[t, bb], 0.0)
        lever = m.lever[j][t] - np.where(base, m.lever[j][bb], 0.0)
        mean = m.mean[j][t] - np.where(base, m.mean[j][bb], 0.0)
        return quad, lever, mean

    def treated_variance(self) -> np.ndarray:
        """The treated cohort's part ``sum_{i in g} psi_i**2`` of every cell's variance."""
        cells, cross = self.cells, self.moments.cross
        live = cells.ref == 0
        k, t, b = cells.k[live], cells.t[live], cells.b[live]
        base = b >= 0
        bb = np.where(base, b, 0)
        quad = cross[k, t, t] + np.where(base, cross[k, bb, bb] - 2 * cross[k, t, bb], 0.0)
        out = np.zeros(cells.size)
        out[live] = quad / self.stats["w1"][live] ** 2
        return out

    def variance(self, clusters=None, n_clusters: int = 0) -> np.ndarray:
        """``sum_i psi_ic**2`` per cell (0 for reference cells), about each cohort's mean."""
        if n_clusters:
            raise EstimationError("Moments hold no cluster: fit clustered panels in memory.")
        m = self.moments
        cells = self.cells
        member = _control_member(cells, m.cohorts.size)
        centre = self.centre
        # the control mean in raw units: mu0 is in the centred outcome
        shift = centre[cells.t] - np.where(cells.b >= 0, centre[np.maximum(cells.b, 0)], 0.0)
        mu0_raw = self.stats["mu0"] + shift
        control = np.zeros(cells.size)
        for j in range(m.cohorts.size):
            if not member[j].any():
                continue
            quad, lever, mean = self._quadratic(j)
            delta = mean - mu0_raw
            part = quad + 2 * delta * lever + delta * delta * m.weight_sq[j]
            control += np.where(member[j], part, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            control = np.where(cells.ref == 0, control / self.stats["w0"] ** 2, 0.0)
        return self.treated_variance() + control

    # ------------------------------------------------------------------ covariances
    def covariance(self, which: np.ndarray) -> np.ndarray:
        """``sum_i psi_ci psi_di`` of the cells ``which`` (the pre-test's ``V``)."""
        which = np.asarray(which, dtype=np.int64)
        n_t = self.prepared.times.size
        gram = np.ascontiguousarray(self.gram[:, : n_t + 1, : n_t + 1])
        suffix = np.ascontiguousarray(np.cumsum(gram[::-1], axis=0)[::-1])
        from .. import kernels

        c, s = self.cells, self.stats
        return kernels.pretest_covariance(
            gram, suffix, c.k[which], c.t[which], c.b[which], c.cs[which], s["mu1"][which],
            s["mu0"][which], s["w1"][which], s["w0"][which])

    def combination_coefficients(self, weights, omega) -> np.ndarray:
        """Coefficients (blocks x (T + 2) x rows) of linear combinations of the cells on the
        features ``(w_i y_i, w_i, 1)``, with R's estimated-weights term
        ``(omega[row, g(i)] w_i - Omega[row]) / n``."""
        from scipy import sparse

        from ..combination_sums import aggregate_coefficients

        csc = sparse.csc_matrix(weights)
        d, c, s = self.prepared, self.cells, self.stats
        n_t, n_keys = d.times.size, csc.shape[0]
        n_blocks = d.starts.size - 1
        a, beta = aggregate_coefficients(
            *c.kernel_args(), s["mu1"], s["mu0"], s["w1"], s["w0"],
            csc.indptr.astype(np.int64), csc.indices.astype(np.int64),
            csc.data.astype(np.float64), n_keys, n_blocks, n_t)
        omega = np.asarray(omega, dtype=np.float64)
        beta[: d.n_cohorts] += omega.T / d.n_units
        coef = np.empty((n_blocks, n_t + 2, n_keys))
        coef[:, :n_t] = a
        coef[:, n_t] = beta
        coef[:, n_t + 1] = -(omega @ d.cohort_shares) / d.n_units
        return coef

    def combination_moments(self, weights, omega, *, blocks: bool = True):
        """Covariance (rows x rows) of linear combinations of the cells and, with
        ``blocks``, each block's part of their variances (blocks x rows)."""
        coef = self.combination_coefficients(weights, omega)
        n_keys = coef.shape[2]
        cov = np.zeros((n_keys, n_keys))
        parts = np.empty((coef.shape[0], n_keys)) if blocks else None
        for j in range(coef.shape[0]):
            a = coef[j]
            ga = self.gram[j] @ a
            cov += a.T @ ga
            if blocks:
                parts[j] = np.einsum("pk,pk->k", a, ga)
        return cov, parts

    # ------------------------------------------------------------------ bootstrap
    def gaussian_roots(self) -> np.ndarray:
        """A square root ``R_j`` (``R_j' R_j = G_j``) of every block's Gram matrix.

        A Cholesky factor where the Gram matrix is positive definite (without weights, of
        its features less the weight's, which then equals the constant's: ``sum_i (w_i -
        1)**2 = 0``); an eigendecomposition where it is singular (fewer units than
        features, an empty block).
        """
        gram, m = self.gram, self.moments
        p = gram.shape[1]
        roots = np.zeros_like(gram)
        unweighted = (m.weight_sq == m.weight) & (m.weight == m.count)
        for j in range(gram.shape[0]):
            q = p - 1 if unweighted[j] else p
            try:
                factor = np.linalg.cholesky(gram[j, :q, :q]).T
            except np.linalg.LinAlgError:
                vals, vecs = np.linalg.eigh(gram[j])
                roots[j] = (vecs * np.sqrt(np.clip(vals, 0.0, None))).T
                continue
            roots[j, :q, :q] = factor
            if q < p:  # the constant's column is the weight's
                roots[j, :q, q] = factor[:, q - 1]
        return roots

    def gaussian_sums(self, n_draws: int, rng, roots=None) -> np.ndarray:
        """``sum_i U_i f_i`` per draw and block (draws x blocks x (T + 2)) for Gaussian
        multipliers, drawn from their exact distribution ``N(0, G_j)``: ``xi @ R_j`` with
        standard normal ``xi``, block by block (the normals in one array, blocks first)."""
        roots = self.gaussian_roots() if roots is None else roots
        n_blocks, p, _ = roots.shape
        xi = rng.standard_normal((n_blocks, n_draws, p))
        out = np.empty((n_draws, n_blocks, p))
        for j in range(n_blocks):
            np.matmul(xi[j], roots[j], out=out[:, j, :])
        return out

    def multiplier_chunks(self, n_draws: int, multiplier: str, rng, n_clusters: int = 0):
        """The bootstrap's chunks: each block's Gaussian sums ``sum_i U_i f_i`` drawn from their
        exact law (:meth:`gaussian_sums`), about ``_CHUNK_ELEMENTS`` numbers at a time,
        drawn ahead on the other core by the chunks' helper thread (the multipliers of
        :func:`~didmem.inference.bootstrap.multiplier_bootstrap`'s one loop, in this route's
        form). Only ``"normal"`` multipliers without clusters follow
        from moments; Rademacher and Mammen weights need each unit."""
        from ..bootstrap import _CHUNK_ELEMENTS, PREFETCH_CHUNKS, MultiplierChunks

        if multiplier != "normal" or n_clusters:
            raise EstimationError(
                f"Moments give the multiplier bootstrap with Gaussian ('normal') multipliers "
                f"without clusters only; got multiplier={multiplier!r}"
                + (" with clusters" if n_clusters else "") + ". Fit the panel in memory.")
        n_blocks, p = self.moments.cohorts.size, self.moments.times.size + 2
        roots = []  # each block's square root, taken by the first chunk's draw

        def source(rng, m):
            if not roots:
                roots.append(self.gaussian_roots())
            return self.gaussian_sums(m, rng, roots[0])

        return MultiplierChunks(rng, n_draws, n_blocks * p, "normal",
                                chunk=max(1, min(n_draws, _CHUNK_ELEMENTS // (n_blocks * p))),
                                ahead=PREFETCH_CHUNKS, source=source)

    def chunk_drawer(self, multipliers, clusters, n_clusters: int):
        """Per chunk of Gaussian block sums (draws x blocks x (T + 2), :meth:`multiplier_chunks`):
        every cell's draw from them by matrix products (:class:`CellDrawMap`; no numba kernel
        is loaded by a Gaussian bootstrap)."""
        n_blocks, n_t = self.moments.cohorts.size, self.moments.times.size
        draw_map = CellDrawMap.build(self.cells, self.stats, n_blocks, n_t + 2)

        def draw(row0, sums, out):
            m = sums.shape[0]
            draw_map.apply(sums, out.cells[row0:row0 + m])
            out.block_weights[row0:row0 + m] = sums[:, :, n_t]
            out.total[row0:row0 + m] = sums[:, :, n_t + 1].sum(axis=1)

        return draw


@dataclass(frozen=True, eq=False)
class CellDrawMap:
    """Every cell's bootstrap draw as matrix products of its blocks' sums (BLAS).

    A cell's draw ``sum_i U_i psi_i`` is linear in the sums ``S_j = sum_{i in j} U_i f_i``
    (``f_i = (w_i y_i, w_i, 1)``): ``S_k . a_1 / W_1 - (P_cs - [k >= cs] S_k) . a_0 / W_0``
    with ``a = e_t - e_b - mu e_T`` (no ``e_b`` without a base) and ``P_s`` the suffix sum
    of the blocks from ``s`` on, as :func:`~didmem.inference.kernels.cell_draws` computes it
    entry by entry. Here the cells of each treated block form one matrix of coefficients
    (``own``: ``S_k @ A_k``) and those of each first control block another (``control``:
    ``P_s @ B_s``), so a chunk of draws is a few dozen BLAS products.

    ``own`` and ``control`` hold ``(columns, block, coefficients)``: the cells (a slice when
    contiguous), the block whose sums they read and the ``(T + 2) x cells`` coefficients.
    Every cell is in exactly one ``own`` group (a reference cell with zero coefficients).
    """

    own: tuple
    control: tuple
    never_only: bool

    #: cells per product of a control group (bounds its temporary, draws x this)
    PIECE = 1024

    @classmethod
    def build(cls, cells, stats, n_blocks: int, p: int) -> "CellDrawMap":
        n_t = p - 2
        live = cells.ref == 0
        w1 = np.where(live, stats["w1"], 1.0)
        w0 = np.where(live, stats["w0"], 1.0)
        cols = np.arange(cells.size)
        has_b = cells.b >= 0

        def coefficients(which, mu, weight, factor):
            out = np.zeros((p, which.size))
            j = np.arange(which.size)
            scale = np.where(live[which], factor / weight[which], 0.0)
            np.add.at(out, (cells.t[which], j), scale)
            hb = has_b[which]
            np.add.at(out, (cells.b[which][hb], j[hb]), -scale[hb])
            np.add.at(out, (np.full(which.size, n_t), j), -scale * mu[which])
            return out

        own = []
        for k in np.unique(cells.k):
            which = cols[cells.k == k]
            a = coefficients(which, stats["mu1"], w1, 1.0)
            inside = (k >= cells.cs[which]) & live[which]  # own block among the controls
            if inside.any():
                a[:, inside] += coefficients(which[inside], stats["mu0"], w0, 1.0)
            own.append((_columns(which), int(k), a))
        control = []
        for s in np.unique(cells.cs[live]):
            which = cols[(cells.cs == s) & live]
            for lo in range(0, which.size, cls.PIECE):
                piece = which[lo:lo + cls.PIECE]
                control.append((_columns(piece), int(s),
                                coefficients(piece, stats["mu0"], w0, 1.0)))
        return cls(own=tuple(own), control=tuple(control),
                   never_only=bool(np.all(cells.cs == n_blocks - 1)))

    def apply(self, sums: np.ndarray, out: np.ndarray) -> None:
        """Write every cell's draws from ``sums`` (draws x blocks x (T + 2)) into ``out``
        (draws x cells)."""
        if self.never_only:  # the controls are the never-treated block: no suffix sums
            suffix = sums
        else:
            suffix = np.cumsum(sums[:, ::-1], axis=1)[:, ::-1]
        for columns, k, a in self.own:
            if isinstance(columns, slice):
                np.matmul(sums[:, k], a, out=out[:, columns])
            else:
                out[:, columns] = sums[:, k] @ a
        for columns, s, b in self.control:
            out[:, columns] -= suffix[:, s] @ b


def _columns(which: np.ndarray):
    """``which`` (ascending indices) as a slice when contiguous, else as it is."""
    if which.size and which[-1] - which[0] + 1 == which.size:
        return slice(int(which[0]), int(which[-1]) + 1)
    return which


def _control_member(cells, n_blocks: int, live_only: bool = True) -> np.ndarray:
    """Blocks x cells: whether block ``j`` is among cell ``c``'s controls (never, with
    ``live_only``, for a reference cell)."""
    blocks = np.arange(n_blocks)[:, None]
    member = (blocks >= cells.cs[None, :]) & (blocks != cells.k[None, :])
    return member & (cells.ref == 0)[None, :] if live_only else member
