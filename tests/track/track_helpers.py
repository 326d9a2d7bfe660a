"""Shared helpers of the tracker tests: a tiny GPT-NeoX, its training set, a Trainer run."""

from __future__ import annotations

import numpy as np
import pytest

VOCAB = 96
MAX_POSITIONS = 48
LENGTH = 20
EOS = 0


def tiny_config():
    transformers = pytest.importorskip("transformers")
    return transformers.GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=MAX_POSITIONS, eos_token_id=EOS,
        bos_token_id=EOS, initializer_range=0.3, hidden_dropout=0.0, attention_dropout=0.0)


def tiny_model(seed: int = 0):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = tiny_config()
    config._attn_implementation = "sdpa"
    return transformers.GPTNeoXForCausalLM(config)


def sequences(n: int, seed: int) -> np.ndarray:
    """``n`` random sequences of LENGTH tokens (no EOS inside)."""
    return np.random.default_rng(seed).integers(1, VOCAB, size=(n, LENGTH), dtype=np.int64)


class TokenDataset:
    """A map-style training set of fixed sequences; each example names its index (``idx``),
    which the recording collator takes out: the tests' own record of the order."""

    def __init__(self, tokens: np.ndarray) -> None:
        self.tokens = tokens

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i):
        torch = pytest.importorskip("torch")
        ids = torch.as_tensor(self.tokens[i])
        return {"input_ids": ids, "labels": ids.clone(), "idx": int(i)}


class RecordingCollator:
    """Stacks the examples of a micro-batch and records their indices, in the order the
    Trainer fetches them (independent of the callback's reading of the sampler)."""

    def __init__(self) -> None:
        self.batches = []

    def __call__(self, features):
        torch = pytest.importorskip("torch")
        self.batches.append([f["idx"] for f in features])
        return {"input_ids": torch.stack([f["input_ids"] for f in features]),
                "labels": torch.stack([f["labels"] for f in features])}


def training_args(out, **overrides):
    transformers = pytest.importorskip("transformers")
    settings = dict(
        output_dir=str(out), per_device_train_batch_size=4, gradient_accumulation_steps=2,
        num_train_epochs=1, learning_rate=3e-3, lr_scheduler_type="constant",
        save_strategy="steps", save_steps=2, eval_strategy="no", logging_strategy="no",
        report_to=[], use_cpu=True, seed=7, data_seed=7, dataloader_drop_last=True,
        remove_unused_columns=False, disable_tqdm=True, save_only_model=False,
        dataloader_num_workers=0)
    settings.update(overrides)
    return transformers.TrainingArguments(**settings)


def cohorts_from_batches(batches, grad_accum: int, evaluations) -> dict:
    """Each trained index's cohort from the recorded micro-batches of one epoch."""
    evals = np.asarray(sorted(evaluations), dtype=float)
    out = {}
    for j, batch in enumerate(batches):
        step = j // grad_accum + 1
        later = evals[evals >= step]
        for i in batch:
            if i not in out and later.size:
                out[i] = later[0]
    return out
