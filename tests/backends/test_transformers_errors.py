"""Every bad input to TransformersBackend fails early with a message naming what and where."""

from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from .backend_helpers import MAX_POSITIONS, VOCAB, build_checkpoints

from didmem.backends import (
    CheckpointError,
    InstanceError,
    TransformersBackend,
)
from didmem.errors import DidmemError, ParameterError


def _score(sources, seqs, **kwargs):
    return TransformersBackend(sources, device="cpu").score(seqs, progress=False, **kwargs)


def test_sequence_longer_than_model_positions(checkpoints):
    seqs = [np.ones(10, int), np.ones(MAX_POSITIONS + 2, int)]
    with pytest.raises(
        InstanceError,
        match=r"longer than the model of checkpoint 0 .*48 positions.*units 1 .*lengths 50",
    ):
        _score(checkpoints, seqs, unit_ids=[0, 1])


def test_token_ids_outside_vocabulary(checkpoints):
    seqs = [np.ones(10, int), np.array([1, 2, VOCAB, 3])]
    with pytest.raises(
        InstanceError, match=r"vocabulary .*size 96.*unit 'b' has token 96 at position 2"
    ):
        _score(checkpoints, seqs, unit_ids=["a", "b"])
    with pytest.raises(InstanceError, match="token -1 at position 0"):
        _score(checkpoints, [np.array([-1, 2, 3])])


def test_missing_checkpoint_directory(checkpoints, tmp_path):
    missing = {**checkpoints, 3000: tmp_path / "nowhere"}
    with pytest.raises(CheckpointError, match=r"checkpoint 3000 \('.*nowhere'\) does not exist"):
        _score(missing, [np.ones(5, int)])


def test_checkpoints_that_disagree(checkpoints, tmp_path):
    other = build_checkpoints(tmp_path, n=1, vocab_size=VOCAB + 8)
    mixed = {0: checkpoints[0], 5000: other[0]}
    with pytest.raises(
        CheckpointError, match=r"Checkpoints 0 .* and 5000 .* disagree on vocab_size: 96 vs 104"
    ):
        _score(mixed, [np.ones(5, int)])


def test_missing_revision_fails_without_network(checkpoints, monkeypatch):
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # read at import; the env is too late
    backend = TransformersBackend.from_pretrained_revisions("didmem-test/no-such-model", [1000])
    with pytest.raises(
        CheckpointError, match=r"checkpoint 1000 \('didmem-test/no-such-model@step1000'\)"
    ):
        backend.score([np.ones(5, int)], progress=False)


def test_empty_and_duplicate_instances(checkpoints):
    with pytest.raises(InstanceError, match="empty"):
        _score(checkpoints, [])
    with pytest.raises(InstanceError, match=r"Duplicate unit ids: 1 ids .* e.g. 7"):
        _score(checkpoints, [np.ones(4, int)] * 3, unit_ids=[7, 8, 7])
    with pytest.raises(InstanceError, match="3 unit ids for 2 sequences"):
        _score(checkpoints, [np.ones(4, int)] * 2, unit_ids=[1, 2, 3])


def test_sequences_too_short(checkpoints):
    with pytest.raises(InstanceError, match=r"fewer than 64 tokens, e.g. units 0"):
        _score(checkpoints, [np.ones(20, int)], metrics=["extractable"])
    with pytest.raises(InstanceError, match="fewer than 2 tokens"):
        _score(checkpoints, [np.ones(1, int)])


def test_parameters(checkpoints):
    with pytest.raises(ParameterError, match="Unknown metrics \\['perplexity'\\]"):
        _score(checkpoints, [np.ones(4, int)], metrics=["perplexity"])
    with pytest.raises(ParameterError, match="'batch_size' parameter of TransformersBackend"):
        TransformersBackend(checkpoints, batch_size=0)
    with pytest.raises(ParameterError, match="'dtype' parameter"):
        TransformersBackend(checkpoints, dtype="int8")
    with pytest.raises(ParameterError, match="mapping of checkpoint time"):
        TransformersBackend(["ckpt/step0"])
    with pytest.raises(ParameterError, match="Unknown checkpoints 5"):
        TransformersBackend(checkpoints).score([np.ones(4, int)], checkpoints=[5])


def test_errors_are_value_errors_and_didmem_errors():
    assert issubclass(InstanceError, ValueError) and issubclass(InstanceError, DidmemError)
    assert issubclass(CheckpointError, ValueError) and issubclass(CheckpointError, DidmemError)


def test_missing_lm_extra_names_it(checkpoints, monkeypatch):
    from didmem.errors import MissingDependencyError

    monkeypatch.setitem(__import__("sys").modules, "transformers", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'didmem\[lm\]'"):
        _score(checkpoints, [np.ones(4, int)])
