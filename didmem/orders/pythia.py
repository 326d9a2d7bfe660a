"""The Pythia suite: checkpoints, the step mapping, the paper's sample and validation packing.

Pythia models (Biderman et al. 2023) train on the pre-shuffled Pile in batches of 1,024
sequences of 2,049 tokens. Batch ``b = seq_idx // 1024`` is trained at step ``b + 1``, so the
checkpoint ``stepN`` has seen batches ``0 .. N-1``, and the cohort of a sequence is the first
checkpoint at or after its training step. Read the data with
:class:`~didmem.orders.MMapIndexedDataset`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..cohorts import (
    PAPER_LAST_STEP,
    PYTHIA_BATCH_SIZE,
    PYTHIA_STEPS_PER_CHECKPOINT,
    cohort_from_step,
    step_from_sequence_index,
)
from ..errors import ParameterError

__all__ = [
    "BATCH_SIZE",
    "SEQUENCE_LENGTH",
    "PYTHIA_STEPS",
    "PYTHIA_REVISIONS",
    "PYTHIA_MODEL_SIZES",
    "DEDUPED_FIRST_EPOCH_END",
    "pythia_model_name",
    "training_step",
    "treatment_checkpoint",
    "first_epoch_checkpoints",
    "PythiaSample",
    "sample_paper_design",
    "pack_sequences",
]

BATCH_SIZE = PYTHIA_BATCH_SIZE
SEQUENCE_LENGTH = 2049
STEPS_PER_CHECKPOINT = PYTHIA_STEPS_PER_CHECKPOINT
#: Steps of the published checkpoints: 0, the log-spaced 1, 2, 4, ..., 512, then every 1,000
#: steps up to 143,000.
PYTHIA_STEPS = (0, *(2**i for i in range(10)), *range(1000, 143_001, 1000))
#: Hub revisions of the checkpoints, from ``"step0"`` to ``"step143000"``.
PYTHIA_REVISIONS = tuple(f"step{s}" for s in PYTHIA_STEPS)
#: Model sizes of the suite, as they appear in repository names (``EleutherAI/pythia-1.4b``).
PYTHIA_MODEL_SIZES = ("14m", "31m", "70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b")
#: Last checkpoint of the first epoch of the deduplicated suite. Its models train for about 1.5
#: epochs of the 207B-token deduplicated Pile, so data repeat after about step 95,000; the paper
#: restricts cohorts and checkpoints to steps up to this one.
DEDUPED_FIRST_EPOCH_END = PAPER_LAST_STEP


def pythia_model_name(size: str, deduped: bool = True) -> str:
    """Hub repository of a Pythia model, e.g. ``"EleutherAI/pythia-1.4b-deduped"``."""
    if size not in PYTHIA_MODEL_SIZES:
        raise ParameterError(
            f"Unknown Pythia size {size!r}; the sizes are {list(PYTHIA_MODEL_SIZES)}."
        )
    return f"EleutherAI/pythia-{size}" + ("-deduped" if deduped else "")


def _indices(seq_idx) -> np.ndarray:
    idx = np.asarray(seq_idx)
    if idx.dtype.kind not in "iu":
        raise ParameterError(f"seq_idx must hold integers; got dtype {idx.dtype}.")
    if idx.dtype == np.uint64 and idx.size and idx.max() > np.iinfo(np.int64).max:
        at = int(np.argmax(idx.ravel() > np.iinfo(np.int64).max))
        raise ParameterError(f"seq_idx holds {int(idx.ravel()[at])} at position {at}, beyond "
                             "any sequence index (at most 2**63 - 1).")
    return idx.astype(np.int64)


def training_step(seq_idx, batch_size: int = BATCH_SIZE) -> np.ndarray:
    """Optimisation step at which each training sequence is trained: ``seq_idx // B + 1``.

    A checkpoint ``stepN`` has seen the sequence iff ``training_step(seq_idx) <= N``. See
    :func:`didmem.cohorts.step_from_sequence_index`, which this calls.
    """
    idx = _indices(seq_idx)
    if (idx < 0).any():
        raise ParameterError(
            "Negative seq_idx marks validation sequences, which are never trained."
        )
    return step_from_sequence_index(idx, batch_size).astype(np.int64)


def treatment_checkpoint(seq_idx, checkpoints=PYTHIA_STEPS, batch_size: int = BATCH_SIZE):
    """Cohort of each sequence: the first of ``checkpoints`` that has seen it.

    Works for any checkpoint grid, including Pythia's log-spaced early steps. Negative
    ``seq_idx`` (validation) gives ``inf``. The rule is :func:`didmem.cohorts.cohort_from_step`
    applied to :func:`didmem.cohorts.step_from_sequence_index`; on a grid of checkpoints
    every ``S`` steps it equals :func:`didmem.cohort_from_sequence_index`.

    Raises
    ------
    ParameterError
        A sequence is trained after the last checkpoint.
    """
    idx = _indices(seq_idx)
    return cohort_from_step(step_from_sequence_index(idx, batch_size), checkpoints)


def first_epoch_checkpoints(steps=PYTHIA_STEPS, end: int = DEDUPED_FIRST_EPOCH_END) -> tuple:
    """The checkpoints up to the end of the first epoch (default: the deduplicated suite's)."""
    return tuple(s for s in steps if s <= end)


@dataclass(frozen=True)
class PythiaSample:
    """A seeded sample of Pythia training and validation sequences, with its design.

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per instance: ``seq_idx`` (negative for validation: ``-1 - j`` for packed
        validation sequence ``j``), ``batch``, ``cohort`` (``inf`` for validation) and
        ``split``.
    design : dict
        The seed and every parameter of :func:`sample_paper_design`, enough to redraw it.
    """

    frame: pd.DataFrame
    design: dict = field(default_factory=dict)

    def save(self, path) -> None:
        """Write the sample to ``path`` (parquet) and its design to ``path.json``."""
        path = Path(path)
        self.frame.to_parquet(path, index=False)
        path.with_name(path.name + ".json").write_text(json.dumps(self.design, indent=1))

    @classmethod
    def load(cls, path) -> PythiaSample:
        """Read a sample written by :meth:`save`."""
        path = Path(path)
        design = json.loads(path.with_name(path.name + ".json").read_text())
        return cls(pd.read_parquet(path), design)

    @property
    def unit_ids(self) -> np.ndarray:
        """The instances' unit ids (their ``seq_idx``)."""
        return self.frame["seq_idx"].to_numpy()


def sample_paper_design(
    seed: int,
    *,
    cohorts=None,
    batches_per_cohort: int = 10,
    sequences_per_batch: int = 10,
    n_validation: int = 2000,
    validation_pool: int | None = None,
    batch_size: int = BATCH_SIZE,
    steps_per_checkpoint: int = STEPS_PER_CHECKPOINT,
) -> PythiaSample:
    """Draw the sample of Lesci et al. (2024): per macro-batch, random batches x sequences.

    Cohort ``g`` is the macro-batch of batches ``g - S .. g - 1`` (``S`` steps between
    checkpoints). From each, ``batches_per_cohort`` distinct batches are drawn, and from each
    batch ``sequences_per_batch`` distinct sequences; plus ``n_validation`` distinct packed
    validation sequences out of ``validation_pool``. Each cohort has its own random stream
    derived from ``(seed, cohort)``, so a cohort's sample does not depend on the others.

    Parameters
    ----------
    seed : int
        Non-negative seed; saved in the result's ``design``.
    cohorts : sequence of int, optional
        Defaults to the first epoch of the deduplicated suite: 1000, 2000, ..., 95000.
    batches_per_cohort, sequences_per_batch : int
        10 and 10 in the paper.
    n_validation : int
        Validation sequences (2,000 in the paper); 0 for none.
    validation_pool : int, optional
        Number of packed validation sequences to draw from (see :func:`pack_sequences`);
        needed when ``n_validation > 0``.
    batch_size, steps_per_checkpoint : int
        1024 and 1000 for Pythia.

    Returns
    -------
    PythiaSample
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer; got {seed!r}.")
    if cohorts is None:
        cohorts = range(steps_per_checkpoint, DEDUPED_FIRST_EPOCH_END + 1, steps_per_checkpoint)
    cohorts = [int(g) for g in cohorts]
    bad = [g for g in cohorts if g <= 0 or g % steps_per_checkpoint]
    if bad:
        raise ParameterError(
            f"Cohorts must be positive multiples of {steps_per_checkpoint}; got {bad[:5]}."
        )
    if batches_per_cohort > steps_per_checkpoint or sequences_per_batch > batch_size:
        raise ParameterError(
            f"Cannot draw {batches_per_cohort} of {steps_per_checkpoint} batches or "
            f"{sequences_per_batch} of {batch_size} sequences without replacement."
        )
    rows = []
    for g in cohorts:
        rng = np.random.default_rng([int(seed), 1, g])
        first = g - steps_per_checkpoint
        batches = np.sort(
            rng.choice(steps_per_checkpoint, batches_per_cohort, replace=False) + first
        )
        for b in batches:
            offsets = np.sort(rng.choice(batch_size, sequences_per_batch, replace=False))
            rows.append(
                pd.DataFrame({"seq_idx": b * batch_size + offsets, "batch": b, "cohort": float(g)})
            )
    train = (
        pd.concat(rows, ignore_index=True)
        if rows
        else pd.DataFrame(
            {
                "seq_idx": np.zeros(0, np.int64),
                "batch": np.zeros(0, np.int64),
                "cohort": np.zeros(0),
            }
        )
    )
    train["split"] = "train"
    parts = [train]
    if n_validation:
        if validation_pool is None or validation_pool < n_validation:
            raise ParameterError(
                f"n_validation={n_validation} needs validation_pool >= {n_validation} packed "
                f"validation sequences; got {validation_pool}."
            )
        rng = np.random.default_rng([int(seed), 2])
        j = np.sort(rng.choice(validation_pool, n_validation, replace=False))
        parts.append(
            pd.DataFrame({"seq_idx": -1 - j, "batch": -1, "cohort": np.inf, "split": "validation"})
        )
    frame = pd.concat(parts, ignore_index=True)
    frame["seq_idx"] = frame["seq_idx"].astype(np.int64)
    frame["batch"] = frame["batch"].astype(np.int64)
    design = dict(
        seed=int(seed),
        cohorts=cohorts,
        batches_per_cohort=batches_per_cohort,
        sequences_per_batch=sequences_per_batch,
        n_validation=n_validation,
        validation_pool=validation_pool,
        batch_size=batch_size,
        steps_per_checkpoint=steps_per_checkpoint,
        sampler="didmem.sample_paper_design/1",
    )
    return PythiaSample(frame, design)


def pack_sequences(documents, length: int = SEQUENCE_LENGTH) -> np.ndarray:
    """Concatenate tokenised documents and cut them into sequences of ``length`` tokens.

    No separator is put between documents, as in the paper's validation sample; the final
    incomplete sequence is dropped.

    Parameters
    ----------
    documents : iterable of 1-D array_like of int
        Token ids of each document, in order.
    length : int
        Tokens per packed sequence (2,049 for Pythia).

    Returns
    -------
    numpy.ndarray
        ``n x length`` int64 array.

    Examples
    --------
    >>> pack_sequences([[1, 2, 3], [4, 5], [6, 7, 8, 9]], length=4)
    array([[1, 2, 3, 4],
           [5, 6, 7, 8]])
    """
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise ParameterError(f"length must be a positive integer; got {length!r}.")
    out, buffer, held = [], [], 0
    for doc in documents:
        arr = np.asarray(doc, dtype=np.int64).ravel()
        buffer.append(arr)
        held += arr.size
        if held >= length:
            flat = np.concatenate(buffer)
            n = flat.size // length
            out.append(flat[: n * length].reshape(n, length))
            buffer, held = [flat[n * length :]], flat.size - n * length
    return np.concatenate(out) if out else np.zeros((0, length), dtype=np.int64)
