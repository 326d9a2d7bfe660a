"""The within-instance comparison of several runs, as one more route of the shared inference.

Each instance is compared with itself across runs (:func:`within_cells`): in run ``r`` the
instances first trained at ``g``, against the same instances in the runs that have not
trained them by ``c``, each differenced against its own base-period score. Its influence
functions are per instance (an instance's pairs in every run are one cluster), so it is a
:class:`~didmem.inference.influence.CellInfluence` (:class:`WithinInfluence`) whose units are
the instances: its cells' standard errors, small-sample correction, bootstrap band and Wald
pre-test are :class:`~didmem.inference.cell_inference.CellInference`'s, as every group-time
route's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ...errors import EstimationError
from ..influence import CellInfluence

__all__ = ["WithinCells", "within_cells", "WithinDesign", "WithinLayout", "WithinInfluence",
           "fixed_weights"]


@dataclass(frozen=True)
class WithinCells:
    """The within-instance comparison's cells and their influence functions.

    Attributes
    ----------
    cohort, time, base_time : ndarray
    estimate : ndarray
        NaN where no instance of the cohort has a run that has not trained it by then.
    psi : ndarray (instances x cells)
        Influence functions per instance (cluster sums: an instance's pairs in every run).
    n_pairs : ndarray
        (run, instance) pairs of the cohort with at least one control run.
    n_instances : ndarray
        Distinct instances among them.
    reference : ndarray of bool
        Cells fixed at 0 (the universal base period's own cell).
    validation : ndarray of bool
        The instances that no run trains, whose means removed each run's shift
        (``run_trends="never_treated"``; all False with ``"none"``): a second independent
        part of every cell's variance.
    """

    cohort: np.ndarray
    time: np.ndarray
    base_time: np.ndarray
    estimate: np.ndarray
    psi: np.ndarray
    n_pairs: np.ndarray
    n_instances: np.ndarray
    reference: np.ndarray
    validation: np.ndarray

    @property
    def estimable(self) -> np.ndarray:
        """The cells with a (run, instance) pair and a control run, and the reference cells."""
        return (self.n_pairs > 0) | self.reference

    def subset(self, keep: np.ndarray) -> "WithinCells":
        """The cells ``keep`` (a mask)."""
        return WithinCells(cohort=self.cohort[keep], time=self.time[keep],
                           base_time=self.base_time[keep], estimate=self.estimate[keep],
                           psi=self.psi[:, keep], n_pairs=self.n_pairs[keep],
                           n_instances=self.n_instances[keep], reference=self.reference[keep],
                           validation=self.validation)


def _cell_layout(cohorts: np.ndarray, times: np.ndarray, base_period: str, anticipation: float):
    """The cells (cohort, time index, base index, reference) as the DiD lays them out."""
    treated = np.unique(cohorts[np.isfinite(cohorts)])
    treated = treated[(treated > times[0] + anticipation) & (treated <= times[-1])]
    n_t = times.size
    out = []
    for g in treated:
        last_pre = int(np.flatnonzero(times + anticipation < g)[-1])
        if base_period == "varying":
            t_idx = np.arange(1, n_t)
            b_idx = np.where(g <= times[t_idx], last_pre, t_idx - 1)
            ref = np.zeros(t_idx.size, dtype=bool)
        else:
            t_idx = np.arange(n_t)
            b_idx = np.full(n_t, last_pre)
            ref = t_idx == last_pre
        out.append((g, t_idx, b_idx, ref))
    return out


def within_cells(y: np.ndarray, cohorts: np.ndarray, times: np.ndarray, *,
                 base_period: str = "varying", anticipation: float = 0.0,
                 run_trends: str = "never_treated") -> WithinCells:
    r"""Each instance compared with itself across runs.

    Parameters
    ----------
    y : ndarray (runs x instances x times)
        The outcome (oriented: higher = better predicted).
    cohorts : ndarray (runs x instances)
        Each instance's cohort in each run (``inf``: never trained in that run); cohorts
        after the last time count as never treated.
    times : ndarray
    base_period : {"varying", "universal"}
        The base of each cell, as :class:`~didmem.DiDEstimator`'s.
    anticipation : float
    run_trends : {"never_treated", "none"}
        ``"never_treated"``: first subtract from every run's outcomes, at each checkpoint,
        the mean of the instances that no run trains (validation instances), so that a shift
        common to a run's instances (an initialisation, a data order that makes one run
        better at a checkpoint) leaves the comparison; ``"none"``: compare raw changes (runs
        that differ only in their data order).

    Notes
    -----
    For the cell ``(g, c)`` with base ``b`` and ``d_{ri} = Y_{ric} - Y_{rib}``, every pair
    ``(r, i)`` with ``g_r(i) = g`` and a non-empty set ``S_{ri}`` of other runs ``s`` with
    ``g_s(i) > max(c, b) + anticipation`` gives ``D_{ri} = d_{ri} - mean_{s in S_{ri}} d_{si}``;
    the estimate is the mean of ``D`` over the pairs. Assumption: the runs are exchangeable
    given the instance (its untreated change from ``b`` to ``c`` has the same expectation in
    every run; after removing the runs' validation mean with ``run_trends="never_treated"``).
    The estimate is a ratio of instance sums, ``sum_i A_i / sum_i B_i``, so the influence of
    instance ``i`` is ``(A_i - tau B_i) / sum B``; the validation means add
    ``-sum_r a_r (d_rj - bar d_r) / n_N`` on validation instance ``j``, with ``a_r`` run
    ``r``'s net weight (as treated less as control).
    """
    y = np.asarray(y, dtype=np.float64)
    cohorts = np.asarray(cohorts, dtype=np.float64).copy()
    times = np.asarray(times, dtype=np.float64)
    cohorts[np.isfinite(cohorts) & (cohorts > times[-1])] = np.inf
    n_runs, n_units, _ = y.shape
    if n_runs < 2:
        raise EstimationError("The within-instance comparison needs at least 2 runs; got "
                              f"{n_runs}.")
    validation = np.all(np.isinf(cohorts), axis=0)
    if run_trends == "never_treated":
        if validation.sum() < 2:
            raise EstimationError(
                "run_trends='never_treated' removes each run's shift at each checkpoint with "
                "the instances that no run trains (validation instances), but the panel has "
                f"{int(validation.sum())}. Add validation instances, or pass "
                "run_trends='none' (runs that differ only in their data order).")
        y = y - y[:, validation, :].mean(axis=1, keepdims=True)
    blocks = _cell_layout(cohorts, times, base_period, anticipation)
    if not blocks:
        raise EstimationError("No cohort has a pre-treatment period within the panel's times "
                              "in any run: nothing to compare.")
    parts = [_cohort_cells(y, cohorts, times, g, t_idx, b_idx, anticipation,
                           validation if run_trends == "never_treated" else None)
             for g, t_idx, b_idx, _ in blocks]
    est = np.concatenate([p[0] for p in parts])
    reference = np.concatenate([ref for *_, ref in blocks])
    est[reference] = 0.0
    psi = np.concatenate([p[1] for p in parts], axis=1)
    psi[:, reference] = 0.0
    return WithinCells(
        cohort=np.concatenate([np.full(t.size, g) for g, t, _, _ in blocks]),
        time=np.concatenate([times[t] for _, t, _, _ in blocks]),
        base_time=np.concatenate([times[b] for _, _, b, _ in blocks]),
        estimate=est, psi=psi, n_pairs=np.concatenate([p[2] for p in parts]),
        n_instances=np.concatenate([p[3] for p in parts]), reference=reference,
        validation=validation if run_trends == "never_treated" else np.zeros_like(validation))


def _cohort_cells(y, cohorts, times, g, t_idx, b_idx, anticipation, validation):
    """One cohort's cells: estimates, instance influence (instances x cells), pairs and
    instances with a control run."""
    change = y[:, :, t_idx] - y[:, :, b_idx]  # runs x instances x cells
    threshold = np.maximum(times[t_idx], times[b_idx]) + anticipation
    control = cohorts[:, :, None] > threshold[None, None, :]
    treated = (cohorts == g)[:, :, None]
    n_control = control.sum(axis=0)[None] - control
    control_sum = (control * change).sum(axis=0)[None] - control * change
    pair = treated & (n_control > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.where(pair, change - control_sum / np.maximum(n_control, 1), 0.0)
    n_pairs = pair.sum(axis=(0, 1))
    per_unit = pair.sum(axis=0)  # instances x cells
    with np.errstate(divide="ignore", invalid="ignore"):
        est = np.where(n_pairs > 0, diff.sum(axis=(0, 1)) / n_pairs, np.nan)
        psi = np.where(n_pairs > 0,
                       (diff.sum(axis=0) - np.nan_to_num(est) * per_unit) / n_pairs, 0.0)
        if validation is not None:
            weight = np.where(pair, 1.0 / np.maximum(n_control, 1), 0.0)
            as_control = (control * (weight.sum(axis=0)[None] - weight)).sum(axis=1)
            net = np.where(n_pairs > 0, (pair.sum(axis=1) - as_control) / n_pairs, 0.0)
            psi[validation] -= np.einsum("rm,rjm->jm", net, change[:, validation]) \
                / validation.sum()
    return est, psi, n_pairs, (per_unit > 0).sum(axis=0)


# ------------------------------------------------------------------------------ the route
@dataclass(frozen=True)
class WithinDesign:
    """What the shared inference and aggregations read of a design, for the within-instance
    comparison.

    The units are the panel's instances (one block; no cluster column: an instance is its own
    cluster, its pairs in every run summed in its influence function). ``cohorts`` are the
    treated cohorts and ``cohort_shares`` their shares of the (run, instance) pairs first
    trained there: the aggregations' cohort weights, fixed by the runs' data orders (no
    estimated-weights term).
    """

    times: np.ndarray
    n_units: int
    cohorts: np.ndarray
    cohort_shares: np.ndarray
    clusters: None = None
    n_clusters: int = 0
    holes: None = None

    @property
    def starts(self) -> np.ndarray:
        """One block of all the instances."""
        return np.array([0, self.n_units])

    @property
    def n_cohorts(self) -> int:
        return int(self.cohorts.size)


@dataclass(frozen=True)
class WithinLayout:
    """The cells' layout as the shared inference reads it: ``k`` (the cohort's index in
    ``WithinDesign.cohorts``), ``t`` (the time's index), ``ref`` (1 at reference cells, fixed
    at 0) and ``size``."""

    k: np.ndarray
    t: np.ndarray
    ref: np.ndarray

    @property
    def size(self) -> int:
        return int(self.ref.size)


@dataclass(frozen=True, eq=False)
class WithinInfluence(CellInfluence):
    """The within-instance cells' influence functions, instances x cells.

    Built by :meth:`build` from :func:`within_cells`. Each cell's variance has two
    independent parts (:meth:`welch_groups`): the instances with a (run, instance) pair in the
    cell, and the validation instances whose means removed the runs' shifts.
    """

    within: WithinCells
    prepared: WithinDesign
    cells: WithinLayout
    stats: Mapping[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def build(cls, within: WithinCells, times, pairs_per_cohort=None) -> "WithinInfluence":
        """The route of ``within`` (cells of a panel with checkpoints ``times``; only cells
        with a (run, instance) pair or a reference cell: :meth:`WithinCells.estimable`).
        ``pairs_per_cohort`` (one per treated cohort, ascending) weighs the cohorts in
        aggregations (by default equally)."""
        times = np.asarray(times, dtype=np.float64)
        cohorts = np.unique(within.cohort)
        pairs = (np.ones(cohorts.size) if pairs_per_cohort is None
                 else np.asarray(pairs_per_cohort, dtype=np.float64))
        return cls(within=within,
                   prepared=WithinDesign(times=times, n_units=int(within.psi.shape[0]),
                                         cohorts=cohorts, cohort_shares=pairs / pairs.sum()),
                   cells=WithinLayout(k=np.searchsorted(cohorts, within.cohort),
                                      t=np.searchsorted(times, within.time),
                                      ref=within.reference.astype(np.int64)))

    @property
    def n_cells(self) -> int:
        return int(self.within.psi.shape[1])

    @property
    def estimates(self) -> np.ndarray:
        return self.within.estimate

    def variance(self, clusters=None, n_clusters: int = 0) -> np.ndarray:
        psi = self.within.psi
        return np.einsum("ij,ij->j", psi, psi)

    def treated_variance(self) -> np.ndarray:
        """The part of the instances with pairs in each cell (all but the validation ones)."""
        psi = self.within.psi[~self.within.validation]
        return np.einsum("ij,ij->j", psi, psi)

    def welch_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """The instances with pairs in each cell (``n_instances`` of them) and the validation
        instances: Welch's correction with two independent groups (one without validation
        instances, ``run_trends="none"``)."""
        paired = self.treated_variance()
        n_validation = np.full(self.n_cells, float(self.within.validation.sum()))
        return (np.stack([paired, self.variance() - paired]),
                np.stack([self.within.n_instances.astype(np.float64), n_validation]))

    @property
    def n_blocks(self) -> int:
        """One column per cohort (as the aggregations' draws read them) and the rest; the
        within's cohort weights are fixed, so these sums never enter an estimate."""
        return self.prepared.n_cohorts + 1

    def chunk_drawer(self, multipliers, clusters, n_clusters: int) -> Callable:
        psi = np.ascontiguousarray(self.within.psi)

        def draw(row0, weights, out):
            rows = slice(row0, row0 + weights.shape[0])
            out.cells[rows] = weights @ psi
            out.block_weights[rows] = 0.0
            out.total[rows] = weights.sum(axis=1)

        return draw

    def combination_psi(self, weights, omega) -> np.ndarray:
        """``psi @ weights.T``: the cohorts' weights are the runs' data orders, fixed by design,
        so there is no estimated-weights term (``omega`` is zero, :func:`fixed_weights`)."""
        return self.combine(weights)

    def covariance(self, which: np.ndarray) -> np.ndarray:
        psi = self.within.psi[:, np.asarray(which)]
        return psi.T @ psi

    def combine(self, matrix) -> np.ndarray:
        return np.asarray((matrix @ self.within.psi.T).T)

    def dense(self) -> np.ndarray:
        return self.within.psi.copy()


def fixed_weights(spec):
    """An aggregation's layout (:class:`~didmem.results.aggregations.AggregationSpec`) with no
    estimated-weights term: the within-instance comparison's cohort weights are fixed."""
    from dataclasses import replace

    return replace(spec, omega=np.zeros_like(spec.omega))
