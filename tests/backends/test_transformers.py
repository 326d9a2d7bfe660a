"""TransformersBackend against a naive float64 scorer and against greedy decoding."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from .backend_helpers import EOS, MAX_POSITIONS, VOCAB

from didmem.backends import METRICS, TransformersBackend


def _sequences(seed: int, lengths) -> list:
    rng = np.random.default_rng(seed)
    return [rng.integers(1, VOCAB, size=n) for n in lengths]


def naive_metrics(path, sequences, k: int, l: int, eos: int) -> pd.DataFrame:
    """Float64 full logits and log-softmax: the plain definition of every metric.

    SDPA, not eager attention: transformers' eager attention takes its softmax in float32.
    """
    model = transformers.GPTNeoXForCausalLM.from_pretrained(path, attn_implementation="sdpa")
    model = model.double().eval()  # every parameter and buffer, rotary frequencies included
    rows = []
    for tokens in sequences:
        ids = torch.as_tensor(tokens)[None, :]
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, :-1].double()
        target = ids[0, 1:]
        logp = torch.log_softmax(logits, dim=-1)
        true = logp[torch.arange(target.numel()), target]
        rank = (logp > true[:, None]).sum(-1).double()
        entropy = -(logp.exp() * logp).sum(-1)
        masked = logits.clone()
        masked[:, eos] = -np.inf
        window = slice(k - 1, k + l - 1)
        rows.append(
            {
                "sequence_loglik": true.sum().item(),
                "mean_token_loglik": true.mean().item(),
                "token_accuracy": (logits.argmax(-1) == target).double().mean().item(),
                "mean_token_rank": rank.mean().item(),
                "entropy": entropy.mean().item(),
                "extractable": bool((masked[window].argmax(-1) == target[window]).all()),
            }
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-10), ("float32", 2e-5)])
def test_metrics_match_naive_float64(checkpoints, dtype, rtol):
    seqs = _sequences(0, [12, 30, 9, 48, 49, 20, 17])
    k, l = 3, 4
    backend = TransformersBackend(
        checkpoints,
        device="cpu",
        batch_size=3,
        dtype=dtype,
        prefix_length=k,
        suffix_length=l,
        chunk_tokens=17,  # chunks that straddle sequences and padding
        reference=checkpoints[0],  # for reference_ratio (test_reference_ratio.py)
    )
    frame = backend.score(seqs, unit_ids=np.arange(100, 107), metrics=list(METRICS), progress=False)
    assert list(frame.columns) == ["unit", "time", *METRICS]
    assert frame["time"].tolist() == [t for t in (0, 1000, 2000) for _ in seqs]
    for step, path in checkpoints.items():
        got = frame[frame["time"] == step].reset_index(drop=True)
        want = naive_metrics(path, seqs, k, l, EOS)
        assert got["unit"].tolist() == list(range(100, 107))
        for m in want.columns.drop("extractable"):  # the MIA metrics: test_mia_metrics.py
            np.testing.assert_allclose(got[m], want[m], rtol=rtol, atol=rtol, err_msg=m)
        assert got["extractable"].tolist() == want["extractable"].tolist()
    assert frame["token_accuracy"].between(0, 1).all() and frame["token_accuracy"].max() > 0


def test_rank_and_accuracy_on_a_greedy_sequence(checkpoints):
    """After its first two tokens, a greedily decoded sequence has rank 0 and accuracy 1."""
    model = transformers.GPTNeoXForCausalLM.from_pretrained(checkpoints[0]).eval()
    ids = torch.tensor([[5, 17]])
    for _ in range(10):
        nxt = model(input_ids=ids).logits[0, -1].argmax()
        ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
    backend = TransformersBackend({0: checkpoints[0]}, device="cpu")
    frame = backend.score(
        ids.numpy(), metrics=["mean_token_rank", "token_accuracy"], progress=False
    )
    # every position after the first is the argmax by construction; the first scored
    # position (predicting 17 from 5) need not be
    logits = model(input_ids=ids).logits[0, 0]
    first_rank = int((logits > logits[17]).sum())
    assert frame["mean_token_rank"].iloc[0] == pytest.approx(first_rank / 11)
    assert frame["token_accuracy"].iloc[0] == pytest.approx((10 + (first_rank == 0)) / 11)


def _greedy(model, prefix, l, eos):
    ids = torch.as_tensor(prefix)[None, :]
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=l,
        min_new_tokens=l,
        eos_token_id=eos,
        pad_token_id=eos,
    )
    return out[0, ids.shape[1] :].numpy()


def test_extractable_matches_greedy_generation(checkpoints):
    k, l = 4, 6
    path = checkpoints[1000]
    model = transformers.GPTNeoXForCausalLM.from_pretrained(path).eval()
    rng = np.random.default_rng(3)
    seqs, expected = [], []
    for i in range(12):
        prefix = rng.integers(1, VOCAB, size=k)
        cont = _greedy(model, prefix, l, EOS)
        if i % 3 == 1:  # break one continuation token
            j = rng.integers(l)
            cont = cont.copy()
            cont[j] = (cont[j] + 1 + rng.integers(VOCAB - 2)) % VOCAB
        tail = rng.integers(0, VOCAB, size=i % 4)  # tokens after the window do not matter
        seqs.append(np.concatenate([prefix, cont, tail]))
        expected.append(bool(np.array_equal(_greedy(model, prefix, l, EOS), cont)))
    backend = TransformersBackend(
        {1000: path}, device="cpu", batch_size=5, prefix_length=k, suffix_length=l
    )
    got = backend.score(seqs, metrics=["extractable"], progress=False)["extractable"].tolist()
    assert got == expected
    assert 0 < sum(expected) < len(expected)


def test_extractable_masks_eos_like_min_length_decoding(checkpoints):
    k, l = 3, 4
    path = checkpoints[0]
    model = transformers.GPTNeoXForCausalLM.from_pretrained(path).eval()
    prefix = np.array([7, 8, 9])
    ids = torch.as_tensor(prefix)[None, :]
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=l,
        eos_token_id=None,
        pad_token_id=EOS,
    )
    free = out[0, k:].numpy()
    eos = int(free[1])  # pretend the second greedy token is the end-of-sequence token
    seq = np.concatenate([prefix, free])
    unmasked = TransformersBackend(
        {0: path},
        device="cpu",
        prefix_length=k,
        suffix_length=l,
        eos_token_id=VOCAB - 1 if eos != VOCAB - 1 else 1,
    )
    masked = TransformersBackend(
        {0: path}, device="cpu", prefix_length=k, suffix_length=l, eos_token_id=eos
    )
    assert unmasked.score([seq], metrics=["extractable"], progress=False)["extractable"].item()
    assert not masked.score([seq], metrics=["extractable"], progress=False)["extractable"].item()
    assert not np.array_equal(_greedy(model, prefix, l, eos), free)


def test_max_length_sequence_and_padding_independence(checkpoints):
    """A sequence scores the same alone and padded in a batch; MAX_POSITIONS + 1 tokens fit."""
    seqs = _sequences(5, [MAX_POSITIONS + 1, 6, 25])
    backend = TransformersBackend({0: checkpoints[0]}, device="cpu", batch_size=3)
    together = backend.score(seqs, progress=False)
    alone = pd.concat(
        [backend.score([s], unit_ids=[i], progress=False) for i, s in enumerate(seqs)],
        ignore_index=True,
    )
    pd.testing.assert_frame_equal(together, alone, rtol=1e-5)


def test_oom_backoff_halves_batch(checkpoints, monkeypatch):
    from didmem.backends import _loading

    calls = []
    real = _loading.forward_metrics

    def flaky(backend, batch, metrics):
        calls.append(len(batch))
        if len(batch) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real(backend, batch, metrics)

    seqs = _sequences(1, [10] * 7)
    reference = TransformersBackend({0: checkpoints[0]}, device="cpu", batch_size=8).score(
        seqs, progress=False
    )
    monkeypatch.setattr(_loading, "forward_metrics", flaky)
    backend = TransformersBackend({0: checkpoints[0]}, device="cpu", batch_size=8)
    spec = backend.spec()
    frame = backend.score(seqs, progress=False)
    # smaller batches, other matrix shapes: the float32 tolerance of the docstring
    pd.testing.assert_frame_equal(frame, reference, rtol=1e-6)
    assert calls == [7, 4, 2, 2, 2, 1]
    # the back-off belonged to that call: the setting, the spec sent to Ray workers and the
    # next call are as before
    assert backend.batch_size == 8
    assert backend.spec() == spec and spec.params["batch_size"] == 8
    calls.clear()
    backend.score(seqs[:3], progress=False)
    assert calls == [3, 2, 1]


@pytest.mark.parametrize("error", [
    lambda: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
    lambda: RuntimeError("CUDA error: out of memory"),
])
def test_oom_on_one_sequence_is_a_memory_limit_not_bad_input(checkpoints, monkeypatch, error):
    from didmem.backends import DeviceMemoryError, InstanceError, _loading

    def no_memory(backend, batch, metrics):
        raise error()

    monkeypatch.setattr(_loading, "forward_metrics", no_memory)
    backend = TransformersBackend({0: checkpoints[0]}, device="cpu", batch_size=4)
    with pytest.raises(DeviceMemoryError, match=r"single sequence \(unit 'a', 8 tokens\) at "
                                                r"checkpoint 0: this is a memory limit") as err:
        backend.score(_sequences(1, [8, 9]), unit_ids=["a", "b"], progress=False)
    assert not isinstance(err.value, InstanceError)
    assert isinstance(err.value, MemoryError)
    assert backend.batch_size == 4


def test_loading_through_revisions_on_a_local_directory(checkpoints):
    backend = TransformersBackend.from_pretrained_revisions(str(checkpoints[0]), [0, 1])
    assert backend.checkpoint_source(1) == f"{checkpoints[0]}@step1"
    frame = backend.score(_sequences(2, [8, 9]), progress=False)
    assert frame["time"].tolist() == [0, 0, 1, 1]
    np.testing.assert_allclose(frame["sequence_loglik"][:2], frame["sequence_loglik"][2:])


@pytest.mark.gpu
def test_bf16_on_cuda_close_to_fp32(checkpoints):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    seqs = _sequences(4, [40, 49, 12])
    fp32 = TransformersBackend(checkpoints, device="cuda", dtype="float32").score(
        seqs, progress=False
    )
    bf16 = TransformersBackend(checkpoints, device="cuda").score(seqs, progress=False)
    rel = np.abs(bf16["mean_token_loglik"] / fp32["mean_token_loglik"] - 1)
    assert rel.max() < 0.02


def test_resume_after_kill_gives_identical_panel(checkpoints, tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    from didmem.backends import _loading

    seqs = _sequences(6, [9, 14, 11, 20, 8])
    kwargs = dict(unit_ids=list("abcde"), metrics=[m for m in METRICS if m not in ("extractable", "reference_ratio")], shard_size=2, progress=False)
    make = lambda: TransformersBackend(checkpoints, device="cpu", batch_size=2)
    clean = make().score(seqs, out_dir=tmp_path / "clean", **kwargs)
    pd.testing.assert_frame_equal(clean, make().score(seqs, out_dir=tmp_path / "again", **kwargs))

    real, calls = _loading.forward_metrics, []

    def killed_on_fifth(backend, batch, metrics):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt  # what a killed job's Ctrl-C or SIGINT raises
        return real(backend, batch, metrics)

    monkeypatch.setattr(_loading, "forward_metrics", killed_on_fifth)
    with pytest.raises(KeyboardInterrupt):
        make().score(seqs, out_dir=tmp_path / "run", **kwargs)
    assert len(list((tmp_path / "run").glob("part-*.parquet"))) == 4
    monkeypatch.setattr(_loading, "forward_metrics", real)
    resumed = make().score(seqs, out_dir=tmp_path / "run", **kwargs)
    pd.testing.assert_frame_equal(resumed, clean, check_exact=True)
