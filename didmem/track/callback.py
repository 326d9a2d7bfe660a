"""The tracker inside ``transformers.Trainer``: a TrainerCallback (imports transformers).

:mod:`didmem.track` loads this module only when ``MemorisationCallback`` is asked for.
"""

from __future__ import annotations

import json
import os
import warnings
from collections import deque
from pathlib import Path

import numpy as np
import transformers

from .._messages import python_scalar
from ..backends._instances import InstanceError
from ..backends._parts import time_label
from ..errors import ParameterError
from .tracker import MemorisationTracker

__all__ = ["MemorisationCallback", "STATE_NAME"]

#: The file of the tracker's state inside each of the Trainer's checkpoint folders.
STATE_NAME = "didmem_tracker.json"
_EPOCH_END = None  # the recorder's mark of an exhausted epoch iterator


class MemorisationCallback(transformers.TrainerCallback):
    """Track memorisation inside a ``transformers.Trainer`` run.

    Parameters
    ----------
    tracker : MemorisationTracker
        The tracked instances and the folder; its ``sample_ids`` are indices of the
        Trainer's ``train_dataset``.
    score_at : {"evaluate_and_save", "save", "evaluate"}
        The steps at which the live model is scored: the Trainer's evaluation and save
        steps (default), or one kind of them. Save steps must be scored for
        ``resume_from_checkpoint`` to continue the panel (the state saved in a checkpoint
        is that of its evaluation).
    log_outcome : str, optional
        The metric whose last cohort's instantaneous memorisation (and band) is logged at
        each scored step from the second on; default ``mean_token_loglik`` when tracked,
        else the first metric. ``False`` logs nothing.
    log_options : dict, optional
        Keywords of :class:`~didmem.DiDEstimator` for the logged profile (default
        ``n_bootstrap=0``: analytic standard errors).
    score_at_start : bool
        Score the model before the first step (step 0), so that every cohort has a
        pre-training period; default True.
    trainer : transformers.Trainer, optional
        When given (or set with :meth:`attach`), the scalars go through ``trainer.log``,
        so they reach TensorBoard, W&B and every reporting callback; without it they are
        appended to ``state.log_history`` only.

    Notes
    -----
    The order is read from the Trainer's own data loader: at the start of training the
    object that yields its index batches (its batch sampler) is made to record each batch
    it yields, so the callback sees exactly the indices the Trainer trains on: after
    shuffling, without the batches that ``dataloader_drop_last`` drops, this process's
    share under data parallelism, and the ``gradient_accumulation_steps`` micro-batches of
    each optimiser step (fewer at an epoch's end). On resuming, the batches that the
    Trainer skips are not counted, and the tracker continues from the state saved in the
    checkpoint (:data:`STATE_NAME`): evaluations after it are removed from the folder and
    scored again. A step that is already scored is never scored twice.

    Logged scalars (step ``c``, cohort ``g = c``): ``memorisation/<outcome>/instantaneous``
    (τ(c, c) of :meth:`MemorisationTracker.profile` with ``log_options``) and
    ``.../ci_lower``, ``.../ci_upper`` (its band), ``.../n_treated``; ``.../unavailable``
    instead when the panel cannot be fitted yet (the reason is kept in
    :attr:`unavailable`), and ``.../warnings``, the number of warnings the fit raised (small
    cohorts, say), when there were any.
    """

    _score_at = ("evaluate_and_save", "save", "evaluate")

    def __init__(self, tracker, *, score_at: str = "evaluate_and_save", log_outcome=None,
                 log_options=None, score_at_start: bool = True, trainer=None) -> None:
        if not isinstance(tracker, MemorisationTracker):
            raise ParameterError(
                "The 'tracker' parameter of MemorisationCallback must be a "
                f"MemorisationTracker. Got {type(tracker).__name__}.")
        if score_at not in self._score_at:
            raise ParameterError(
                "The 'score_at' parameter of MemorisationCallback must be one of "
                f"{set(self._score_at)}. Got {score_at!r}.")
        if log_outcome is None:
            log_outcome = ("mean_token_loglik" if "mean_token_loglik" in tracker.metrics
                           else tracker.metrics[0])
        if log_outcome is not False and log_outcome not in tracker.metrics:
            raise ParameterError(
                f"The 'log_outcome' parameter of MemorisationCallback must be one of the "
                f"tracked metrics {list(tracker.metrics)} or False. Got {log_outcome!r}.")
        self.tracker = tracker
        self.score_at = score_at
        self.score_at_start = bool(score_at_start)
        self.log_outcome = log_outcome
        self.log_options = {"n_bootstrap": 0, **(log_options or {})}
        self.trainer = trainer
        self._queue = deque()
        self._skip = 0
        self.last_logs = None
        self.unavailable = None  # why the last scored step logged no estimate

    def attach(self, trainer) -> "MemorisationCallback":
        """Add this callback to ``trainer`` and log through it; returns the callback."""
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    # ------------------------------------------------------------------ the order
    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kw):
        if train_dataloader is None:
            raise ParameterError("MemorisationCallback needs the Trainer's train_dataloader.")
        self.tracker.check_model(model)
        self._check_dataset(train_dataloader)
        self._record(train_dataloader)
        self._grad_accum = int(args.gradient_accumulation_steps)
        self._queue.clear()
        self._skip = 0
        if state.global_step > 0:
            self._resume(args, state, train_dataloader)
            return
        if self.tracker.evaluations:
            raise ParameterError(
                f"The tracker folder {str(self.tracker.folder.path)!r} already holds "
                f"evaluations (up to step {time_label(self.tracker.evaluations[-1])}) and this "
                "Trainer starts from step 0: use a new folder, or resume_from_checkpoint.")
        if self.score_at_start:
            self.tracker.score(model, 0)

    def _record(self, dataloader) -> None:
        """Make the loader's index batches pass through this callback's queue."""
        from torch.utils.data import BatchSampler

        sampler = getattr(dataloader, "sampler", None)
        target = sampler if isinstance(sampler, BatchSampler) else \
            getattr(dataloader, "batch_sampler", None)
        if target is None:
            raise ParameterError(
                "MemorisationCallback reads the training order from the data loader's batch "
                "sampler; this Trainer's train_dataloader has none (an IterableDataset, or "
                "batch_size=None): use MemorisationTracker.observe in your own loop.")
        cls = type(target)
        if getattr(cls, "_didmem_recorder", False):
            target._didmem_queue = self._queue
            return
        queue = self._queue

        def __iter__(self_):
            for batch in cls.__iter__(self_):
                self_._didmem_queue.append(list(batch))
                yield batch
            self_._didmem_queue.append(_EPOCH_END)

        recorder = type(f"Recording{cls.__name__}", (cls,),
                        {"__iter__": __iter__, "_didmem_recorder": True})
        target.__class__ = recorder
        target._didmem_queue = queue

    def _check_dataset(self, dataloader) -> None:
        """Every tracked sample index lies in the training set and holds the tracked tokens."""
        dataset = getattr(dataloader, "dataset", None)
        tracker = self.tracker
        if dataset is None or not hasattr(dataset, "__len__"):
            return
        size = len(dataset)
        rows = np.flatnonzero(tracker.sample_ids >= 0)
        outside = rows[tracker.sample_ids[rows] >= size]
        if outside.size:
            raise InstanceError(
                f"{outside.size} tracked instances have sample indices outside the Trainer's "
                f"training set of {size} examples, e.g. unit "
                f"{python_scalar(tracker.instances.units[outside[0]])!r} with index "
                f"{int(tracker.sample_ids[outside[0]])}.")
        for row in rows:
            example = dataset[int(tracker.sample_ids[row])]
            tokens = example.get("input_ids") if hasattr(example, "get") else None
            if tokens is None:
                return
            tokens = np.asarray(tokens).reshape(-1)
            mine = tracker.instances.token_ids[row]
            if tokens.shape != mine.shape or not np.array_equal(tokens, mine):
                same = min(tokens.size, mine.size)
                where = np.flatnonzero(tokens[:same] != mine[:same])
                why = (f"they differ first at position {int(where[0])}" if where.size else
                       f"it has {tokens.size} tokens, the unit {mine.size}")
                raise InstanceError(
                    f"Tracked unit {python_scalar(tracker.instances.units[row])!r} has sample "
                    f"index {int(tracker.sample_ids[row])}, but the training set's example "
                    f"{int(tracker.sample_ids[row])} has other input_ids ({why}): the "
                    "sample_ids do not map the Trainer's indices to the tracked instances.")

    def _step_indices(self) -> list:
        """The sample indices of the optimiser step just taken (its micro-batches)."""
        out, taken = [], 0
        while self._queue and taken < self._grad_accum:
            batch = self._queue[0]
            if batch is _EPOCH_END:
                self._queue.popleft()
                if taken:
                    break
                continue
            self._queue.popleft()
            if self._skip:
                self._skip -= 1
                continue
            out.extend(batch)
            taken += 1
        return out

    def on_step_end(self, args, state, control, model=None, **kw):
        self.tracker.observe(state.global_step, np.asarray(self._step_indices(), dtype=np.int64))
        self._maybe_score(args, state, control, model)

    def on_epoch_end(self, args, state, control, model=None, **kw):
        self._maybe_score(args, state, control, model)

    def _maybe_score(self, args, state, control, model) -> None:
        wanted = {"evaluate_and_save": control.should_evaluate or control.should_save,
                  "save": control.should_save,
                  "evaluate": control.should_evaluate}[self.score_at]
        step = state.global_step
        if not wanted or (self.tracker.evaluations and step <= self.tracker.evaluations[-1]):
            return
        self.tracker.score(model, step)
        self._log(state, step)

    # ------------------------------------------------------------------ checkpoints
    def on_save(self, args, state, control, **kw):
        state_doc = self.tracker.state_dict()
        if not _is_main(args):
            return
        folder = Path(args.output_dir) / f"{transformers.trainer_utils.PREFIX_CHECKPOINT_DIR}-" \
                                         f"{state.global_step}"
        if folder.is_dir():
            tmp = folder / f".{STATE_NAME}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(state_doc, sort_keys=True))
            os.replace(tmp, folder / STATE_NAME)

    def _resume(self, args, state, dataloader) -> None:
        step = state.global_step
        folder = Path(args.output_dir) / f"{transformers.trainer_utils.PREFIX_CHECKPOINT_DIR}-" \
                                         f"{step}"
        path = folder / STATE_NAME
        saved = None
        if path.is_file():
            saved = json.loads(path.read_text(encoding="utf-8"))
        else:
            # killed between the Trainer's checkpoint and on_save: the folder's state is that
            # of the evaluation at this step if nothing was observed after it
            here = self.tracker.folder.read_state()
            if here and here["evaluations"] and here["evaluations"][-1] == step and \
                    here.get("last_observed") in (None, step):
                saved = here
        if saved is None:
            raise ParameterError(
                f"Resuming at step {step}, but neither the checkpoint {str(folder)!r} holds "
                f"the tracker's state ({STATE_NAME}) nor the tracker folder's last evaluation "
                "is that step; the panel cannot be continued. Score the run's checkpoints "
                "after the fact (didmem score) or start a new tracker folder.")
        self.tracker.load_state_dict(saved)
        if not args.ignore_data_skip:
            steps_in_epoch = len(dataloader)
            per_epoch = max(steps_in_epoch // self._grad_accum
                            + int(steps_in_epoch % self._grad_accum > 0), 1)
            self._skip = (step % per_epoch) * self._grad_accum

    # ------------------------------------------------------------------ logging
    def _log(self, state, step) -> None:
        if self.log_outcome is False or len(self.tracker.evaluations) < 2 or \
                not _is_rank0():
            return
        outcome = self.log_outcome
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                cells = self.tracker.profile(outcome, **self.log_options).to_frame()
                self.unavailable = None
            except ValueError as exc:  # too few units or cohorts so far: nothing to log
                cells, self.unavailable = None, str(exc)
        row = None if cells is None else cells[(cells["cohort"] == step) & (cells["time"] == step)]
        name = f"memorisation/{outcome}"
        if row is None or row.empty:
            logs = {f"{name}/unavailable": 1.0}
        else:
            r = row.iloc[0]
            logs = {f"{name}/instantaneous": float(r["estimate"]),
                    f"{name}/ci_lower": float(r["ci_lower"]),
                    f"{name}/ci_upper": float(r["ci_upper"]),
                    f"{name}/n_treated": float(r["n_treated"])}
        if caught:
            logs[f"{name}/warnings"] = float(len(caught))
        if self.trainer is not None:
            self.trainer.log(logs)
        else:
            state.log_history.append({**logs, "step": step})
        self.last_logs = logs


def _is_main(args) -> bool:
    return getattr(args, "process_index", 0) == 0


def _is_rank0() -> bool:
    from .tracker import _distributed

    dist = _distributed()
    return dist is None or dist.get_rank() == 0
