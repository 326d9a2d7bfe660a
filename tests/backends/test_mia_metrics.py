"""Membership-inference metrics of TransformersBackend: min-k%, min-k%++ and the zlib ratio.

Checked against float64 hand computations on tiny GPT-NeoX checkpoints built in code
(``backend_helpers.build_checkpoints``), and min-k%++ against its published definition
(Zhang et al. 2024, eq. for the token score) on a hand example with dyadic probabilities.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from .backend_helpers import VOCAB

from didmem.backends import InstanceError, TransformersBackend
from didmem.backends._lm_metrics import batch_metrics, min_k_count
from didmem.errors import ParameterError

MIA = ["min_k_logprob", "min_k_plus_plus", "zlib_ratio"]


def _sequences(seed: int, lengths) -> list:
    rng = np.random.default_rng(seed)
    return [rng.integers(1, VOCAB, size=n) for n in lengths]


def hand_metrics(path, sequences, k: float) -> list:
    """Float64 full logits; every score written from its definition, token by token."""
    model = transformers.GPTNeoXForCausalLM.from_pretrained(path, attn_implementation="sdpa")
    model = model.double().eval()
    rows = []
    for tokens in sequences:
        ids = torch.as_tensor(tokens)[None, :]
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, :-1].double()
        logp = torch.log_softmax(logits, dim=-1).numpy()
        target = tokens[1:]
        true = logp[np.arange(target.size), target]
        p = np.exp(logp)
        mu = (p * logp).sum(-1)
        sigma = np.sqrt((p * logp ** 2).sum(-1) - mu ** 2)  # the brief's E[x^2] - mu^2 form
        m = max(1, math.floor(round(k * target.size, 9)))
        compressed = len(zlib.compress(np.asarray(tokens, dtype="<u4").tobytes()))
        rows.append({
            "min_k_logprob": np.sort(true)[:m].mean(),
            "min_k_plus_plus": np.sort((true - mu) / sigma)[:m].mean(),
            "zlib_ratio": true.sum() / compressed,
        })
    return rows


@pytest.mark.parametrize("k", [0.2, 0.5, 1.0])
def test_mia_metrics_match_float64_hand_computation(checkpoints, k):
    # lengths 2 (one scored token, m = 1 for every k), 7, 30, 49 (the longest allowed)
    seqs = _sequences(1, [2, 7, 30, 49, 12])
    backend = TransformersBackend(checkpoints, device="cpu", batch_size=3, dtype="float64",
                                  chunk_tokens=17, min_k=k)
    frame = backend.score(seqs, unit_ids=np.arange(5), metrics=MIA + ["mean_token_loglik"],
                          progress=False)
    for step, path in checkpoints.items():
        got = frame[frame["time"] == step].reset_index(drop=True)
        want = hand_metrics(path, seqs, k)
        for m in MIA:
            np.testing.assert_allclose(got[m], [r[m] for r in want], rtol=1e-9, err_msg=m)
        # min-k% averages the lowest tokens: never above the mean, equal to it at k = 1
        assert (got["min_k_logprob"] <= got["mean_token_loglik"] + 1e-12).all()
        if k == 1.0:
            np.testing.assert_allclose(got["min_k_logprob"], got["mean_token_loglik"],
                                       rtol=1e-12)


def test_chunked_values_equal_one_chunk(checkpoints):
    """Bounded memory: 5-position chunks (straddling sequences and padding) against one chunk
    holding every position of a batch; close, not bitwise (other matrix shapes)."""
    seqs = _sequences(2, [9, 33, 4, 21])
    frames = [
        TransformersBackend(checkpoints, device="cpu", batch_size=4, dtype="float32",
                            chunk_tokens=chunk).score(seqs, metrics=MIA, progress=False)
        for chunk in (5, 10_000)
    ]
    for m in MIA:
        np.testing.assert_allclose(frames[0][m], frames[1][m], rtol=1e-5, atol=1e-6, err_msg=m)


def _hand_batch(log2_probs, targets, k):
    """batch_metrics on logits given directly: an identity output head over 'hidden'."""
    logits = torch.tensor(log2_probs, dtype=torch.float64) * math.log(2)
    head = torch.nn.Linear(logits.shape[1], logits.shape[1], bias=False, dtype=torch.float64)
    with torch.no_grad():
        head.weight.copy_(torch.eye(logits.shape[1], dtype=torch.float64))
    return batch_metrics(logits[None], torch.tensor([targets]), torch.tensor([len(targets)]),
                         head, ("min_k_logprob", "min_k_plus_plus"), chunk_tokens=2, min_k=k)


@pytest.mark.parametrize("k, lowest", [(1.0, [0, 1, 2]), (0.5, [1]), (0.67, [1, 2])])
def test_min_k_plus_plus_published_definition_hand_example(k, lowest):
    """Zhang et al. (2024): score(x_t) = (log p(x_t | x_<t) - mu) / sigma with mu = E_{z~p}
    [log p(z)] and sigma^2 = E_{z~p}[(log p(z) - mu)^2]; the sequence score is the mean of the
    k% lowest token scores. With p = (1/2, 1/4, 1/8, 1/8), log2 p = (-1, -2, -3, -3):
    mu = -1.75 ln 2, E[(log2 p)^2] = 3.75, sigma = sqrt(3.75 - 1.75^2) ln 2 = sqrt(11/16) ln 2.
    """
    log2_probs = [[-1, -2, -3, -3], [-1, -2, -3, -3], [-2, -1, -3, -3]]
    targets = [0, 3, 1]  # log2 p of the true tokens: -1, -3, -1
    sigma = math.sqrt(11 / 16)
    token_scores = [0.75 / sigma, -1.25 / sigma, 0.75 / sigma]
    token_logp = [-math.log(2), -3 * math.log(2), -math.log(2)]
    # the lowest m = floor(k * 3) (at least 1): k = 0.67 gives floor(2.01) = 2
    order = np.argsort(token_scores, kind="stable")[: len(lowest)]
    got = _hand_batch(log2_probs, targets, k)
    np.testing.assert_allclose(got["min_k_plus_plus"], [np.mean(np.take(token_scores, order))],
                               rtol=1e-12)
    np.testing.assert_allclose(got["min_k_logprob"],
                               [np.mean(np.sort(token_logp)[: len(lowest)])], rtol=1e-12)
    assert len(lowest) == min_k_count(k, 3)


def test_min_k_count_reads_k_as_written():
    assert min_k_count(0.29, 100) == 29  # 0.29 * 100 is 28.999999999999996 in binary
    assert min_k_count(0.2, 4) == 1 and min_k_count(0.2, 10) == 2 and min_k_count(1.0, 7) == 7
    assert min_k_count(0.01, 3) == 1  # at least one token


@pytest.mark.parametrize("k", [0, -0.1, 1.5, float("nan"), True, "0.2", None])
def test_min_k_outside_unit_interval_refused(checkpoints, k):
    with pytest.raises(ParameterError, match="min_k"):
        TransformersBackend(checkpoints, min_k=k)


def test_one_token_sequence_refused_before_loading(checkpoints):
    backend = TransformersBackend(checkpoints, device="cpu")
    with pytest.raises(InstanceError, match="fewer than 2 tokens"):
        backend.score([np.array([3, 4, 5]), np.array([7])], metrics=MIA, progress=False)
    assert backend._model is None


def test_tokenizer_argument_checked_and_carried_by_spec(checkpoints):
    with pytest.raises(ParameterError, match="tokenizer"):
        TransformersBackend(checkpoints, tokenizer=3)
    backend = TransformersBackend(checkpoints, min_k=0.35, tokenizer="some/tokenizer")
    rebuilt = TransformersBackend.from_spec(backend.spec())
    assert (rebuilt.min_k, rebuilt.tokenizer_name) == (0.35, "some/tokenizer")
    assert backend.describe()["min_k"] == 0.35


def test_zlib_ratio_of_decoded_text(checkpoints, tmp_path):
    """With a tokenizer, the compressed length is that of the decoded text (UTF-8)."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {f"w{i}": i for i in range(VOCAB)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0")
    fast.save_pretrained(tmp_path / "tok")
    seqs = _sequences(3, [10, 25])
    backend = TransformersBackend(checkpoints, device="cpu", dtype="float64",
                                  tokenizer=tmp_path / "tok")
    frame = backend.score(seqs, metrics=["sequence_loglik", "zlib_ratio"], progress=False)
    decoded = [fast.decode(s.tolist()) for s in seqs]
    assert decoded[0].split() == [f"w{t}" for t in seqs[0]]
    sizes = np.array([len(zlib.compress(text.encode("utf-8"))) for text in decoded] * 3)
    np.testing.assert_allclose(frame["zlib_ratio"], frame["sequence_loglik"] / sizes,
                               rtol=1e-12)


def test_bad_tokenizer_refused_before_loading_weights(checkpoints, tmp_path):
    backend = TransformersBackend(checkpoints, device="cpu", tokenizer=tmp_path / "none")
    with pytest.raises(ParameterError, match="tokenizer"):
        backend.score(_sequences(0, [5]), metrics=["zlib_ratio"], progress=False)
    assert backend._model is None
