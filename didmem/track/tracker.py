"""Memorisation measured while the model trains: the tracker of any PyTorch training loop."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd

from .._messages import listing
from .._validation import Integral, Interval, OneOf, check_all
from ..backends._instances import (InstanceBatch, InstanceError, Instances, check_scorable,
                                  min_tokens)
from ..backends._parts import time_label
from ..errors import ParameterError, optional_import
from ._store import TrackerFolder

__all__ = ["MemorisationTracker", "TRACK_METRICS"]

#: The metrics the tracker scores: those of :class:`~didmem.backends.TransformersBackend`
#: that need no second model.
TRACK_METRICS = ("sequence_loglik", "mean_token_loglik", "token_accuracy", "mean_token_rank",
                 "entropy", "extractable", "min_k_logprob", "min_k_plus_plus", "zlib_ratio")
_FORMAT = 1


class MemorisationTracker:
    """Score the tracked instances on the live model at evaluation steps during training.

    Parameters
    ----------
    folder : str or path-like
        Where the panel parts are written (see Notes); ``didmem estimate FOLDER`` and
        :meth:`didmem.Panel.scan` read it. A folder with a tracker state continues it (the
        instances, metrics and settings must be the same).
    token_ids : 2-D array_like of int, or sequence of 1-D array_like of int
        The tracked instances' token ids, as the model reads them.
    unit_ids : array_like, optional
        One identifier per instance (unique ints or strings); defaults to ``0 .. n-1``.
    sample_ids : array_like of int, optional
        Each instance's index in the training set, as the training loop's sampler yields it
        (what :meth:`observe` receives); a negative value marks an instance that training
        never sees (a validation instance, never treated). Defaults to ``unit_ids`` (which
        must then be integers).
    metrics : sequence of str, optional
        Which of :data:`TRACK_METRICS` to score; default ``sequence_loglik``,
        ``mean_token_loglik``, ``token_accuracy`` and ``mean_token_rank`` (those of
        :class:`~didmem.backends.TransformersBackend`).
    batch_size : int
        Sequences per forward pass.
    prefix_length, suffix_length, eos_token_id, chunk_tokens, min_k
        As for :class:`~didmem.backends.TransformersBackend`.

    Notes
    -----
    An instance whose batch is trained at optimiser step ``s`` (the ``s``-th update; see
    :meth:`observe`) is treated from the first evaluation step ``c >= s``: its cohort. The
    batches between two evaluations form one macro-batch, one cohort. Each call of
    :meth:`score` runs the same forward pass and metrics as
    :class:`~didmem.backends.TransformersBackend` (``didmem.backends._loading.model_metrics``)
    on the live model, in eval mode and without gradient, and restores each module's training
    mode afterwards; scored at the same step in batches of the same size, the values equal
    those of the saved checkpoint scored after the fact (bitwise on the same machine and
    threads; see the backend's Notes, "When values are bitwise equal").

    Each evaluation writes one panel part ``part-t{step}.parquet`` (columns ``unit``,
    ``time``, ``cohort`` and the metrics), atomically. The cohort of an instance not yet
    trained is not known, and a unit's cohort must be the same in every file; so the scores
    of such instances are held back (``_held/``, not data) and enter the panel in the part of
    the evaluation that is their cohort. The folder is always a balanced panel of the
    validation instances and the instances trained so far, over the evaluations so far;
    instances trained after the last evaluation are not in it (their cohort lies after the
    panel's last time). The tracker holds one evaluation's scores at a time and, of the
    training order, each tracked instance's first step (one integer an instance).

    With several processes (``torch.distributed`` initialised), every rank calls
    :meth:`observe` with its share of each batch and :meth:`score` at the same steps; the
    ranks' observations are gathered at each evaluation, the process of rank 0 scores and
    writes, and every rank keeps the same state.

    Only the first exposure of an instance sets its cohort; an instance trained again later
    is counted in :attr:`repeated_exposures`, not modelled.

    Examples
    --------
    >>> tracker = MemorisationTracker("runs/track", token_ids, unit_ids=ids,
    ...                               sample_ids=dataset_index)  # doctest: +SKIP
    >>> for step, (indices, batch) in enumerate(loader, start=1):  # doctest: +SKIP
    ...     train_step(model, batch)
    ...     tracker.observe(step, indices)
    ...     if step % 100 == 0:
    ...         tracker.score(model, step)
    >>> tracker.profile("mean_token_loglik").summary()  # doctest: +SKIP
    """

    default_metrics = ("sequence_loglik", "mean_token_loglik", "token_accuracy",
                       "mean_token_rank")
    _constraints = {
        "batch_size": Integral(1),
        "prefix_length": Integral(1),
        "suffix_length": Integral(1),
        "chunk_tokens": Integral(1, allow_none=True),
        "min_k": Interval(0, 1, closed="right"),
    }

    def __init__(self, folder, token_ids, *, unit_ids=None, sample_ids=None, metrics=None,
                 batch_size: int = 8, prefix_length: int = 32, suffix_length: int = 32,
                 eos_token_id=None, chunk_tokens: int | None = None, min_k: float = 0.2):
        check_all("MemorisationTracker", {
            "batch_size": batch_size, "prefix_length": prefix_length,
            "suffix_length": suffix_length, "chunk_tokens": chunk_tokens, "min_k": min_k,
        }, self._constraints)
        self.instances = Instances(token_ids, unit_ids)
        self.metrics = self._resolve_metrics(metrics)
        self.batch_size, self.chunk_tokens = int(batch_size), chunk_tokens
        self.prefix_length, self.suffix_length = int(prefix_length), int(suffix_length)
        self.min_k = float(min_k)
        if eos_token_id is not None:
            eos_token_id = (eos_token_id,) if np.ndim(eos_token_id) == 0 else tuple(eos_token_id)
        self._eos_override = None if eos_token_id is None else tuple(int(e) for e in eos_token_id)
        self.sample_ids = self._resolve_sample_ids(sample_ids)
        self._row_of_sample = {int(s): i for i, s in enumerate(self.sample_ids) if s >= 0}
        self.folder = TrackerFolder(folder)
        n = len(self.instances)
        self.first_step = np.full(n, -1, dtype=np.int64)  # first optimiser step, -1: not yet
        self.cohort = np.where(self.sample_ids < 0, np.inf, np.nan)  # nan: not known yet
        self.evaluations: list = []
        self.repeated_exposures = 0
        self._repeats_here = 0  # this process's count (all ranks' are summed at evaluations)
        self._seen_since = {}  # row -> first step, observed since the last evaluation
        self._last_observed = None
        self._checked_model = None
        state = self.folder.read_state()
        if state is not None:
            self.load_state_dict(state)
        elif self.folder.data_steps():
            raise ParameterError(
                f"The folder {str(self.folder.path)!r} holds panel parts but no tracker state "
                f"({self.folder.state_path.name}); use a new folder for a new run.")

    # ------------------------------------------------------------------ set-up
    def _resolve_metrics(self, metrics) -> tuple:
        metrics = self.default_metrics if metrics is None else metrics
        metrics = (metrics,) if isinstance(metrics, str) else tuple(metrics)
        unknown = [m for m in metrics if m not in TRACK_METRICS]
        if not metrics or unknown or len(set(metrics)) != len(metrics):
            raise ParameterError(
                "The 'metrics' parameter of MemorisationTracker must be distinct names of "
                f"{list(TRACK_METRICS)}. Got {list(metrics)}.")
        return metrics

    def _resolve_sample_ids(self, sample_ids) -> np.ndarray:
        units = self.instances.units
        if sample_ids is None:
            if units.dtype.kind not in "iu":
                raise ParameterError(
                    "MemorisationTracker needs 'sample_ids' (each instance's index in the "
                    "training set) when the unit ids are not integers.")
            sample_ids = units
        ids = np.asarray(sample_ids)
        if ids.shape != (len(units),) or ids.dtype.kind not in "iu":
            raise ParameterError(
                "The 'sample_ids' parameter of MemorisationTracker must hold one integer "
                f"training-set index per instance ({len(units)}); got shape {ids.shape}, "
                f"dtype {ids.dtype}.")
        ids = ids.astype(np.int64)
        ids = np.where(ids < 0, -1, ids)
        trained = ids[ids >= 0]
        values, counts = np.unique(trained, return_counts=True)
        if (counts > 1).any():
            dup = values[counts > 1]
            raise ParameterError(
                f"The 'sample_ids' of MemorisationTracker must be distinct; training-set "
                f"indices {listing(dup)} are given to more than one instance.")
        return ids

    def _fingerprint(self) -> dict:
        return {
            "format": _FORMAT,
            "instances": self.instances.fingerprint(),
            "sample_ids": hashlib.sha256(self.sample_ids.astype("<i8").tobytes()).hexdigest(),
            "metrics": list(self.metrics),
            "settings": {"batch_size": self.batch_size, "prefix_length": self.prefix_length,
                         "suffix_length": self.suffix_length, "min_k": self.min_k,
                         "chunk_tokens": self.chunk_tokens,
                         "eos_token_id": None if self._eos_override is None
                         else list(self._eos_override)},
        }

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """The tracker's state (JSON-ready): evaluations so far and the tracked order.

        Save it with the training loop's checkpoints; :meth:`load_state_dict` with it, on
        resuming from that checkpoint, continues the same panel. With several processes it
        gathers the ranks' observations: call it on every rank.
        """
        self._gather()
        return self._state()

    def _state(self) -> dict:
        return {
            **self._fingerprint(),
            "evaluations": [float(s) for s in self.evaluations],
            "first_step": self.first_step.tolist(),
            "repeated_exposures": int(self.repeated_exposures),
            "last_observed": self._last_observed,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from a saved state: evaluations after it are removed from the folder.

        Raises
        ------
        ParameterError
            The state belongs to other instances, metrics or settings.
        """
        mine = self._fingerprint()
        differ = [k for k in mine if state.get(k) != mine[k]]
        if differ:
            raise ParameterError(
                f"The tracker state of {str(self.folder.path)!r} was written for other "
                f"{', '.join(differ)}; use a new folder for other instances or settings.")
        self.evaluations = [int(s) if float(s).is_integer() else float(s)
                            for s in state["evaluations"]]
        self.first_step = np.asarray(state["first_step"], dtype=np.int64)
        self.repeated_exposures = int(state.get("repeated_exposures", 0))
        self._repeats_here = self.repeated_exposures if self._is_writer() else 0
        self._last_observed = state.get("last_observed")
        self._seen_since = {}
        self.cohort = np.where(self.sample_ids < 0, np.inf, np.nan)
        evals = np.asarray(self.evaluations, dtype=np.float64)
        for row in np.flatnonzero(self.first_step >= 0):
            after = evals[evals >= self.first_step[row]]
            if after.size:
                self.cohort[row] = after[0]
        if self._is_writer():
            self.folder.prune(self.evaluations)
            self.folder.write_state(self._state())

    # ------------------------------------------------------------------ the order
    def observe(self, step: int, sample_indices) -> None:
        """Record that optimiser step ``step`` trained on the examples ``sample_indices``.

        Parameters
        ----------
        step : int
            The optimiser step (the ``step``-th update; ``1`` for the first). Steps are
            observed in order, after the last evaluation.
        sample_indices : array_like of int
            The training-set indices of the examples of the step's batch (with gradient
            accumulation: of all its micro-batches; with several processes: this rank's
            share). Indices of untracked examples are ignored.
        """
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1 \
                or step > np.iinfo(np.int64).max:  # kept in an int64 array
            raise ParameterError(f"observe: the step must be a positive integer (at most "
                                 f"2**63 - 1); got {step!r}.")
        step = int(step)
        if self.evaluations and step <= self.evaluations[-1]:
            raise ParameterError(
                f"observe: step {step} is at or before the last evaluation (step "
                f"{time_label(self.evaluations[-1])}); each optimiser step is observed once, "
                "before the evaluation that follows it.")
        if self._last_observed is not None and step < self._last_observed:
            raise ParameterError(
                f"observe: steps must come in order; got step {step} after step "
                f"{self._last_observed}.")
        indices = np.asarray(sample_indices)
        if indices.ndim != 1 or (indices.size and indices.dtype.kind not in "iu"):
            raise InstanceError(
                f"observe: the sampler's indices at step {step} must be a 1-D sequence of "
                f"integers (training-set indices); got shape {indices.shape}, dtype "
                f"{indices.dtype}.")
        if indices.size and indices.min() < 0:
            raise InstanceError(
                f"observe: the sampler yielded negative indices at step {step}, e.g. "
                f"{int(indices.min())}; training-set indices are 0 or more.")
        self._last_observed = step
        for index in indices.tolist():
            row = self._row_of_sample.get(index)
            if row is None:
                continue
            if self.first_step[row] >= 0 or row in self._seen_since:
                self._repeats_here += 1
            else:
                self._seen_since[row] = step

    def _gather(self) -> None:
        """Merge the observations since the last evaluation (of every rank) into the order."""
        seen, repeats = self._seen_since, self._repeats_here
        dist = _distributed()
        if dist is not None:
            shares = [None] * dist.get_world_size()
            dist.all_gather_object(shares, (seen, repeats, self._last_observed))
            seen = {}
            for share, _, _ in shares:
                for row, step in share.items():
                    seen[row] = min(step, seen.get(row, step))
            repeats = sum(s[1] for s in shares)
            self._last_observed = max((s[2] for s in shares if s[2] is not None), default=None)
        for row, step in seen.items():
            if self.first_step[row] < 0:
                self.first_step[row] = step
        self.repeated_exposures = repeats
        self._seen_since = {}

    # ------------------------------------------------------------------ scoring
    def check_model(self, model) -> None:
        """Check that ``model`` can score every tracked instance: its context, its
        vocabulary and its output head; raised before any training is the best time."""
        from ..backends._loading import check_head

        model = unwrap(model)
        if self._checked_model is model:
            return  # the instances do not change, nor the model's context and vocabulary
        cfg = model.config
        check_scorable(self.instances,
                       min_tokens=min_tokens(self.metrics, self.prefix_length, self.suffix_length),
                       max_positions=getattr(cfg, "max_position_embeddings", None),
                       vocab_size=cfg.vocab_size, where="the tracked model",
                       noun="tracked instances")
        with _eval_mode(model):
            check_head(model, _device(model))
        self._checked_model = model

    def _eos(self, model) -> tuple:
        if self._eos_override is not None:
            return self._eos_override
        eos = getattr(model.config, "eos_token_id", None)
        if eos is None:
            return ()
        return (int(eos),) if np.ndim(eos) == 0 else tuple(int(e) for e in eos)

    def score(self, model, step) -> pd.DataFrame | None:
        """Score the tracked instances with the live ``model`` at evaluation ``step``.

        Writes the evaluation's panel part (and, on the writing rank, the state); returns
        the scores of every tracked instance at ``step`` (columns ``unit``, ``time`` and
        the metrics) on the writing rank, None on the others.

        Raises
        ------
        ParameterError
            ``step`` is not after the last evaluation (an evaluation is never repeated;
            a resumed run continues after its checkpoint's last evaluation), or is before
            an observed step.
        """
        if isinstance(step, bool) or not isinstance(step, (int, float, np.number)) or \
                not math.isfinite(step) or step < 0:
            raise ParameterError(f"score: the step must be a finite number >= 0; got {step!r}.")
        step = step.item() if isinstance(step, np.generic) else step
        if self.evaluations and step <= self.evaluations[-1]:
            where = self.folder.part(self.evaluations[-1])
            raise ParameterError(
                f"score: step {time_label(step)} is not after the last evaluation (step "
                f"{time_label(self.evaluations[-1])}, in {str(where)!r}); an evaluation is "
                "scored once.")
        self._gather()
        if self._last_observed is not None and step < self._last_observed:
            raise ParameterError(
                f"score: step {time_label(step)} is before the last observed step "
                f"{self._last_observed}; score the model after the steps it has trained.")
        newly = (self.first_step >= 0) & np.isnan(self.cohort)
        self.cohort[newly] = step
        scores = None
        if self._is_writer():
            scores = self._score_all(model, step)
            self._write(step, scores, np.flatnonzero(newly))
        self.evaluations.append(step)
        if self._is_writer():
            self.folder.write_state(self._state())
        dist = _distributed()
        if dist is not None:
            dist.barrier()
        return scores

    def _score_all(self, model, step) -> pd.DataFrame:
        from ..backends._loading import model_metrics

        self.check_model(model)
        inner = unwrap(model)
        device = _device(inner)
        eos = self._eos(inner)
        tokenizer = None
        columns = {m: [] for m in self.metrics}
        with _eval_mode(inner):
            for start in range(0, len(self.instances), self.batch_size):
                batch = self.instances.batch(start, min(start + self.batch_size,
                                                        len(self.instances)))
                values = model_metrics(
                    inner, batch, self.metrics, device=device, chunk_tokens=self.chunk_tokens,
                    eos_token_ids=eos, prefix_length=self.prefix_length,
                    suffix_length=self.suffix_length, min_k=self.min_k, tokenizer=tokenizer)
                for m in self.metrics:
                    columns[m].append(values[m])
        frame = pd.DataFrame({"unit": self.instances.units,
                              "time": np.full(len(self.instances), step)})
        for m in self.metrics:
            column = np.concatenate(columns[m])
            frame[m] = column if column.dtype == bool else column.astype(np.float64)
        return frame

    def _write(self, step, scores: pd.DataFrame, newly: np.ndarray) -> None:
        known = ~np.isnan(self.cohort)
        part = scores[known].copy()
        part.insert(2, "cohort", self.cohort[known])
        if newly.size and self.evaluations:
            earlier = self.folder.held_rows(self.evaluations, self.instances.units[newly])
            earlier.insert(2, "cohort", float(step))
            part = pd.concat([earlier, part], ignore_index=True)
        pending = scores[~known]
        if len(pending):
            self.folder.write_held(step, pending.reset_index(drop=True))
        if len(part):
            self.folder.write_part(step, part.reset_index(drop=True))

    @staticmethod
    def _is_writer() -> bool:
        dist = _distributed()
        return dist is None or dist.get_rank() == 0

    # ------------------------------------------------------------------ results
    @property
    def n_pending(self) -> int:
        """Tracked training instances whose cohort is not known yet: not trained, or trained
        after the last evaluation; they are not in the panel."""
        return int(np.isnan(self.cohort).sum())

    def panel_frame(self) -> pd.DataFrame:
        """The folder's panel as one long table (sorted by time, then unit)."""
        frames = [pd.read_parquet(self.folder.part(s)) for s in self.evaluations
                  if self.folder.part(s).exists()]
        if not frames:
            raise ParameterError(
                f"The tracker at {str(self.folder.path)!r} has no panel part yet: score at "
                "least one evaluation.")
        frame = pd.concat(frames, ignore_index=True)
        return frame.sort_values(["time", "unit"], kind="stable").reset_index(drop=True)

    def profile(self, outcome: str | None = None, **estimator_options):
        """The memorisation profile of the panel so far, as ``didmem estimate FOLDER`` fits it.

        Parameters
        ----------
        outcome : str, optional
            One of the tracked metrics; required when more than one is tracked.
        **estimator_options
            Keywords of :class:`~didmem.DiDEstimator` (``control_group``, ``n_bootstrap``,
            ``seed``, ``lower_is_better``, ...).

        Returns
        -------
        didmem.results.Result
            ``DiDEstimator(outcome=outcome, **estimator_options).fit(Panel.scan(folder))``:
            read in bounded memory and fitted from per-cohort moments.
        """
        from ..estimators.did import DiDEstimator
        from ..panel import Panel

        if outcome is None:
            if len(self.metrics) > 1:
                raise ParameterError(
                    f"The tracker scores {list(self.metrics)}; name the outcome of the "
                    "profile with outcome=...")
            outcome = self.metrics[0]
        if outcome not in self.metrics:
            raise ParameterError(
                f"Unknown outcome {outcome!r}; the tracker scores {list(self.metrics)}.")
        if not self.evaluations:
            raise ParameterError(
                f"The tracker at {str(self.folder.path)!r} has no evaluation yet: call "
                "score(model, step) first.")
        data = Panel.scan(self.folder.path, unit="unit", time="time", cohort="cohort",
                          outcome=outcome)
        return DiDEstimator(outcome=outcome, **estimator_options).fit(data)


# ---------------------------------------------------------------------- helpers
def unwrap(model):
    """The model inside wrappers such as DistributedDataParallel (``.module``)."""
    while hasattr(model, "module") and hasattr(model.module, "config"):
        model = model.module
    if not hasattr(model, "base_model") or not hasattr(model, "get_output_embeddings"):
        raise ParameterError(
            f"MemorisationTracker scores transformers causal LMs (a base model and an output "
            f"embedding); got {type(model).__name__}.")
    return model


def _device(model):
    return next(model.parameters()).device


class _eval_mode:
    """Eval mode for the duration; each module's own training flag restored on exit."""

    def __init__(self, model) -> None:
        self.model = model

    def __enter__(self):
        self.flags = [(m, m.training) for m in self.model.modules()]
        self.model.eval()
        return self.model

    def __exit__(self, *exc) -> None:
        for module, flag in self.flags:
            module.training = flag


def _distributed():
    """torch.distributed when a process group is initialised, else None."""
    try:
        torch = optional_import("torch", "lm")
    except ImportError:  # pragma: no cover - torch is there wherever a model is scored
        return None
    dist = torch.distributed
    return dist if dist.is_available() and dist.is_initialized() else None
