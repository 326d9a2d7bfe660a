"""Lists of memorised sequence indices joined with a training order: a binary panel of every
training sequence x checkpoint, held as the counts of its memorisation patterns.

EleutherAI's ``pythia-memorized-evals`` (a dataset on the Hugging Face hub, made for Biderman
et al. 2023) lists, for a Pythia model at a checkpoint, the training sequences that the
checkpoint has memorised (prompted with a sequence's first 32 tokens, its greedy continuation
equals the next 32). Its layout, as the dataset card and the repository's file tree show it:

- one *split* per model and checkpoint: ``{duped|deduped}.{size}`` for the final checkpoint
  (step 143,000) and ``{duped|deduped}.{size}.{step}`` for an earlier one (for example
  ``deduped.12b.23000``);
- the split's parquet files: ``data/{split}-{i:05d}-of-{n:05d}[-{hash}].parquet`` (the
  repository) or ``{config}/{split}/{i:04d}.parquet`` (the hub's parquet conversion);
- columns ``index`` (int64: the sequence's index in the training order), ``tokens`` (a list
  of int64: the sequence's first 64 tokens) and ``__index_level_0__`` (pandas' index, equal
  to ``index``). Only ``index`` is read here.

:func:`read_memorised` reads the lists of one model, takes each sequence's training step
from the order (Pythia's: sequence ``i`` is trained at step ``i // 1024 + 1``; or an array of
steps for any other order), and counts, per cohort, the sequences that follow each
memorisation pattern over the checkpoints: the sufficient statistics of the fit
(:class:`~didmem.panel.patterns.PatternPanel`; one byte per sequence while counting, never the
sequence x checkpoint table). A sequence absent from a list is read as not memorised at that
checkpoint.

.. warning::
   EleutherAI's lists at intermediate checkpoints were evaluated on the sequences trained by
   that checkpoint only (``eval_memorization.py`` in EleutherAI/pythia scores the first
   ``step * 1024`` sequences), so there an absent later sequence was *not evaluated*, not
   *not memorised*. Such lists give later cohorts zeros before their training and bias the
   estimates upwards by the memorisation of not-yet-trained text; the pre-tests cannot see
   it. Estimate from lists that evaluated every sequence at every checkpoint (the final
   checkpoint's, or your own extraction test); :func:`read_memorised` warns when a list
   looks as if it evaluated only the trained sequences.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .._messages import listing
from ..errors import DidmemWarning, MissingFileError, PanelError, ParameterError
from ..panel.patterns import PatternPanel, count_patterns, pattern_bits
from .pythia import BATCH_SIZE, PYTHIA_STEPS

__all__ = ["read_memorised", "find_memorised_lists", "MEMORISED_FINAL_STEP"]

#: The checkpoint of a split named without a step (``deduped.1.4b``): Pythia's last.
MEMORISED_FINAL_STEP = PYTHIA_STEPS[-1]

_SPLIT = re.compile(r"^(?P<model>(?:de)?duped\.\d+(?:\.\d+)?[mb])(?:\.(?P<step>\d+))?$")
_SHARD = re.compile(r"^(?P<split>.+?)-\d{5}-of-\d{5}(?:-[0-9a-f]+)?\.parquet$")
_CONVERTED = re.compile(r"^\d{4}\.parquet$")


def _split_of(path: Path) -> str:
    """The split a file belongs to, from its name (or its folder's, in the converted layout)."""
    found = _SHARD.match(path.name)
    split = found.group("split") if found else path.parent.name if \
        _CONVERTED.match(path.name) else None
    if split is None or not _SPLIT.match(split):
        raise PanelError(
            f"{path}: not named as a memorised-index list of pythia-memorized-evals "
            "('data/{duped|deduped}.{size}[.{step}]-00000-of-00001.parquet' or "
            "'{config}/{duped|deduped}.{size}[.{step}]/0000.parquet'); pass a mapping "
            "{step: files} for lists named otherwise.")
    return split


def find_memorised_lists(path, model: str | None = None) -> dict[int, tuple[Path, ...]]:
    """The files of one model's memorised-index lists in a folder, by checkpoint step.

    Parameters
    ----------
    path : str or Path
        A folder in pythia-memorized-evals' layout (searched recursively for ``.parquet``
        files; other files are left alone).
    model : str, optional
        The model, as its splits name it (``"deduped.1.4b"``); needed when the folder holds
        lists of several models.

    Returns
    -------
    dict
        ``{step: (file, ...)}`` in ascending steps (a split without a step is the final
        checkpoint, :data:`MEMORISED_FINAL_STEP`).
    """
    root = Path(path)
    if not root.is_dir():
        raise MissingFileError(f"No folder of memorised-index lists at {str(root)!r}.")
    by_model: dict[str, dict[int, list[Path]]] = {}
    for file in sorted(root.rglob("*.parquet")):
        split = _SPLIT.match(_split_of(file))
        step = int(split.group("step") or MEMORISED_FINAL_STEP)
        by_model.setdefault(split.group("model"), {}).setdefault(step, []).append(file)
    if not by_model:
        raise MissingFileError(f"No parquet file under {str(root)!r}.")
    if model is None:
        if len(by_model) > 1:
            raise ParameterError(f"{root} holds the lists of {len(by_model)} models "
                                 f"({listing(sorted(by_model))}); name one with model=.")
        model = next(iter(by_model))
    if model not in by_model:
        raise ParameterError(f"{root} holds no list of model {model!r}; it holds "
                             f"{listing(sorted(by_model))}.")
    return {step: tuple(files) for step, files in sorted(by_model[model].items())}


def _lists_of(path, model) -> tuple[dict[int, tuple[Path, ...]], str]:
    if isinstance(path, (str, Path)):
        lists = find_memorised_lists(path, model)
        return lists, f"{model or 'the'} memorised-index lists in {path}"
    if not isinstance(path, Mapping):
        raise ParameterError("The 'lists' argument of read_memorised must be a folder (str or "
                             "Path) or a mapping {step: files}; got "
                             f"{type(path).__name__}.")
    lists = {}
    for step, files in dict(path).items():
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
            raise ParameterError(f"The steps of a mapping of lists must be positive integers; "
                                 f"got {step!r}.")
        files = (files,) if isinstance(files, (str, Path)) else tuple(files)
        lists[int(step)] = tuple(Path(f) for f in files)
    if not lists:
        raise ParameterError("The mapping of memorised-index lists is empty.")
    return dict(sorted(lists.items())), "memorised-index lists"


def _read_index(file: Path) -> np.ndarray:
    """The ``index`` column of one list file, checked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not file.is_file():
        raise MissingFileError(f"No memorised-index list at {str(file)!r}.")
    try:
        parquet = pq.ParquetFile(file)
        schema = parquet.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise PanelError(f"{file}: not a parquet file, or cut short ({exc}).") from None
    if "index" not in schema.names:
        raise PanelError(f"{file}: no 'index' column; a memorised-index list has the columns "
                         f"'index' and 'tokens' (this file: {listing(schema.names)}).")
    arrow_type = schema.field("index").type
    if not pa.types.is_integer(arrow_type):
        raise PanelError(f"{file}: column 'index' holds {arrow_type}, not integer sequence "
                         "indices.")
    try:
        column = parquet.read(columns=["index"]).column(0)
    except (pa.ArrowException, OSError) as exc:
        raise PanelError(f"{file}: cannot be read whole; cut short or corrupt ({exc}).") \
            from None
    if column.null_count:
        raise PanelError(f"{file}: {column.null_count} rows have no 'index'.")
    return column.to_numpy()  # its own integer type: cast once checked (a uint64 may wrap)


def _checked_indices(step: int, files, n_seq: int) -> np.ndarray:
    """The memorised indices at one checkpoint (its shards together), in range and once each."""
    parts = [_read_index(f) for f in files]
    for file, index in zip(files, parts):
        bad = (index < 0) | (index >= n_seq)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise PanelError(
                f"{file}: {int(bad.sum())} indices lie outside the training order's "
                f"{n_seq:,} sequences (0 to {n_seq - 1:,}), e.g. {int(index[row])} at row "
                f"{row}; is this the list of another order or model?")
    parts = [index.astype(np.int64, copy=False) for index in parts]  # all in range now
    index = np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    twice = index[1:][index[1:] == index[:-1]]
    if twice.size:
        where = [str(f) for f, p in zip(files, parts) if np.isin(twice[0], p)]
        raise PanelError(f"Sequence {int(twice[0])} is listed twice at step {step} "
                         f"({twice.size} such repeats), in {listing(where)}.")
    return index


def _order(n_seq, batch_size, steps, checkpoints):
    """The number of sequences and the cohort codes of sequences ``lo .. hi - 1``."""
    grid = np.asarray(checkpoints, dtype=np.int64)
    if steps is None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ParameterError(f"batch_size must be a positive integer; got {batch_size!r}.")
        n_seq = MEMORISED_FINAL_STEP * int(batch_size) if n_seq is None else n_seq
        if isinstance(n_seq, bool) or not isinstance(n_seq, (int, np.integer)) or n_seq < 1:
            raise ParameterError(f"sequences must be a positive integer; got {n_seq!r}.")

        def codes(lo, hi):
            step = np.arange(lo, hi, dtype=np.int64) // int(batch_size) + 1
            return np.searchsorted(grid, step, side="left")

        return int(n_seq), codes
    steps = np.asarray(steps)
    if steps.ndim != 1 or steps.dtype.kind not in "iu" or not steps.size:
        raise ParameterError("steps must be a non-empty 1-d integer array: the training step "
                             "of each sequence index.")
    if steps.min() < 1:
        first = int(np.argmin(steps))
        raise ParameterError(f"steps must be positive training steps; sequence {first} has "
                             f"step {int(steps[first])}.")
    if n_seq is not None and n_seq != steps.size:
        raise ParameterError(f"sequences={n_seq} disagrees with the {steps.size} steps given.")
    return int(steps.size), lambda lo, hi: np.searchsorted(grid, steps[lo:hi], side="left")


def read_memorised(lists, *, model: str | None = None, batch_size: int = BATCH_SIZE,
                   sequences: int | None = None, steps=None) -> PatternPanel:
    """A binary panel of every training sequence x checkpoint from memorised-index lists.

    Parameters
    ----------
    lists : str, Path or mapping
        A folder in pythia-memorized-evals' layout (see the module notes), or a mapping
        ``{step: file or [files]}`` of parquet files with an integer ``index`` column.
    model : str, optional
        Which model's lists to read from a folder that holds several (``"deduped.12b"``).
    batch_size : int
        Pythia's order: sequence ``i`` is trained at step ``i // batch_size + 1``.
    sequences : int, optional
        Sequences in the order (default: every sequence of Pythia's 143,000 steps,
        ``143_000 * batch_size``).
    steps : integer array, optional
        Any other order: the training step of each sequence index (its length is the number
        of sequences); ``batch_size`` is then not used.

    Returns
    -------
    PatternPanel
        Times: the lists' checkpoint steps. A sequence's cohort is the first of them at or
        after its training step; sequences trained after the last are never treated within
        the panel. Outcome ``memorised`` (1: in the list at that checkpoint). Fit it with
        :meth:`didmem.DiDEstimator.fit`.

    Raises
    ------
    PanelError
        A file that is not parquet or is cut short, without an integer ``index`` column, an
        index outside the order, or a sequence listed twice at one checkpoint; the message
        names the file.
    """
    found, source = _lists_of(lists, model)
    checkpoints = np.array(list(found), dtype=np.int64)
    n_seq, codes = _order(sequences, batch_size, steps, checkpoints)
    bits = pattern_bits(n_seq, checkpoints.size)
    for t, (step, files) in enumerate(found.items()):
        bits[_checked_indices(step, files, n_seq)] |= bits.dtype.type(1 << t)
    values = np.append(checkpoints.astype(np.float64), np.inf)
    panel = count_patterns(checkpoints, bits, codes, values, outcome="memorised",
                           source=source)
    _warn_if_only_trained_evaluated(panel, found)
    return panel


def _warn_if_only_trained_evaluated(panel: PatternPanel, found) -> None:
    """Warn when a list names no sequence trained after its checkpoint although, at the rate
    it lists trained ones, it would name 100 or more if it had evaluated them."""
    for t, (step, files) in enumerate(found.items()):
        later = panel.cohorts > panel.times[t]
        listed = panel.patterns[:, t] == 1
        trained = panel.counts[~later].sum()
        if not later.any() or not trained or panel.counts[later & listed].sum():
            continue
        expected = panel.counts[~later & listed].sum() / trained * panel.counts[later].sum()
        if expected >= 100:
            warnings.warn(
                f"The list at step {step} ({listing([str(f) for f in files])}) names no "
                f"sequence trained after step {step}, of {int(panel.counts[later].sum()):,}; "
                f"at its rate among trained sequences it would name about {expected:,.0f}. If "
                "it evaluated only the sequences trained by then (as EleutherAI's intermediate "
                "lists do), their zeros there are unknowns and the estimates are biased.",
                DidmemWarning, stacklevel=3)
