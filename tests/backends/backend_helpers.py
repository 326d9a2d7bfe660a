"""Shared helpers of the backend tests: tiny random GPT-NeoX checkpoints built in code."""

from __future__ import annotations

import pytest

VOCAB = 96
MAX_POSITIONS = 48
EOS = 0


def build_checkpoints(root, n: int = 3, **overrides):
    """Save ``n`` tiny random GPTNeoXForCausalLM checkpoints under ``root``; return {step: dir}."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    settings = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=MAX_POSITIONS,
        eos_token_id=EOS,
        bos_token_id=EOS,
        initializer_range=0.3,  # peaked predictions, so accuracy and extractability vary
    )
    settings.update(overrides)
    config = transformers.GPTNeoXConfig(**settings)
    paths = {}
    for i in range(n):
        torch.manual_seed(1234 + i)
        model = transformers.GPTNeoXForCausalLM(config)
        path = root / f"step{i * 1000}"
        model.save_pretrained(path)
        paths[i * 1000] = path
    return paths
