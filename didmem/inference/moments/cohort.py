"""Per-cohort moments of outcome paths: the sufficient statistics of a fit without covariates.

On a balanced panel without covariates every cell ``ATT(g, t)`` is a difference of weighted
means of outcome changes, and its influence function is linear in the unit's outcome path
``y_i`` (a vector over the times) with coefficients that depend only on the cell and the
unit's cohort. So every estimate, every variance and covariance of cells and of their
aggregations, and the Gaussian multiplier bootstrap follow from these per-cohort moments,
gathered in one pass over the units:

* ``count`` ``n_g``, ``weight`` ``W_g = sum w_i`` and ``weight_sq`` ``V_g = sum w_i**2``;
* ``mean`` ``m_g = sum w_i y_i / W_g`` (T values);
* ``lever`` ``h_g = sum w_i**2 (y_i - m_g)`` (T values; zero without weights);
* ``cross`` ``C_g = sum w_i**2 (y_i - m_g)(y_i - m_g)'`` (T x T).

The second moments are held about each cohort's own mean, so that a variance is never the
small difference of two large sums. Moments of disjoint sets of units add up
(:meth:`CohortMoments.__add__`, Chan, Golub & LeVeque's pairwise update, here with weights):
partitions of a panel (files of a folder, blocks of a Ray dataset) are summed in any order
and give the moments of the whole to rounding. :mod:`didmem.inference.moments.cells` turns
them into the cells and their inference.

References
----------
Chan, T. F., Golub, G. H. and LeVeque, R. J. (1979). Updating formulae and a pairwise
algorithm for computing sample variances. Technical report STAN-CS-79-773, Stanford.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ...errors import EstimationError

__all__ = ["CohortMoments", "reference_moments", "dataset_moments", "dense_moments",
           "item_moments", "pattern_moments"]


@dataclass(frozen=True, eq=False)
class CohortMoments:
    """Moments of the outcome paths of every cohort (see the module notes).

    Attributes
    ----------
    times : ndarray (T,)
        The times the paths run over, ascending.
    cohorts : ndarray (K,)
        Cohort values, ascending; ``inf`` (last) holds the never-treated units.
    count, weight, weight_sq : ndarray (K,)
        Units, sum of weights and of squared weights per cohort.
    mean, lever : ndarray (K, T)
        Weighted mean path, and ``sum w_i**2 (y_i - m_g)``.
    cross : ndarray (K, T, T)
        ``sum w_i**2 (y_i - m_g)(y_i - m_g)'``.
    """

    times: np.ndarray
    cohorts: np.ndarray
    count: np.ndarray
    weight: np.ndarray
    weight_sq: np.ndarray
    mean: np.ndarray
    lever: np.ndarray
    cross: np.ndarray

    # ------------------------------------------------------------------ building
    @classmethod
    def empty(cls, times) -> "CohortMoments":
        """Moments of no unit over ``times`` (the neutral element of ``+``)."""
        times = np.asarray(times, dtype=np.float64)
        n_t = times.size
        return cls(times=times, cohorts=np.zeros(0), count=np.zeros(0, dtype=np.int64),
                   weight=np.zeros(0), weight_sq=np.zeros(0), mean=np.zeros((0, n_t)),
                   lever=np.zeros((0, n_t)), cross=np.zeros((0, n_t, n_t)))

    @classmethod
    def from_paths(cls, times, cohorts, y, weights=None) -> "CohortMoments":
        """Moments of the units whose paths are the rows of ``y``.

        Parameters
        ----------
        times : array (T,)
            Ascending times (the columns of ``y``).
        cohorts : array (n,)
            Each unit's cohort; NaN or ``inf`` for never-treated units.
        y : array (n, T)
            Outcome paths, finite.
        weights : array (n,), optional
            Positive sampling weights (ones when omitted).
        """
        times = np.asarray(times, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        cohorts = np.asarray(cohorts, dtype=np.float64).copy()
        if y.ndim != 2 or y.shape != (cohorts.size, times.size):
            raise EstimationError(
                f"Outcome paths must be a units x times matrix of shape ({cohorts.size}, "
                f"{times.size}); got shape {y.shape}.")
        cohorts[np.isnan(cohorts)] = np.inf
        values, codes = np.unique(cohorts, return_inverse=True)
        w = np.ones(cohorts.size) if weights is None else np.asarray(weights, dtype=np.float64)
        count = np.bincount(codes, minlength=values.size).astype(np.int64)
        weight = np.bincount(codes, weights=w, minlength=values.size)
        weight_sq = np.bincount(codes, weights=w * w, minlength=values.size)
        n_t = times.size
        mean = np.empty((values.size, n_t))
        lever = np.empty((values.size, n_t))
        cross = np.empty((values.size, n_t, n_t))
        order = np.argsort(codes, kind="stable")
        starts = np.concatenate([[0], np.cumsum(count)])
        # one BLAS thread: fastest for these products, and it leaves the other core free
        # (two threads measured 10x slower on the loaded 2-core machine)
        with threadpool_limits(limits=1, user_api="blas"):
            _cohort_moments(y, w, order, starts, weight, weights is None, mean, lever, cross)
        return cls(times=times, cohorts=values, count=count, weight=weight,
                   weight_sq=weight_sq, mean=mean, lever=lever, cross=cross)

    # ------------------------------------------------------------------ adding up
    def __add__(self, other: "CohortMoments") -> "CohortMoments":
        """The moments of the union of two disjoint sets of units."""
        if not isinstance(other, CohortMoments):
            return NotImplemented
        if self.times.shape != other.times.shape or not np.array_equal(self.times, other.times):
            raise EstimationError(
                "Moments over different times cannot be added: "
                f"{_times_text(self.times)} and {_times_text(other.times)}.")
        cohorts = np.union1d(self.cohorts, other.cohorts)
        a = self._aligned(cohorts)
        b = other._aligned(cohorts)
        return _merge(self.times, cohorts, a, b)

    def __radd__(self, other):
        if other == 0:  # sum() starts from 0
            return self
        return NotImplemented

    def _aligned(self, cohorts):
        """The arrays laid out on ``cohorts`` (a superset), zero where a cohort is absent."""
        k, n_t = cohorts.size, self.times.size
        out = (np.zeros(k, dtype=np.int64), np.zeros(k), np.zeros(k), np.zeros((k, n_t)),
               np.zeros((k, n_t)), np.zeros((k, n_t, n_t)))
        where = np.searchsorted(cohorts, self.cohorts)
        for dst, src in zip(out, (self.count, self.weight, self.weight_sq, self.mean,
                                  self.lever, self.cross)):
            dst[where] = src
        return out

    def merge_cohorts(self, source, target) -> "CohortMoments":
        """The moments with the units of cohort ``source`` counted in cohort ``target``."""
        keep = self.cohorts != source
        moved = self.select(~keep).relabel(target)
        return self.select(keep) + moved

    def relabel(self, cohort) -> "CohortMoments":
        """Every unit put in cohort ``cohort`` (all cohorts merged into one)."""
        out = CohortMoments.empty(self.times)
        for g in range(self.cohorts.size):
            one = self.select(np.arange(self.cohorts.size) == g)
            out = out + CohortMoments(
                times=one.times, cohorts=np.array([cohort], dtype=np.float64),
                count=one.count, weight=one.weight, weight_sq=one.weight_sq,
                mean=one.mean, lever=one.lever, cross=one.cross)
        return out

    def select(self, mask) -> "CohortMoments":
        """The cohorts where ``mask`` is true."""
        return CohortMoments(times=self.times, cohorts=self.cohorts[mask],
                             count=self.count[mask], weight=self.weight[mask],
                             weight_sq=self.weight_sq[mask], mean=self.mean[mask],
                             lever=self.lever[mask], cross=self.cross[mask])

    def at_times(self, mask) -> "CohortMoments":
        """The moments of the paths restricted to the times where ``mask`` is true."""
        idx = np.flatnonzero(mask)
        return CohortMoments(times=self.times[idx], cohorts=self.cohorts, count=self.count,
                             weight=self.weight, weight_sq=self.weight_sq,
                             mean=self.mean[:, idx], lever=self.lever[:, idx],
                             cross=self.cross[:, idx][:, :, idx])

    def negated(self) -> "CohortMoments":
        """The moments of ``-y`` (an outcome where lower is better)."""
        return CohortMoments(times=self.times, cohorts=self.cohorts, count=self.count,
                             weight=self.weight, weight_sq=self.weight_sq, mean=-self.mean,
                             lever=-self.lever, cross=self.cross)

    # ------------------------------------------------------------------ views
    @property
    def n_units(self) -> int:
        return int(self.count.sum())

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.count, self.weight, self.weight_sq, self.mean,
                                          self.lever, self.cross)))

    def __repr__(self) -> str:
        return (f"CohortMoments({self.n_units} units, {self.cohorts.size} cohorts, "
                f"{self.times.size} times)")


def pattern_moments(times, cohorts, patterns, counts) -> CohortMoments:
    """The moments of units given as distinct paths and how many units follow each.

    Parameters
    ----------
    times : array (T,)
    cohorts : array (m,)
        The cohort of each row of ``patterns`` (a pattern may appear once per cohort).
    patterns : array (m, T)
        Distinct outcome paths (for a binary outcome, a row of 0/1 per memorisation pattern).
    counts : array (m,)
        Units that follow each path (unit weights; rows with count 0 add nothing).
    """
    times = np.asarray(times, dtype=np.float64)
    cohorts = np.where(np.isnan(cohorts), np.inf, np.asarray(cohorts, dtype=np.float64))
    patterns = np.asarray(patterns, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    keep = counts > 0
    cohorts, patterns, counts = cohorts[keep], patterns[keep], counts[keep]
    values, codes = np.unique(cohorts, return_inverse=True)
    n_t = times.size
    n = np.bincount(codes, weights=counts, minlength=values.size)
    mean = np.zeros((values.size, n_t))
    np.add.at(mean, codes, counts[:, None] * patterns)
    mean /= n[:, None]
    z = patterns - mean[codes]
    cross = np.zeros((values.size, n_t, n_t))
    for g in range(values.size):
        sel = codes == g
        zg = z[sel]
        cross[g] = (zg * counts[sel][:, None]).T @ zg
    return CohortMoments(times=times, cohorts=values, count=np.rint(n).astype(np.int64),
                         weight=n, weight_sq=n.copy(), mean=mean,
                         lever=np.zeros((values.size, n_t)), cross=cross)


def item_moments(item) -> CohortMoments:
    """The moments of one work item of a dataset (:func:`didmem.panel.scan.read_item`)."""
    from ...panel.scan import read_item

    if item.units.size == 0:
        return CohortMoments.empty(item.times)
    block = read_item(item)
    return CohortMoments.from_paths(item.times, block.cohorts, block.y)


def dataset_moments(dataset, map_items=None) -> CohortMoments:
    """The moments of a dataset read as unit paths (:class:`~didmem.panel.scan.ParquetPaths`),
    with its cohorts put on the time grid as :class:`~didmem.Panel` does.

    Without ``map_items`` the dataset is read here, in one pass where its units allow it
    (:func:`didmem.panel.scan_dense.read_dense`), else work item by work item.
    ``map_items(item_moments, items)`` computes the work items' moments: the built-in ``map``
    runs them one after the other here, :func:`didmem.runners.ray_tasks.ray_map` on Ray. They
    are added up in the items' order.
    """
    from ...panel.checks import cohorts_on_time_grid
    from ...panel.scan_dense import read_dense

    block = read_dense(dataset) if map_items is None else None
    if block is not None:
        total = dense_moments(block)
    else:
        total = CohortMoments.empty(dataset.times)
        for part in (map_items or map)(item_moments, dataset.items()):
            total = total + part
    snapped = cohorts_on_time_grid(total.cohorts, total.times, dataset.cohort, dataset.time)
    for old, new in zip(total.cohorts, snapped):
        if old != new:  # rounding noise: the unit belongs to that time's cohort
            total = total.merge_cohorts(old, new)
    return total


def dense_moments(block, chunk_bytes: int = 64 * 2**20, threads: int | None = None
                  ) -> CohortMoments:
    """The moments of the paths of a dataset read in one pass
    (:class:`~didmem.panel.scan_dense.DensePaths`: time-major, a column per unit).

    Each cohort's units are gathered ``chunk_bytes`` of paths at a time, ``threads`` chunks
    at once (default: two, or one on one core; the gather and BLAS release the GIL); each
    cohort's chunks are added up in order (Chan et al.'s update), so the memory beyond the
    paths stays bounded and the sums do not depend on the threads.
    """
    from concurrent.futures import ThreadPoolExecutor

    times = np.asarray(block.times, dtype=np.float64)
    values, codes = np.unique(block.cohorts, return_inverse=True)
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=values.size))])
    step = max(1, chunk_bytes // (8 * max(times.size, 1)))
    slots = block.slots  # the row of each time: results are put in time order at the end
    chunks = [(g, block.columns[order[a:min(a + step, starts[g + 1])]])
              for g in range(values.size) for a in range(starts[g], starts[g + 1], step)]

    def piece(chunk):
        g, columns = chunk
        y = block.paths.take(columns, axis=1)  # times (as found) x units
        n = y.shape[1]
        mean = y.sum(axis=1) / n
        y -= mean[:, None]
        cross = y @ y.T  # BLAS syrk: the only O(n T^2) work
        return g, CohortMoments(
            times=times, cohorts=values[g:g + 1], count=np.array([n]),
            weight=np.array([float(n)]), weight_sq=np.array([float(n)]),
            mean=mean[slots][None], lever=np.zeros((1, times.size)),
            cross=cross[np.ix_(slots, slots)][None])

    parts = [None] * values.size
    threads = threads or min(2, os.cpu_count() or 1)
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(threads) as pool:
        for g, part in pool.map(piece, chunks):  # in order: each cohort's chunks in turn
            parts[g] = part if parts[g] is None else parts[g] + part
    if not parts:
        return CohortMoments.empty(times)
    return CohortMoments(times=times, cohorts=values,
                         count=np.concatenate([p.count for p in parts]),
                         weight=np.concatenate([p.weight for p in parts]),
                         weight_sq=np.concatenate([p.weight_sq for p in parts]),
                         mean=np.concatenate([p.mean for p in parts]),
                         lever=np.concatenate([p.lever for p in parts]),
                         cross=np.concatenate([p.cross for p in parts]))


def _cohort_moments(y, w, order, starts, weight, unweighted, mean, lever, cross) -> None:
    """Fill each cohort's mean, lever and cross from its rows ``order[starts[g]:starts[g+1]]``
    (two passes: the mean first, then the centred products)."""
    for g in range(starts.size - 1):
        rows = order[starts[g]:starts[g + 1]]
        yg, wg = y[rows], w[rows]
        mean[g] = wg @ yg / weight[g]
        z = yg - mean[g]
        if unweighted:
            lever[g] = 0.0  # sum (y - m) = 0 exactly; its rounding is not kept
        else:
            z *= wg[:, None]
            lever[g] = wg @ z  # sum w^2 (y - m)
        cross[g] = z.T @ z  # BLAS syrk: the pass's only O(n T^2) work


def _times_text(times) -> str:
    return f"{times.size} times from {times[0]:g} to {times[-1]:g}" if times.size else "no times"


def _merge(times, cohorts, a, b) -> CohortMoments:
    """Chan et al.'s pairwise update, cohort by cohort, of two aligned sets of moments."""
    n1, w1, v1, m1, h1, c1 = a
    n2, w2, v2, m2, h2, c2 = b
    weight = w1 + w2
    share = np.divide(w2, weight, out=np.zeros_like(weight), where=weight > 0)
    mean = m1 + share[:, None] * (m2 - m1)
    d1 = m1 - mean
    d2 = m2 - mean
    lever = h1 + v1[:, None] * d1 + h2 + v2[:, None] * d2
    cross = (c1 + c2
             + np.einsum("ks,kt->kst", h1, d1) + np.einsum("ks,kt->kst", d1, h1)
             + v1[:, None, None] * np.einsum("ks,kt->kst", d1, d1)
             + np.einsum("ks,kt->kst", h2, d2) + np.einsum("ks,kt->kst", d2, h2)
             + v2[:, None, None] * np.einsum("ks,kt->kst", d2, d2))
    return CohortMoments(times=times, cohorts=cohorts, count=n1 + n2, weight=weight,
                         weight_sq=v1 + v2, mean=mean, lever=lever, cross=cross)


def reference_moments(times, cohorts, y, weights=None) -> CohortMoments:
    """The moments unit by unit in plain Python loops (the tests' oracle)."""
    times = np.asarray(times, dtype=np.float64)
    cohorts = np.where(np.isnan(cohorts), np.inf, np.asarray(cohorts, dtype=np.float64))
    y = np.asarray(y, dtype=np.float64)
    w = np.ones(y.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    values = np.unique(cohorts)
    n_t = times.size
    out = dict(count=[], weight=[], weight_sq=[], mean=[], lever=[], cross=[])
    for g in values:
        idx = [i for i in range(y.shape[0]) if cohorts[i] == g]
        sw = sum(w[i] for i in idx)
        m = sum(w[i] * y[i] for i in idx) / sw
        out["count"].append(len(idx))
        out["weight"].append(sw)
        out["weight_sq"].append(sum(w[i] ** 2 for i in idx))
        out["mean"].append(m)
        out["lever"].append(sum((w[i] ** 2 * (y[i] - m) for i in idx), np.zeros(n_t)))
        out["cross"].append(sum((w[i] ** 2 * np.outer(y[i] - m, y[i] - m) for i in idx),
                                np.zeros((n_t, n_t))))
    return CohortMoments(times=times, cohorts=values,
                         **{k: np.array(v, dtype=np.int64 if k == "count" else np.float64)
                            for k, v in out.items()})
