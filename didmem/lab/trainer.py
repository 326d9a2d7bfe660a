"""Single-pass training of a tiny ``GPTNeoXForCausalLM`` on CPU, deterministic for a seed.

Batch ``b`` (positions ``b*B .. (b+1)*B - 1`` of the data order) is trained at step ``b + 1``,
as in Pythia; the checkpoint ``step{N}`` has seen batches ``0 .. N-1``. The learning rate rises
linearly for ``warmup_steps`` and then follows a cosine down to ``min_lr_ratio`` of its peak.
There is no dropout and no shuffling inside the trainer, so the only randomness is the
initialisation, fixed by a seed; with ``torch.use_deterministic_algorithms(True)`` and a fixed
number of threads, a run reproduces its checkpoints bit for bit.

torch and transformers are imported inside the functions, never at module import.
"""

from __future__ import annotations

import contextlib
import copy
import math
from pathlib import Path

import numpy as np

from ..errors import optional_import

__all__ = ["learning_rate", "torch_session", "init_model", "train", "TrainState"]


def learning_rate(step: int, config) -> float:
    """Learning rate used at optimisation step ``step`` (1-based).

    Parameters
    ----------
    step : int
        Step number, ``1 .. n_steps``.
    config : LabConfig

    Returns
    -------
    float
        ``peak * step / warmup`` during warm-up, then
        ``min + (peak - min) * (1 + cos(pi * t)) / 2`` with ``t`` going from 0 to 1 over the
        remaining steps.
    """
    peak = config.learning_rate
    floor = peak * config.min_lr_ratio
    warm = config.warmup_steps
    if warm and step <= warm:
        return peak * step / warm
    span = config.n_steps - warm
    t = (step - warm) / span if span > 0 else 1.0
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * t))


@contextlib.contextmanager
def torch_session(threads: int):
    """Deterministic torch for the duration: fixed threads, deterministic algorithms.

    The previous thread count and determinism flag are restored on exit, and progress bars
    of transformers are silenced.
    """
    torch = optional_import("torch", "lm")
    tlog = optional_import("transformers.utils.logging", "lm")
    old_threads = torch.get_num_threads()
    old_det = torch.are_deterministic_algorithms_enabled()
    old_bars = tlog.is_progress_bar_enabled()
    old_verbosity = tlog.get_verbosity()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    tlog.disable_progress_bar()
    tlog.set_verbosity_error()
    try:
        yield torch
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det)
        if old_bars:
            tlog.enable_progress_bar()
        tlog.set_verbosity(old_verbosity)


def model_config(config, vocab_size: int):
    """The ``GPTNeoXConfig`` of the lab model."""
    transformers = optional_import("transformers", "lm")
    return transformers.GPTNeoXConfig(
        vocab_size=vocab_size,
        hidden_size=config.hidden_size,
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_positions,
        rotary_pct=0.25,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        use_cache=False,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )


class TrainState:
    """Model and optimiser state after some step, kept in memory to resume from.

    Parameters
    ----------
    step : int
        Steps taken.
    model : dict
        ``state_dict`` of the model (tensors cloned).
    optimizer : dict
        ``state_dict`` of the optimiser (deep copy).
    """

    def __init__(self, step: int, model: dict, optimizer: dict | None):
        self.step = step
        self.model = model
        self.optimizer = optimizer


def init_model(config, vocab_size: int, seed: int):
    """A freshly initialised model with torch's generator seeded by ``seed``.

    Call inside :func:`torch_session`.
    """
    torch = optional_import("torch", "lm")
    transformers = optional_import("transformers", "lm")
    torch.manual_seed(seed)
    model = transformers.GPTNeoXForCausalLM(model_config(config, vocab_size))
    return model


def _optimizer(model, config):
    torch = optional_import("torch", "lm")
    return torch.optim.AdamW(
        model.parameters(),
        lr=config.learning_rate,
        weight_decay=config.weight_decay,
        foreach=False,
    )


def _save(model, directory: Path) -> None:
    model.save_pretrained(directory, safe_serialization=True)


def train(
    config,
    order_tokens: np.ndarray,
    start,
    checkpoint_dir,
    save_steps,
    snapshot_steps=(),
    on_step=None,
):
    """Train on ``order_tokens`` from state ``start`` to step ``n_steps``.

    Call inside :func:`torch_session`.

    Parameters
    ----------
    config : LabConfig
    order_tokens : numpy.ndarray
        ``n_positions x seq_len`` token ids in training order.
    start : transformers model or TrainState
        A freshly initialised model (step 0) or a state to resume from.
    checkpoint_dir : path-like
        Checkpoints go to ``checkpoint_dir/step{N}/``.
    save_steps : iterable of int
        Steps whose checkpoint is saved (``0`` saves the starting model when starting at 0).
    snapshot_steps : iterable of int
        Steps after which a :class:`TrainState` is kept in memory.
    on_step : callable, optional
        ``on_step(model, step, positions)`` after the starting state (``positions`` empty)
        and after each step (the order's positions the step trained on), such as a
        :class:`didmem.track.MemorisationTracker`'s ``observe`` and ``score``.

    Returns
    -------
    dict
        ``{"checkpoints": {step: path}, "snapshots": {step: TrainState}, "losses": array}``.
    """
    torch = optional_import("torch", "lm")
    transformers = optional_import("transformers", "lm")
    B, T = config.batch_size, config.n_steps
    checkpoint_dir = Path(checkpoint_dir)
    save_steps = {int(s) for s in save_steps}
    snapshot_steps = {int(s) for s in snapshot_steps}

    if isinstance(start, TrainState):
        model = transformers.GPTNeoXForCausalLM(model_config(config, _vocab_of(start)))
        model.load_state_dict(start.model)
        optimizer = _optimizer(model, config)
        if start.optimizer is not None:
            optimizer.load_state_dict(copy.deepcopy(start.optimizer))
        step0 = start.step
    else:
        model, optimizer, step0 = start, _optimizer(start, config), 0

    checkpoints, snapshots = {}, {}

    def keep(step):
        if step in save_steps:
            path = checkpoint_dir / f"step{step}"
            _save(model, path)
            checkpoints[step] = path
        if step in snapshot_steps:
            snapshots[step] = TrainState(
                step,
                {k: v.detach().clone() for k, v in model.state_dict().items()},
                copy.deepcopy(optimizer.state_dict()),
            )

    keep(step0)
    if on_step is not None:
        on_step(model, step0, np.arange(0))
    data = torch.from_numpy(np.ascontiguousarray(order_tokens, dtype=np.int64))
    losses = np.zeros(T - step0)
    model.train()
    for step in range(step0 + 1, T + 1):
        batch = data[(step - 1) * B : step * B]
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, config)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        if config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses[step - step0 - 1] = float(loss.detach())
        keep(step)
        if on_step is not None:
            on_step(model, step, np.arange((step - 1) * B, step * B))
    model.eval()
    return {"checkpoints": checkpoints, "snapshots": snapshots, "losses": losses}


def _vocab_of(state: TrainState) -> int:
    return int(state.model["gpt_neox.embed_in.weight"].shape[0])
