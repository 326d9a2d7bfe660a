"""The reference-model ratio of TransformersBackend: the scored model's mean token
log-likelihood minus a reference model's, in the same pass over batches.

Checked against a float64 hand computation with full logits on tiny GPT-NeoX checkpoints
built in code (``backend_helpers.build_checkpoints``); bad references (another tokenizer, a
mapping that misses a checkpoint, none at all) get clear errors before any weight loads.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from .backend_helpers import VOCAB, build_checkpoints

from didmem.backends import CheckpointError, InstanceError, TransformersBackend
from didmem.errors import ParameterError


def _sequences(seed: int, lengths) -> list:
    rng = np.random.default_rng(seed)
    return [rng.integers(1, VOCAB, size=n) for n in lengths]


def _hand_token_logp(path, tokens) -> np.ndarray:
    """log p(x_t | x_<t), t = 1 .. n-1, from float64 full logits of the whole sequence."""
    model = transformers.GPTNeoXForCausalLM.from_pretrained(path, attn_implementation="sdpa")
    model = model.double().eval()
    with torch.no_grad():
        logits = model(input_ids=torch.as_tensor(tokens)[None, :]).logits[0, :-1].double()
    logp = torch.log_softmax(logits, dim=-1).numpy()
    return logp[np.arange(len(tokens) - 1), tokens[1:]]


def _hand_ratio(path, ref_path, tokens) -> float:
    return float(np.mean(_hand_token_logp(path, tokens) - _hand_token_logp(ref_path, tokens)))


@pytest.fixture(scope="module")
def smaller(tmp_path_factory):
    """A smaller model (one layer, hidden 16) with the same vocabulary: a reference."""
    return build_checkpoints(tmp_path_factory.mktemp("small"), n=1, hidden_size=16,
                             num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=32)[0]


def test_fixed_reference_matches_float64_hand_computation(checkpoints, smaller):
    seqs = _sequences(4, [2, 9, 30, 17])
    backend = TransformersBackend(checkpoints, device="cpu", batch_size=3, dtype="float64",
                                  chunk_tokens=7, reference=smaller)
    frame = backend.score(seqs, unit_ids=np.arange(4),
                          metrics=["reference_ratio", "sequence_loglik"], progress=False)
    for step, path in checkpoints.items():
        got = frame[frame["time"] == step].sort_values("unit")["reference_ratio"].to_numpy()
        want = [_hand_ratio(path, smaller, s) for s in seqs]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert backend._model is None and backend.reference_backend()._model is None  # freed


def test_reference_per_checkpoint_matches_hand_computation(checkpoints):
    """A mapping gives each checkpoint its own reference (as the lab's twin, step by step):
    here step 0 against step 1000, step 1000 against step 2000, step 2000 against itself."""
    steps = sorted(checkpoints)
    mapping = {s: checkpoints[steps[min(i + 1, len(steps) - 1)]] for i, s in enumerate(steps)}
    seqs = _sequences(5, [12, 5])
    backend = TransformersBackend(checkpoints, device="cpu", batch_size=2, dtype="float64",
                                  reference=mapping)
    frame = backend.score(seqs, unit_ids=np.arange(2), metrics=["reference_ratio"],
                          progress=False)
    for step in steps:
        got = frame[frame["time"] == step].sort_values("unit")["reference_ratio"].to_numpy()
        want = [_hand_ratio(checkpoints[step], mapping[step], s) for s in seqs]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    last = frame[frame["time"] == steps[-1]]["reference_ratio"]
    np.testing.assert_allclose(last, 0.0, atol=1e-12)  # a model against itself


def test_reference_ratio_is_mean_loglik_difference_with_other_metrics(checkpoints, smaller):
    """In one call with the other metrics: the ratio is the two models' mean_token_loglik
    difference (the reference's scored by a backend of its own)."""
    seqs = _sequences(6, [14, 20, 8])
    both = TransformersBackend(checkpoints, device="cpu", dtype="float64", reference=smaller)
    frame = both.score(seqs, metrics=["min_k_logprob", "reference_ratio", "mean_token_loglik"],
                       progress=False)
    ref = TransformersBackend({0: smaller}, device="cpu", dtype="float64").score(
        seqs, metrics=["mean_token_loglik"], progress=False)
    for step in checkpoints:
        part = frame[frame["time"] == step].sort_values("unit")
        np.testing.assert_allclose(
            part["reference_ratio"],
            part["mean_token_loglik"].to_numpy() - ref.sort_values("unit")[
                "mean_token_loglik"].to_numpy(), rtol=1e-12, atol=1e-12)


def test_reference_with_another_vocabulary_size_refused(checkpoints, tmp_path):
    other = build_checkpoints(tmp_path, n=1, vocab_size=VOCAB + 8)[0]
    backend = TransformersBackend(checkpoints, device="cpu", reference=other)
    with pytest.raises(CheckpointError, match="another tokenizer.*vocab_size 96.*104"):
        backend.score(_sequences(0, [6]), metrics=["reference_ratio"], progress=False)
    assert backend._model is None


def _tokenizer_file(directory, order):
    vocab = {f"w{i}": int(j) for i, j in enumerate(order)}
    (directory / "tokenizer.json").write_text(json.dumps(
        {"version": "1.0", "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "w0"}}))


def test_reference_with_same_size_but_other_vocabulary_refused(tmp_path):
    main = build_checkpoints(tmp_path / "main", n=2)
    ref = build_checkpoints(tmp_path / "ref", n=1)[0]
    _tokenizer_file(main[0], range(VOCAB))
    _tokenizer_file(ref, np.random.default_rng(0).permutation(VOCAB))
    backend = TransformersBackend(main, device="cpu", reference=ref)
    with pytest.raises(CheckpointError, match="another tokenizer.*vocabulary"):
        backend.score(_sequences(0, [6]), metrics=["reference_ratio"], progress=False)
    _tokenizer_file(ref, range(VOCAB))  # the same vocabulary: accepted
    frame = backend.score(_sequences(0, [6]), metrics=["reference_ratio"], progress=False)
    assert np.isfinite(frame["reference_ratio"]).all()


def test_reference_ratio_without_reference_refused(checkpoints):
    backend = TransformersBackend(checkpoints, device="cpu")
    with pytest.raises(ParameterError, match="reference_ratio.*needs a reference model"):
        backend.score(_sequences(0, [6]), metrics=["reference_ratio"], progress=False)


def test_reference_mapping_must_cover_every_checkpoint(checkpoints):
    first = min(checkpoints)
    with pytest.raises(ParameterError, match=r"lacks \[1000, 2000\]"):
        TransformersBackend(checkpoints, reference={first: checkpoints[first]})
    with pytest.raises(ParameterError, match="reference"):
        TransformersBackend(checkpoints, reference=3)


def test_short_sequence_refused_with_reference(checkpoints, smaller):
    backend = TransformersBackend(checkpoints, device="cpu", reference=smaller)
    with pytest.raises(InstanceError, match="fewer than 2 tokens"):
        backend.score([np.array([4, 5]), np.array([7])], metrics=["reference_ratio"],
                      progress=False)


def test_reference_carried_by_spec_and_describe(checkpoints, smaller):
    fixed = TransformersBackend(checkpoints, reference=smaller)
    assert fixed.describe()["reference"] == str(smaller)
    rebuilt = TransformersBackend.from_spec(fixed.spec())
    assert rebuilt._reference_sources == fixed._reference_sources
    hub = TransformersBackend(checkpoints, reference={s: ("org/model", f"step{s}")
                                                      for s in checkpoints})
    spec = hub.spec()
    assert spec.params["reference"]["1000"] == ["org/model", "step1000"]
    assert TransformersBackend.from_spec(spec)._reference_sources == hub._reference_sources
    assert "reference" not in TransformersBackend(checkpoints).describe()


def test_fixed_reference_runs_once_per_instance(checkpoints, smaller, monkeypatch):
    """One reference for every checkpoint: its model is loaded and run at the first
    checkpoint only; a later call with the same unit ids but other tokens is not served
    the kept values of the first."""
    backend = TransformersBackend(checkpoints, device="cpu", dtype="float64", reference=smaller)
    opened = []
    reference = backend.reference_backend()
    original = reference.open_checkpoint
    monkeypatch.setattr(reference, "open_checkpoint",
                        lambda t: (opened.append(t), original(t))[1])
    seqs = _sequences(7, [10, 13, 6])
    frame = backend.score(seqs, unit_ids=np.arange(3), metrics=["reference_ratio"],
                          progress=False)
    assert opened == [0]  # once, for three checkpoints
    other = _sequences(8, [10, 13, 6])
    again = backend.score(other, unit_ids=np.arange(3), metrics=["reference_ratio"],
                          progress=False)
    assert opened == [0, 0]  # new tokens: the reference runs again
    for step, path in checkpoints.items():
        got = again[again["time"] == step].sort_values("unit")["reference_ratio"].to_numpy()
        np.testing.assert_allclose(got, [_hand_ratio(path, smaller, s) for s in other],
                                   rtol=1e-9, atol=1e-12)
    assert not np.allclose(frame["reference_ratio"], again["reference_ratio"])
