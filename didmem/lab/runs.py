"""Several lab runs on one corpus: each run's data order, and the tables with a ``run`` column.

With ``LabConfig(runs=R)`` the lab trains ``R`` runs on the same corpus, as PolyPythias'
data seeds train the same data in other orders. Run 0 is the single run of the seed
(:func:`~didmem.lab.build_design`); run ``r >= 1`` (:func:`run_design`) keeps its corpus,
its analysed and validation instances and each analysed instance's replacement, and draws
from its own random streams

- the analysed positions (``n_analysed`` per cohort, by the same ``placement`` rule) and
  which analysed instance takes which of them (a uniform permutation), so that every
  instance's cohort in run ``r`` is independent of its cohort in run 0;
- the positions of the fillers (a uniform permutation of run 0's filler positions'
  instances, duplicates included: the multiset of trained instances is the same);
- with ``vary_init``, the initialisation (otherwise run 0's).

A unit id names the same instance (the same tokens) in every run.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..panel import cohort_from_sequence_index
from .design import STREAMS, _analysed_positions, _other_replacements, replacement_strata

__all__ = ["run_design", "run_streams", "stack_runs", "run_directory", "RUN_COLUMN"]

RUN_COLUMN = "run"
"""The column that names the run in the tables of several runs."""

_RUN_SPAWN_BASE = 1_000
"""Run ``r``'s streams are spawned from ``SeedSequence(seed, spawn_key=(1000 + r,))``: a
branch of the seed's tree that the single run's streams (spawn keys ``0 .. 9``) never reach."""


def run_streams(seed: int, run: int) -> dict:
    """Run ``run``'s own random streams (named as :data:`~didmem.lab.design.STREAMS`)."""
    root = np.random.SeedSequence(int(seed), spawn_key=(_RUN_SPAWN_BASE + int(run),))
    return {name: np.random.Generator(np.random.PCG64(child))
            for name, child in zip(STREAMS, root.spawn(len(STREAMS)))}


def run_directory(run: int) -> str:
    """Where run ``run``'s own files go, relative to the output directory."""
    return f"runs/run{int(run)}"


def run_design(design, run: int):
    """The design of run ``run``: ``design``'s corpus and instances in another data order.

    Parameters
    ----------
    design : LabDesign
        Run 0's design (:func:`~didmem.lab.build_design`).
    run : int
        The run; ``0`` returns ``design`` itself.

    Returns
    -------
    LabDesign
        The same tokens, split, domains, validation instances and subset seeds; the
        order, analysed positions, analysed ids (a permutation of run 0's), their
        replacements and cohorts, the subset membership (following each instance) and the
        other replacement draws of this run; the init seed of run 0, or this run's own
        with ``vary_init``.
    """
    run = int(run)
    if run == 0:
        return design
    cfg = design.config
    rngs = run_streams(cfg.seed, run)
    n_positions = cfg.n_positions
    positions = _analysed_positions(cfg, rngs["placement"])
    which = rngs["placement"].permutation(len(design.analysed_ids))
    was_analysed = np.zeros(n_positions, dtype=bool)
    was_analysed[design.analysed_positions] = True
    is_analysed = np.zeros(n_positions, dtype=bool)
    is_analysed[positions] = True
    order = np.empty(n_positions, dtype=design.order.dtype)
    order[~is_analysed] = rngs["duplicates"].permutation(design.order[~was_analysed])
    analysed_ids = design.analysed_ids[which]
    order[positions] = analysed_ids
    replacement_ids = design.replacement_ids[which]
    cohorts = cohort_from_sequence_index(positions, cfg.batch_size,
                                         cfg.checkpoint_every).astype(np.int64)
    init_seed = (int(rngs["init"].integers(0, 2**31 - 1)) if cfg.vary_init
                 else design.init_seed)
    return dataclasses.replace(
        design, order=order, analysed_positions=positions, analysed_ids=analysed_ids,
        replacement_ids=replacement_ids, analysed_cohorts=cohorts,
        membership=design.membership[:, which], init_seed=init_seed,
        other_replacements=_other_replacements(
            cfg, cohorts, replacement_ids, replacement_strata(design.domains, design.rare),
            rngs["truth_draws"]))


def stack_runs(tables: list) -> pd.DataFrame:
    """One table from each run's, with ``run`` (``0`` to ``R - 1``, int64) as the first column."""
    parts = [frame.assign(**{RUN_COLUMN: np.int64(r)}) for r, frame in enumerate(tables)]
    out = pd.concat(parts, ignore_index=True)
    return out[[RUN_COLUMN] + [c for c in out.columns if c != RUN_COLUMN]]
