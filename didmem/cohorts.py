"""Cohorts from a training order: the one place where the rules live.

A training instance's cohort (treatment step) is the first checkpoint that has seen it.
Every part of didmem that needs a cohort (the Pythia helpers, :class:`~didmem.backends.
FrameBackend`, the study configuration of ``didmem score``, the lab) calls these functions.

Two rules map an index into the data order to a cohort:

``"didmem"`` (the default, and the correct one)
    Sequence ``i`` (0-based) is in batch ``b = i // B`` and is trained at step ``b + 1``;
    checkpoint ``stepN`` has seen steps ``1 .. N``. The cohort is the first checkpoint at or
    after the training step: ``g = ceil((i // B + 1) / S) * S`` on a grid of checkpoints every
    ``S`` steps. Negative indices mark validation instances (never treated).
``"paper"`` (the code of Lesci et al. 2024)
    ``batch = ceil(i / B)``, ``g = ceil(batch / S) * S``, and ``i <= 0`` is validation.

With ``B = 1024`` and ``S = 1000`` the two agree except at macro-batch boundaries: sequence
``i = 1,024,000`` (the first of batch 1000, trained at step 1001) is in cohort 2000 by the
didmem rule and 1000 by the paper's, and sequence 0 is trained at step 1 (cohort 1000) but
taken for validation by the paper's rule.
"""

from __future__ import annotations

import warnings

import numpy as np

from .errors import DataDroppedWarning, ParameterError

__all__ = [
    "COHORT_RULES",
    "PAPER_LAST_STEP",
    "cohort_from_sequence_index",
    "cohort_from_step",
    "step_from_sequence_index",
    "paper_first_epoch",
    "PYTHIA_BATCH_SIZE",
    "PYTHIA_STEPS_PER_CHECKPOINT",
]

#: The rules of :func:`cohort_from_sequence_index`.
COHORT_RULES = ("didmem", "paper")
#: Sequences per optimisation step of the Pythia suite (the one place this number lives).
PYTHIA_BATCH_SIZE = 1024
#: Steps between Pythia's evenly spaced checkpoints (``step1000``, ``step2000``, ...).
PYTHIA_STEPS_PER_CHECKPOINT = 1000
#: The paper keeps cohorts and checkpoints up to this step, the end of the first epoch of the
#: deduplicated Pythia suite (its data repeat afterwards).
PAPER_LAST_STEP = 95_000


def _positive(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be a positive integer; got {value!r}.")
    return int(value)


def _integers(values, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
        i = int(np.argmax(arr > np.iinfo(np.int64).max))
        raise ParameterError(f"{name} holds {int(arr.flat[i])} at entry {i}, beyond any index "
                             "(at most 2**63 - 1); as int64 it would turn negative, a "
                             "validation instance.")
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f" and arr.size and not np.all(np.equal(np.mod(arr, 1), 0)):
        raise ParameterError(f"{name} must hold integers.")
    if arr.dtype.kind not in "fb" and arr.size:
        raise ParameterError(f"{name} must hold integers; got dtype {arr.dtype}.")
    return arr.astype(np.int64)


def step_from_sequence_index(seq_idx, batch_size: int = PYTHIA_BATCH_SIZE) -> np.ndarray:
    """Optimisation step at which each sequence of the data order is trained: ``i // B + 1``.

    Parameters
    ----------
    seq_idx : array_like of int
        0-based indices into the data order; negative indices (validation) give ``NaN``.
    batch_size : int
        Sequences per optimisation step (1024 for Pythia).

    Returns
    -------
    numpy.ndarray of float
        The training step, ``NaN`` for validation instances.

    Examples
    --------
    >>> step_from_sequence_index([0, 1023, 1024, -1])
    array([ 1.,  1.,  2., nan])
    """
    batch_size = _positive(batch_size, "batch_size")
    idx = _integers(seq_idx, "seq_idx")
    step = (idx // batch_size + 1).astype(np.float64)
    step[idx < 0] = np.nan
    return step


def cohort_from_step(step, checkpoints) -> np.ndarray:
    """Cohort of each instance: the first checkpoint at or after its training step.

    Parameters
    ----------
    step : array_like of float
        The optimisation step at which each instance was trained (1 for the first step);
        ``NaN`` (or ``inf``) marks validation instances, which are never treated.
    checkpoints : sequence of int
        The steps of the saved checkpoints, in any order.

    Returns
    -------
    numpy.ndarray of float
        The cohort of each instance, ``inf`` for validation instances.

    Raises
    ------
    ParameterError
        A step is not a positive integer, or is after the last checkpoint (such an instance
        is never seen by the checkpoints, so its cohort is unknown).

    Examples
    --------
    >>> cohort_from_step([1, 1000, 1001, float("nan")], [0, 1000, 2000])
    array([1000., 1000., 2000.,   inf])
    """
    grid = np.unique(np.asarray(checkpoints, dtype=np.float64))
    if grid.size == 0:
        raise ParameterError("cohort_from_step needs at least one checkpoint.")
    steps = np.asarray(step, dtype=np.float64)
    train = np.isfinite(steps)
    bad = train & ((steps < 1) | (np.mod(steps, 1) != 0))
    if bad.any():
        raise ParameterError(
            f"Training steps must be positive integers; got {float(steps[bad][0]):g} "
            f"({int(bad.sum())} such)."
        )
    pos = np.searchsorted(grid, steps[train], side="left")
    if (pos >= grid.size).any():
        late = steps[train][pos >= grid.size]
        raise ParameterError(
            f"{late.size} instances are trained after the last checkpoint {grid[-1]:g}, e.g. at "
            f"step {late[0]:g}; their cohort is unknown."
        )
    cohort = np.full(steps.shape, np.inf)
    cohort[train] = grid[pos]
    return cohort


def cohort_from_sequence_index(
    seq_idx,
    batch_size: int = PYTHIA_BATCH_SIZE,
    steps_per_checkpoint: int = PYTHIA_STEPS_PER_CHECKPOINT,
    *,
    rule: str = "didmem",
) -> np.ndarray:
    """Map indices into the data order to their cohort (treatment checkpoint).

    The rules are described in :mod:`didmem.cohorts`. By the default ``"didmem"`` rule the
    cohort is the first checkpoint at or after the training step,

    .. math:: g = \\lceil (\\lfloor i / B \\rfloor + 1) / S \\rceil \\cdot S,

    with ``B = batch_size`` (1024 for Pythia) and ``S = steps_per_checkpoint`` (1000): all
    batches between two checkpoints form one macro-batch, hence one cohort. The ``"paper"``
    rule reproduces the code of Lesci et al. (2024): ``batch = ceil(i / B)``,
    ``g = ceil(batch / S) * S``, and ``i <= 0`` is validation.

    Parameters
    ----------
    seq_idx : array_like of int
        Indices into the training order. Negative indices (and, by the paper's rule, 0) mark
        validation instances, which are never treated and get ``inf``.
    batch_size, steps_per_checkpoint : int
        Sequences per batch and optimisation steps between checkpoints.
    rule : {"didmem", "paper"}
        The rule.

    Returns
    -------
    numpy.ndarray of float
        The cohort of each index (``inf`` for validation instances).

    Examples
    --------
    >>> cohort_from_sequence_index([0, 1_023_999, 1_024_000, -1])
    array([1000., 1000., 2000.,   inf])
    >>> cohort_from_sequence_index([0, 1_023_999, 1_024_000, -1], rule="paper")
    array([  inf, 1000., 1000.,   inf])
    """
    if rule not in COHORT_RULES:
        raise ParameterError(
            f"The 'rule' parameter of cohort_from_sequence_index must be one of "
            f"{set(COHORT_RULES)}. Got {rule!r}."
        )
    batch_size = _positive(batch_size, "batch_size")
    every = _positive(steps_per_checkpoint, "steps_per_checkpoint")
    idx = _integers(seq_idx, "seq_idx")
    if rule == "didmem":
        step = idx // batch_size + 1
        cohort = (-(-step // every) * every).astype(np.float64)
        cohort[idx < 0] = np.inf
    else:
        batch = -(-idx // batch_size)  # ceil(i / B) in integers
        cohort = (-(-batch // every) * every).astype(np.float64)
        cohort[idx <= 0] = np.inf
    return cohort


def paper_first_epoch(frame, *, time: str = "time", cohort: str = "cohort",
                      last: int = PAPER_LAST_STEP, where: str = "the panel"):
    """Keep the rows with ``cohort <= last`` (or never treated) and ``time <= last``.

    The paper's filter: the deduplicated Pythia models see their data a second time after
    step 95,000, so later cohorts and checkpoints are left out. Dropped rows are counted in a
    :class:`~didmem.errors.DataDroppedWarning`.

    Parameters
    ----------
    frame : pandas.DataFrame
        A long table with the time and cohort columns.
    time, cohort : str
        Their names.
    last : int
        The last step kept (95,000).
    where : str
        Names the table in the warning.

    Returns
    -------
    pandas.DataFrame
        The kept rows, in their order.
    """
    g = frame[cohort].to_numpy(dtype=np.float64, na_value=np.inf)
    keep = ((g <= last) | ~np.isfinite(g)) & (frame[time].to_numpy(dtype=np.float64) <= last)
    if not keep.all():
        warnings.warn(
            f"{where}: dropped {int((~keep).sum())} of {keep.size} rows with a cohort or "
            f"checkpoint after step {last} (the paper's first-epoch rule).",
            DataDroppedWarning,
            stacklevel=2,
        )
    return frame[keep]
