"""Inference for linear combinations of cells (aggregations, the pre-test).

An aggregation's influence function is ``sum_c L[key, c] psi_c`` plus, for estimated
cohort-share weights, ``(omega[key, g(i)] w_i - Omega[key]) / n`` with
``Omega = sum_g omega[key, g] pg_g``. Its analytic covariance is the fit's route's
(:meth:`~didmem.inference.influence.CellInfluence.combination_moments`); its bootstrap
draws follow from the cells' draws and the grouped weight sums of the same bootstrap, so
cells and aggregations share one set of draws.

The functions taking ``(design, cells, stats, ..., influence=None)`` ask ``influence``, by
default the balanced route's :class:`~didmem.inference.grouped.GroupedInfluence` of
``(design, cells, stats)``.
"""

from __future__ import annotations

import numpy as np

from .combination_sums import combine_draws

__all__ = ["combination_variance", "combination_covariance", "combination_draws",
           "cell_covariance", "combination_block_variances", "combination_moments"]


def _influence(prepared, cells, stats, influence):
    if influence is not None:
        return influence
    from .grouped import GroupedInfluence

    return GroupedInfluence(prepared, cells, stats)


def combination_moments(prepared, cells, stats, weights, omega, influence=None, *,
                        blocks: bool = True):
    """``psi' psi`` (rows x rows; of cluster sums with clusters) of the linear combinations
    ``weights`` / ``omega`` and each block's part of its diagonal (None without ``blocks``
    or with clusters: the small-sample correction does not split those by block)."""
    return _influence(prepared, cells, stats, influence).combination_moments(
        weights, omega, blocks=blocks)


def combination_covariance(prepared, cells, stats, weights, omega, influence=None) -> np.ndarray:
    """``psi' psi`` (rows x rows) of the linear combinations; with clusters, of cluster sums.
    Divided by nothing: like the variances, it is on the scale of ``sum_i psi_i``."""
    return combination_moments(prepared, cells, stats, weights, omega, influence,
                               blocks=False)[0]


def combination_variance(prepared, cells, stats, weights, omega, influence=None) -> np.ndarray:
    """``sum_i psi_i**2`` (or of cluster sums) for every row of ``weights`` / ``omega``."""
    return np.diag(combination_covariance(prepared, cells, stats, weights, omega,
                                          influence)).copy()


def combination_block_variances(prepared, cells, stats, weights, omega, influence=None):
    """``sum_{i in block} psi_i**2`` (blocks x rows): each block's part of the variances
    (unclustered); the small-sample correction weighs it by ``n_b / (n_b - 1)``."""
    return combination_moments(prepared, cells, stats, weights, omega, influence)[1]


def combination_draws(prepared, boot, weights, omega) -> np.ndarray:
    """Bootstrap draws (draws x rows) of each linear combination."""
    k = prepared.n_cohorts
    draws = combine_draws(boot.cells, weights)
    wif = (boot.block_weights[:, :k] @ omega.T
           - np.outer(boot.total, omega @ prepared.cohort_shares))
    return draws + wif / prepared.n_units


def cell_covariance(prepared, cells, stats, which: np.ndarray, influence=None) -> np.ndarray:
    """Analytic covariance ``sum_i psi_ci psi_di`` of the cells ``which``, as R ``did``'s
    Wald pre-test forms it (:meth:`~didmem.inference.influence.CellInfluence.
    pretest_covariance`)."""
    return _influence(prepared, cells, stats, influence).pretest_covariance(which)

