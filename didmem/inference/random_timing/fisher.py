r"""Fisher randomisation tests under random timing, and draws for the simultaneous band.

Under the sharp null of no effect on any unit at any time the outcome paths do not depend on
the cohorts, so re-drawing the cohorts as the design drew them (a permutation of the labels
among the units whose assignment was random, cohort sizes fixed) and recomputing a statistic
gives its exact null distribution. The statistics are studentised (Roth & Sant'Anna 2023,
Section 5; Wu & Ding 2021), so the test also has asymptotic size under the weak null of zero
average effects. A permutation is a gather of the units' paths into cohort means and
covariances (one product per cohort), after which the statistics of every cell and
aggregation follow from :mod:`~didmem.inference.random_timing.design`.

p-values: ``pvalue`` is ``(1 + #{|t*| >= |t|}) / (1 + B)`` over ``B`` random permutations,
exact (valid in finite samples) for the sharp null; ``pvalue_r`` is R ``staggered``'s
``mean(|t| < |t*|)``, reported for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from ..._progress import progress as progress_line
from .design import TimingDesign, cohort_codes

__all__ = ["FisherTest", "PermutedDesign", "fisher_test", "permuted_design",
           "band_multipliers"]


@dataclass(frozen=True, eq=False)
class FisherTest:
    """Observed and permuted statistics (absolute values) with their p-values.

    Attributes
    ----------
    observed : ndarray (J,)
    permuted : ndarray (B, J)
    pvalue : ndarray (J,)
        ``(1 + #{permuted >= observed}) / (1 + B)``.
    pvalue_r : ndarray (J,)
        ``mean(permuted > observed)`` (R ``staggered``'s).
    """

    observed: np.ndarray
    permuted: np.ndarray

    @property
    def n_permutations(self) -> int:
        return int(self.permuted.shape[0])

    @property
    def pvalue(self) -> np.ndarray:
        b = self.permuted.shape[0]
        return (1.0 + (self.permuted >= self.observed).sum(axis=0)) / (1.0 + b)

    @property
    def pvalue_r(self) -> np.ndarray:
        return (self.permuted > self.observed).mean(axis=0)


@dataclass(frozen=True, eq=False)
class PermutedDesign(TimingDesign):
    """A permutation's design with the suffix sums ``control_sums[s] = sum_{c >= s} N_c
    S_c`` (``s = 0 .. K``; the last 0) that the controls' variances take, gathered with the
    covariances while each is in cache."""

    control_sums: np.ndarray | None = None


def permuted_design(times, codes, cohorts, y_sorted_by, labels, *, centre=None,
                    control_sums: bool = False) -> TimingDesign:
    """The design of the paths ``y`` with cohort indices ``labels`` (one per unit).

    ``cohorts``/``codes`` are the design's cohorts (every label in ``0 .. K-1`` occurs).
    ``centre`` (T,), optional: the paths' column means, when ``y_sorted_by`` is already
    centred by them (done once per test, since they do not depend on the labels).
    ``control_sums``: also the suffix sums of ``N_c S_c`` (a :class:`PermutedDesign`).

    Each cohort's covariance is ``(Z_g'Z_g - N_g zbar_g zbar_g') / (N_g - 1)`` on the
    centred paths ``Z = Y - centre`` (the covariance is shift-invariant, and the centring
    keeps the cancellation small), ``Z_g'Z_g`` one symmetric rank-``N_g`` update on the
    gathered contiguous rows of the cohort; with ``control_sums`` the cohort's rows are
    centred by their own mean before the update (one pass fewer over the K T^2 numbers).
    """
    y = y_sorted_by
    if centre is None:
        centre = y.mean(axis=0)
        y = y - centre
    k, n_t = cohorts.size, y.shape[1]
    order = np.argsort(labels, kind="stable")
    count = np.bincount(labels, minlength=k)
    starts = np.r_[0, np.cumsum(count)]
    ones = np.ones(int(count.max()))
    zbar = np.empty((k, n_t))
    cov = np.empty((k, n_t, n_t))
    sums = np.empty((k + 1, n_t, n_t)) if control_sums else None
    if sums is not None:
        sums[k] = 0.0
    for g in range(k - 1, -1, -1):  # from the last cohort: the suffix sums as we go
        block = np.take(y, order[starts[g]:starts[g + 1]], axis=0)  # gathered, in cache
        zbar[g] = ones[:count[g]] @ block / count[g]  # (np.add.reduceat was slower)
        if sums is None:
            cov[g] = block.T @ block  # numpy's syrk for a matrix times its own transpose
            continue
        block -= zbar[g]
        np.matmul(block.T, block, out=cov[g])  # syrk, on the cohort's centred rows
        cov[g] /= count[g] - 1.0
        np.multiply(cov[g], float(count[g]), out=sums[g])
        sums[g] += sums[g + 1]
    if sums is None:
        cov -= count[:, None, None] * zbar[:, :, None] * zbar[:, None, :]
        cov /= (count - 1.0)[:, None, None]
        return TimingDesign(times=times, cohorts=cohorts, codes=codes,
                            count=count.astype(np.float64), mean=zbar + centre, cov=cov)
    return PermutedDesign(times=times, cohorts=cohorts, codes=codes,
                          count=count.astype(np.float64), mean=zbar + centre, cov=cov,
                          control_sums=sums)


def fisher_test(times, cohorts, y, statistic: Callable[[TimingDesign], np.ndarray], *,
                n_permutations: int = 1000, randomised=None, seed=None,
                permutations=None, control_sums: bool = False) -> FisherTest:
    """Fisher randomisation test of ``statistic`` (absolute values are taken).

    Parameters
    ----------
    times : array (T,)
    cohorts : array (n,)
        Each unit's cohort (``inf`` for never-treated).
    y : array (n, T)
        Outcome paths.
    statistic : callable
        ``TimingDesign -> array (J,)`` of studentised statistics; NaN counts as 0 (and
        ``inf``, a non-zero estimate over a zero standard error, as larger than any other).
    n_permutations : int
    randomised : array (n,) of bool, optional
        The units whose cohorts were assigned at random (default: all); the labels are
        permuted among them, the others keep theirs.
    seed : int or Generator, optional
    permutations : array (B, n_randomised) of int, optional
        Given permutations (0-based): the ``r``-th randomised unit gets the cohort of the
        ``permutations[b, r]``-th (R ``staggered``'s draws, for parity); overrides
        ``n_permutations`` and ``seed``.
    control_sums : bool
        Hand ``statistic`` :class:`PermutedDesign` s with the controls' suffix sums.
    """
    times = np.asarray(times, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    cohorts = np.asarray(cohorts, dtype=np.float64).copy()
    cohorts[np.isnan(cohorts)] = np.inf
    values, labels = np.unique(cohorts, return_inverse=True)
    codes = cohort_codes(times, values)
    idx = np.arange(cohorts.size) if randomised is None else np.flatnonzero(randomised)
    centre = y.mean(axis=0)
    z = y - centre
    with threadpool_limits(limits=1, user_api="blas"):
        observed = _absolute(statistic(permuted_design(times, codes, values, z, labels,
                                                       centre=centre,
                                                       control_sums=control_sums)))
        if permutations is None:  # drawn one at a time (the same stream as drawn at once;
            rng = np.random.default_rng(seed)  # B x n indices would be 130 MB at 1,000 x 16k)
            permutations = (rng.permutation(idx.size) for _ in range(n_permutations))
            n_rows = n_permutations
        else:
            n_rows = len(permutations)
        permuted = np.empty((n_rows, observed.size))
        new = labels.copy()
        # shown on a terminal once the test runs past the progress line's delay (1,000
        # permutations of the paper's scale take about 13 s)
        with progress_line(n_rows, "Fisher randomisation test", unit="permutations") as bar:
            for b, perm in enumerate(permutations):
                new[idx] = labels[idx][perm]
                permuted[b] = _absolute(statistic(permuted_design(
                    times, codes, values, z, new, centre=centre, control_sums=control_sums)))
                bar.step()
    return FisherTest(observed=observed, permuted=permuted)


def _absolute(values) -> np.ndarray:
    out = np.abs(np.asarray(values, dtype=np.float64).ravel())
    out[np.isnan(out)] = 0.0  # 0 / 0; an estimate over a zero standard error stays inf
    return out


def band_multipliers(design: TimingDesign, n_draws: int, rng, *, ahead: int | None = None):
    """The band's Gaussian draws as chunks of the one bootstrap loop
    (:func:`~didmem.inference.bootstrap.multiplier_bootstrap`): a
    :class:`~didmem.inference.bootstrap.MultiplierChunks` whose chunks are per-cohort draws
    ``w`` (K, T, m), ``w_g = S_g^{1/2} xi_g / sqrt(N_g)`` with standard normal ``xi``, so
    that ``sum_g C_g w_g`` has the Neyman covariance ``sum_g C_g S_g C_g' / N_g`` of any
    estimands ``C``. About ``_CHUNK_ELEMENTS`` numbers a chunk, drawn ``ahead`` chunks ahead
    by the chunks' helper thread (default ``PREFETCH_CHUNKS``), beside the loop's work.
    """
    from ..bootstrap import _CHUNK_ELEMENTS, PREFETCH_CHUNKS, MultiplierChunks

    try:  # any root R R' = S_g will do; Cholesky where every S_g is positive definite
        root = np.linalg.cholesky(design.cov)
    except np.linalg.LinAlgError:
        vals, vecs = np.linalg.eigh(design.cov)
        root = vecs * np.sqrt(np.maximum(vals, 0.0))[:, None, :]
    root = root / np.sqrt(design.count)[:, None, None]
    k, n_t = design.cohorts.size, design.n_times

    def source(rng, m):
        return root @ rng.standard_normal((k, n_t, m))

    return MultiplierChunks(rng, int(n_draws), k * n_t, "normal",
                            chunk=max(1, min(int(n_draws), _CHUNK_ELEMENTS // (k * n_t))),
                            ahead=PREFETCH_CHUNKS if ahead is None else ahead, source=source)
