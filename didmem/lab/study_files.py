"""The study files of a lab run: ``didmem run --config DIR/study.toml`` re-scores and fits it.

A lab run writes, beside its panel and truth, the three files a study reads (the format of
:mod:`didmem.study`), with paths relative to the run's directory:

- ``study_instances.parquet``: ``unit`` and ``token_ids`` of every scored instance;
- ``study_order.parquet``: ``unit`` and ``step``, one row per time the main run trained on
  an analysed instance (several rows: several exposures) and one row with an empty step per
  validation instance;
- ``study.toml``: the main run's checkpoints, the backend settings the lab scored with,
  ``[instances]``, ``[design] kind = "order"`` and ``[estimate]``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .._outcomes import LOWER_IS_BETTER

__all__ = ["STUDY_FILES", "study_tables", "study_toml"]

STUDY_FILES = ("study.toml", "study_instances.parquet", "study_order.parquet")


def study_tables(design, order: pd.DataFrame) -> dict:
    """``study_instances.parquet`` and ``study_order.parquet`` of a run.

    Parameters
    ----------
    design
        The run's :class:`~didmem.lab.design.LabDesign`.
    order : pandas.DataFrame
        The run's ``data_order.parquet`` table (``instance``, ``step``).
    """
    analysed = np.asarray(design.analysed_ids, dtype=np.int64)
    validation = np.asarray(design.validation_ids, dtype=np.int64)
    units = np.concatenate([analysed, validation])
    instances = pd.DataFrame({
        "unit": units,
        "token_ids": [np.asarray(design.tokens[u], dtype=np.int64) for u in units],
    })
    seen = order[order["instance"].isin(analysed)]
    rows = pd.concat([
        pd.DataFrame({"unit": seen["instance"].to_numpy(np.int64),
                      "step": seen["step"].to_numpy(np.float64)}),
        pd.DataFrame({"unit": validation, "step": np.full(validation.size, np.nan)}),
    ], ignore_index=True)
    return {"study_instances.parquet": instances,
            "study_order.parquet": rows.sort_values(["unit", "step"]).reset_index(drop=True)}


def study_toml(checkpoints, metrics, backend: dict, seed: int) -> str:
    """The text of ``study.toml`` for the main run's ``checkpoints`` (step -> directory)."""
    root = Path(next(iter(checkpoints.values()))).parent.parent
    steps = ", ".join(f'{int(s)} = "{Path(p).relative_to(root).as_posix()}"'
                      for s, p in sorted(checkpoints.items()))
    settings = "\n".join(f"{k} = {json.dumps(v)}" for k, v in backend.items())
    lower = [m for m in metrics if m in LOWER_IS_BETTER]
    return "\n".join([
        "# Written by didmem lab: score the main run's checkpoints and fit the profile with",
        "#   didmem run --config DIR/study.toml --out DIR-study",
        f'model = "didmem lab (seed {seed})"',
        f"metrics = {json.dumps(list(metrics))}",
        "",
        "[backend]",
        'kind = "transformers"',
        settings,
        f"checkpoints = {{ {steps} }}",
        "",
        "[instances]",
        'file = "study_instances.parquet"',
        "",
        "[design]",
        'kind = "order"',
        'file = "study_order.parquet"',
        "",
        "[estimate]",
        f"outcomes = {json.dumps(list(metrics))}",
        f"lower_is_better = {json.dumps(lower)}",
        "",
    ])
