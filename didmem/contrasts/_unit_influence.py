"""Per-unit influence functions of a fitted result's cells and aggregations, by unit label.

Pairing two profiles needs each unit's influence on both, matched by the unit's identifier.
A fitted :class:`~didmem.results.GroupTimeResult` holds its cells' influence in the form of
its route (:attr:`GroupTimeResult.inference`, :mod:`didmem.inference.influence`); this module
reads it through the protocol's
:meth:`~didmem.inference.influence.CellInfluence.combination_psi`, which every route answers
with the estimated-weights term of aggregations.

The scale is the protocol's: ``estimate - truth ~ sum_i psi_i``, so an analytic variance is
``sum_i psi_i**2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ..errors import EstimationError
from ..results.aggregations import build_aggregation

__all__ = ["UnitInfluence", "cell_influence", "aggregation_influence", "check_pairable",
           "rows_influence", "unit_blocks"]


@dataclass(frozen=True)
class UnitInfluence:
    """Estimates of some rows (cells or an aggregation's keys) and their per-unit influence.

    Attributes
    ----------
    units : ndarray (n_units,)
        The unit labels (the panel's identifiers), in the order of ``psi``'s rows.
    psi : ndarray (n_units, n_rows)
        The influence of every unit on every row.
    estimates : ndarray (n_rows,)
    groups : ndarray (n_units,), optional
        The independent group of each unit, for the small-sample correction: its block
        (cohort; never-treated ``inf``) in the result, or a code of its blocks in several.
    """

    units: np.ndarray
    psi: np.ndarray
    estimates: np.ndarray
    groups: np.ndarray | None = None

    def rows(self, which) -> "UnitInfluence":
        """The same units, rows ``which`` only."""
        return UnitInfluence(self.units, self.psi[:, which], self.estimates[which], self.groups)


def unit_blocks(prepared) -> np.ndarray:
    """Each row's block as its cohort (``inf`` for the never-treated block)."""
    labels = np.append(np.asarray(prepared.cohorts, dtype=float), np.inf)
    return np.repeat(labels[: prepared.starts.size - 1], np.diff(prepared.starts))


def check_pairable(result, name: str = "result") -> None:
    """Refuse a result whose per-unit influence is not at hand, with what to do instead."""
    from ..results.cells import GroupTimeResult

    if not isinstance(result, GroupTimeResult):
        kind = type(result).__name__
        if kind == "SavedResult":
            raise EstimationError(
                f"{name} was read from a results file, which keeps the cells' standard errors "
                "but not each instance's influence, and a paired comparison needs it; refit "
                "the panel and compare the fitted results (on the command line: didmem "
                "compare A_PANEL B_PANEL).")
        raise EstimationError(
            f"{name} is a {kind}; compare_profiles takes group-time results of "
            "DiDEstimator (GroupTimeResult), whose influence functions it pairs.")
    if result.prepared.clusters is not None:
        raise EstimationError(
            f"{name} was fitted with clusters; the paired difference pairs instances, not "
            "clusters, so fit without cluster= to compare.")
    influence = result.inference.influence
    if getattr(influence.prepared, "unit_labels", None) is None:
        raise EstimationError(
            f"{name} was fitted from moments (out of core, on Ray or from pattern counts), "
            "which hold no instance's influence; fit the panel in memory to compare.")


def rows_influence(result, weights, omega=None) -> np.ndarray:
    """The units x rows influence of ``weights @ cells`` plus, with ``omega``, the
    estimated-weights term (:func:`~didmem.inference.influence.add_estimated_weights`)."""
    return np.array(result.inference.influence.combination_psi(sparse.csr_matrix(weights), omega),
                    dtype=float)


def cell_influence(result, which: np.ndarray) -> UnitInfluence:
    """The influence of the cells ``which`` (indices into the result's cells)."""
    which = np.asarray(which, dtype=np.int64)
    pick = sparse.csr_matrix((np.ones(which.size), (np.arange(which.size), which)),
                             shape=(which.size, result.cells.k.size))
    return UnitInfluence(np.asarray(result.prepared.unit_labels),
                         rows_influence(result, pick),
                         np.asarray(result.estimates, dtype=float)[which],
                         unit_blocks(result.prepared))


def aggregation_influence(result, aggregation: str):
    """The keys (and, last, the overall value) of an aggregation with default options, with
    their per-unit influence. Returns ``(spec, UnitInfluence)``."""
    att = np.asarray(result.estimates, dtype=float)
    spec = build_aggregation(result.prepared, result.cells, att, aggregation)
    est = spec.weights @ att
    if spec.undefined_overall:
        est[-1] = np.nan
    psi = rows_influence(result, spec.weights, spec.omega)
    return spec, UnitInfluence(np.asarray(result.prepared.unit_labels), psi, est,
                               unit_blocks(result.prepared))
