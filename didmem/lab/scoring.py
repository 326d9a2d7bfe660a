"""Scoring of lab checkpoints: one thin call into :class:`didmem.backends.TransformersBackend`.

The lab never computes a metric itself: the panel, the twin's scores and therefore the truth
all come from the same backend call with the same settings, so the truth is built from
exactly the metric values that the panel holds.

The membership-inference metrics score as in the backend: ``min_k_logprob`` and
``min_k_plus_plus`` with ``k = 0.2``, ``zlib_ratio`` of the token ids (the lab's word
tokenizer is not a transformers tokenizer), and ``reference_ratio`` against one fixed
reference model for every run: the twin's last checkpoint (:func:`reference_checkpoint`), a
model trained on the same distribution without any analysed instance, the reference model
that membership-inference attacks assume. Because every run is scored against the same
reference, the truth of ``reference_ratio`` is that of ``mean_token_loglik``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["score_run", "backend_settings", "reference_checkpoint", "tracking"]

#: The metric that needs a reference model.
REFERENCE_METRIC = "reference_ratio"


def reference_checkpoint(config, runs: dict):
    """The reference model of ``reference_ratio``: the twin's last checkpoint, or None when
    the metric is not asked for."""
    if REFERENCE_METRIC not in config.metrics:
        return None
    return runs["twin"]["checkpoints"][config.n_steps]


def backend_settings(config) -> dict:
    """Keyword arguments of the backend that change the scores (recorded in the manifest)."""
    suffix = min(config.extractable_suffix, config.seq_len - 1)
    return {
        "device": "cpu",
        "dtype": "float32",
        "batch_size": config.score_batch_size,
        "prefix_length": config.seq_len - suffix,
        "suffix_length": suffix,
    }


def score_run(checkpoints: dict, token_ids: np.ndarray, unit_ids: np.ndarray, config,
              reference=None) -> pd.DataFrame:
    """Score instances at checkpoints with the transformers backend.

    Parameters
    ----------
    checkpoints : dict of int to path
        Step to checkpoint directory.
    token_ids : numpy.ndarray
        ``n x seq_len`` token ids.
    unit_ids : numpy.ndarray
        One id per row of ``token_ids``.
    config : LabConfig
        Gives the metrics and the backend's batch size and extractability lengths.
    reference : path, optional
        The reference model of ``reference_ratio`` (:func:`reference_checkpoint`).

    Returns
    -------
    pandas.DataFrame
        Columns ``unit``, ``time`` and one float column per metric of ``config.metrics``
        (booleans such as ``extractable`` become 0/1), sorted by unit then time.
    """
    from ..backends import TransformersBackend

    extra = {} if reference is None else {"reference": str(reference)}
    backend = TransformersBackend({int(s): str(p) for s, p in checkpoints.items()},
                                  **backend_settings(config), **extra)
    frame = backend.score(
        [np.asarray(t, dtype=np.int64) for t in token_ids],
        unit_ids=np.asarray(unit_ids, dtype=np.int64),
        metrics=list(config.metrics),
        progress=False,
    )
    for m in config.metrics:
        frame[m] = frame[m].astype(np.float64)
    frame["unit"] = frame["unit"].astype(np.int64)
    frame["time"] = frame["time"].astype(np.int64)
    return frame.sort_values(["unit", "time"], kind="stable").reset_index(drop=True)


def tracking(config, design, folder):
    """The main run scored while it trains (``track=True``): an ``on_step`` hook of
    :func:`didmem.lab.trainer.train` that observes each step's instances and scores the
    analysed and validation instances at step 0 and every checkpoint with
    :class:`didmem.track.MemorisationTracker` (the backend's settings of
    :func:`backend_settings`), and a function that returns the scores as :func:`score_run`
    does."""
    import shutil
    from pathlib import Path

    from ..track import MemorisationTracker

    analysed, validation = design.analysed_ids, design.validation_ids
    units = np.concatenate([analysed, validation]).astype(np.int64)
    settings = backend_settings(config)
    folder = Path(folder)
    if folder.exists():  # a run being redone in its own directory: start the panel afresh
        shutil.rmtree(folder)
    tracker = MemorisationTracker(
        folder, [np.asarray(t, dtype=np.int64) for t in design.tokens[units]], unit_ids=units,
        sample_ids=np.concatenate([analysed, np.full(len(validation), -1)]).astype(np.int64),
        metrics=list(config.metrics), batch_size=settings["batch_size"],
        prefix_length=settings["prefix_length"], suffix_length=settings["suffix_length"])
    checkpoints = {int(c) for c in config.checkpoints}
    frames = []

    def on_step(model, step, positions):
        if step > 0:
            tracker.observe(step, design.order[positions])
        if step in checkpoints:
            frames.append(tracker.score(model, step))

    def scores() -> pd.DataFrame:
        frame = pd.concat(frames, ignore_index=True)
        for m in config.metrics:
            frame[m] = frame[m].astype(np.float64)
        frame["unit"] = frame["unit"].astype(np.int64)
        frame["time"] = frame["time"].astype(np.int64)
        return frame.sort_values(["unit", "time"], kind="stable").reset_index(drop=True)

    return on_step, scores
