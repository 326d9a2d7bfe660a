"""Fixtures of the runner tests: two tiny checkpoints and a handful of instances."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from backend_helpers import VOCAB, build_checkpoints

METRICS = ["sequence_loglik", "mean_token_loglik", "token_accuracy", "extractable"]


@pytest.fixture(scope="session")
def two_checkpoints(tmp_path_factory):
    """Two tiny random GPT-NeoX checkpoints, at steps 0 and 1000."""
    return build_checkpoints(tmp_path_factory.mktemp("runner-ckpt"), n=2)


@pytest.fixture(scope="session")
def instances():
    """Ten sequences of 24 tokens with string unit ids."""
    rng = np.random.default_rng(7)
    tokens = rng.integers(1, VOCAB, size=(10, 24))
    return tokens, [f"seq{i:02d}" for i in range(10)]


def make_backend(paths, **kwargs):
    from didmem.backends import TransformersBackend

    return TransformersBackend(paths, device="cpu", batch_size=3, prefix_length=8,
                               suffix_length=8, **kwargs)
