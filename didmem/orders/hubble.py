"""Hubble's inserted documents: which example was inserted where, and how many times.

The layout, as allegro-lab/hubble's perturbation tools write it
(``scripts/perturbation_utils/perturb_hubble.py``, ``scripts/tokenize_hubble.sh``):

- The examples to insert are JSON lines (``*_dup.jsonl``), one line per *copy*: an example
  duplicated ``d`` times has ``d`` lines with the same identifier in ``meta`` (``id``,
  ``uuid``, ``question_id`` or ``idx``) and, for most sources, ``meta.duplicates = d``
  (d in 0, 1, 4, 16, 64, 256; 0 = held out, never inserted). Each group of JSON files is
  tokenized, in sorted file order, into one GPT-NeoX dataset (``.bin``/``.idx``), so an
  example copy is row ``perturbation_idx`` of dataset ``perturbation_file``.
- The training run's ``<dataset>_perturbation_info.json`` has one JSON line per inserted
  copy with ``perturbation_file``, ``perturbation_idx`` and ``pt_loc``: the position in the
  training order (the sample index), so the copy is trained at step ``pt_loc // B + 1`` for a
  global batch of ``B`` sequences. Positions are drawn at random without replacement, so the
  number of exposures (the dose) is assigned at random.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from .._messages import listing
from ..errors import ParameterError
from .exposures import exposure_frame

__all__ = ["read_perturbation_info", "read_inserted_examples", "hubble_exposures"]

_INFO_KEYS = ("perturbation_file", "perturbation_idx", "pt_loc")
_ID_KEYS = ("id", "uuid", "question_id", "idx")


def _json_lines(path: Path, what: str):
    if not path.is_file():
        raise ParameterError(f"{what} {str(path)!r} does not exist.")
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ParameterError(
                    f"{what} {str(path)!r} line {number} is not JSON: {exc}."
                ) from None
            if not isinstance(record, dict):
                raise ParameterError(f"{what} {str(path)!r} line {number} is not a JSON object.")
            yield number, record


def read_perturbation_info(path) -> pd.DataFrame:
    """Read a Hubble run's ``*_perturbation_info.json`` (JSON lines, one per inserted copy).

    Returns
    -------
    pandas.DataFrame
        ``perturbation_file``, ``perturbation_idx`` and ``pt_loc``.

    Raises
    ------
    ParameterError
        One line naming the file and line: not JSON, a key missing, a negative or repeated
        position.
    """
    path = Path(path)
    rows = []
    for number, record in _json_lines(path, "Hubble perturbation info"):
        missing = [k for k in _INFO_KEYS if k not in record]
        if missing:
            raise ParameterError(
                f"Hubble perturbation info {str(path)!r} line {number} lacks "
                f"{listing(missing)}."
            )
        loc, idx = record["pt_loc"], record["perturbation_idx"]
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 63
                   for v in (loc, idx)):
            raise ParameterError(
                f"Hubble perturbation info {str(path)!r} line {number}: pt_loc and "
                f"perturbation_idx must be non-negative integers below 2**63 (positions in "
                f"the training order); got {loc!r} and {idx!r}."
            )
        rows.append((str(record["perturbation_file"]), idx, loc))
    frame = pd.DataFrame(rows, columns=list(_INFO_KEYS))
    repeated = frame["pt_loc"].duplicated()
    if repeated.any():
        raise ParameterError(
            f"Hubble perturbation info {str(path)!r}: {int(repeated.sum())} positions are used "
            f"twice, e.g. pt_loc {int(frame['pt_loc'][repeated].iloc[0])}."
        )
    return frame


def _identifier(record: dict, path: Path, number: int) -> str:
    meta = record.get("meta") if isinstance(record.get("meta"), dict) else {}
    for key in _ID_KEYS:
        value = meta.get(key)
        if value is not None and value is not False:
            return str(value)
    text = record.get("text")
    if not isinstance(text, str):
        raise ParameterError(
            f"Hubble examples {str(path)!r} line {number} has no meta id ({', '.join(_ID_KEYS)}) "
            "and no text."
        )
    return "text:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def read_inserted_examples(perturbation_file: str, jsonl_files) -> pd.DataFrame:
    """The examples behind one tokenized perturbation dataset, row by row.

    Parameters
    ----------
    perturbation_file : str
        The dataset's name as ``perturbation_info`` gives it.
    jsonl_files : sequence of path
        The JSON-lines files tokenized into it; they are read in sorted order, as the
        tokenization script passes them.

    Returns
    -------
    pandas.DataFrame
        ``perturbation_file``, ``perturbation_idx`` (the row), ``unit`` (the example's
        identifier: its meta id, else a hash of its text) and ``duplicates`` (its
        ``meta.duplicates``, NaN where absent).
    """
    rows = []
    for path in sorted(Path(p) for p in jsonl_files):
        for number, record in _json_lines(path, "Hubble examples"):
            meta = record.get("meta") if isinstance(record.get("meta"), dict) else {}
            dup = meta.get("duplicates")
            rows.append((perturbation_file, len(rows), _identifier(record, path, number),
                         float(dup) if isinstance(dup, (int, float)) else np.nan))
    return pd.DataFrame(rows, columns=["perturbation_file", "perturbation_idx", "unit",
                                       "duplicates"])


def hubble_exposures(info: pd.DataFrame, examples: pd.DataFrame, batch_size: int, *,
                     where: str = "hubble") -> pd.DataFrame:
    """Every inserted copy's training step, by example.

    Parameters
    ----------
    info : pandas.DataFrame
        :func:`read_perturbation_info`.
    examples : pandas.DataFrame
        :func:`read_inserted_examples` of every perturbation dataset the run used.
    batch_size : int
        Sequences per optimisation step.
    where : str
        How errors name the design.

    Returns
    -------
    pandas.DataFrame
        ``unit``, ``position`` (``pt_loc``) and ``step`` (``pt_loc // batch_size + 1``), one
        row per inserted copy, sorted by unit and step.

    Raises
    ------
    ParameterError
        An inserted copy has no example row, or an example's number of inserted copies
        differs from its ``meta.duplicates``.
    """
    keys = ["perturbation_file", "perturbation_idx"]
    merged = info.merge(examples, on=keys, how="left", validate="one_to_one")
    unknown = merged["unit"].isna()
    if unknown.any():
        first = merged[unknown].iloc[0]
        raise ParameterError(
            f"{where}: {int(unknown.sum())} inserted copies have no example row, e.g. "
            f"{first['perturbation_file']!r} row {int(first['perturbation_idx'])}; give every "
            "perturbation dataset's JSON files."
        )
    count = merged.groupby("unit").size()
    declared = examples.dropna(subset=["duplicates"]).groupby("unit")["duplicates"].first()
    inserted = count.reindex(declared.index, fill_value=0)
    wrong = declared[declared.to_numpy() != inserted.to_numpy()]
    if len(wrong):
        unit = wrong.index[0]
        raise ParameterError(
            f"{where}: {len(wrong)} examples were inserted a number of times other than their "
            f"meta.duplicates, e.g. {unit!r}: {int(inserted[unit])} copies, duplicates = "
            f"{int(wrong.iloc[0])}."
        )
    return exposure_frame(merged["unit"].to_numpy(), merged["pt_loc"].to_numpy(dtype=np.int64),
                          batch_size)
