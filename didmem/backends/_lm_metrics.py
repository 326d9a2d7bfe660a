"""Per-sequence metrics from one teacher-forced forward pass, in bounded memory.

This module imports torch at the top; only :mod:`didmem.backends.transformers_backend`
imports it, lazily. The output head is applied to the final hidden states a chunk of
positions at a time, so that the fp32 logits of at most ``chunk_tokens`` positions exist at
once, never the batch x sequence x vocabulary tensor.
"""

from __future__ import annotations

import zlib
from fractions import Fraction

import numpy as np
import torch

__all__ = ["batch_metrics", "head_logits", "compressed_lengths", "min_k_count"]

# metrics that need every scored token's value kept until the batch's chunks are done
_PER_TOKEN = ("min_k_logprob", "min_k_plus_plus")


def min_k_count(k: float, n: int) -> int:
    """How many of ``n`` token scores min-k% averages: ``max(1, floor(k * n))``.

    ``k`` is read as the decimal it is written as (``0.29`` is 29/100, not the binary float
    just below it), so that ``floor(0.29 * 100)`` is 29.
    """
    return max(1, int(Fraction(repr(float(k))) * n))


def compressed_lengths(token_ids, tokenizer=None) -> np.ndarray:
    """The zlib-compressed length in bytes (``zlib.compress`` at its default level, 6) of
    each sequence: its text decoded by ``tokenizer`` (UTF-8), or without one its token ids
    as little-endian unsigned 32-bit integers (4 bytes a token).
    """
    out = np.empty(len(token_ids), dtype=np.float64)
    for row, tokens in enumerate(token_ids):
        if tokenizer is None:
            data = np.asarray(tokens, dtype="<u4").tobytes()
        else:
            data = tokenizer.decode([int(t) for t in tokens]).encode("utf-8")
        out[row] = len(zlib.compress(data))
    return out


def _mean_of_lowest(values: torch.Tensor, seq_of: torch.Tensor, n_scored: torch.Tensor,
                    k: float) -> torch.Tensor:
    """Per sequence, the mean of its ``min_k_count(k, n)`` lowest ``values``."""
    n = n_scored.cpu().numpy()
    padded = torch.full((n.size, int(n.max())), float("inf"), dtype=values.dtype,
                        device=values.device)
    starts = torch.from_numpy(np.concatenate([[0], np.cumsum(n)[:-1]])).to(values.device)
    padded[seq_of, torch.arange(values.numel(), device=values.device) - starts[seq_of]] = values
    lowest = padded.sort(dim=1).values
    counts = torch.as_tensor([min_k_count(k, int(m)) for m in n], device=values.device)
    keep = torch.arange(lowest.shape[1], device=values.device)[None, :] < counts[:, None]
    return torch.where(keep, lowest, 0.0).sum(dim=1) / counts.double()


def head_logits(hidden: torch.Tensor, head: torch.nn.Module, softcap: float | None):
    """Logits of the output head for ``hidden`` (positions x hidden size), fp32 or wider.

    On CUDA with bf16/fp16 weights the product is accumulated and returned in fp32 without
    rounding the logits to the low-precision type.
    """
    weight = head.weight
    bias = getattr(head, "bias", None)
    logits = None
    if hidden.is_cuda and hidden.dtype in (torch.bfloat16, torch.float16):
        try:
            logits = torch.mm(hidden, weight.t(), out_dtype=torch.float32)
        except (RuntimeError, TypeError, NotImplementedError):  # older torch: no out_dtype
            logits = None
    if logits is None:
        logits = torch.nn.functional.linear(hidden, weight)
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    if bias is not None:
        logits += bias.to(logits.dtype)
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    return logits


@torch.inference_mode()
def batch_metrics(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    n_scored: torch.Tensor,
    head: torch.nn.Module,
    metrics: tuple,
    *,
    chunk_tokens: int,
    eos_token_ids: tuple = (),
    prefix_length: int = 32,
    suffix_length: int = 32,
    softcap: float | None = None,
    min_k: float = 0.2,
    zlib_bytes=None,
) -> dict:
    """Metrics of each sequence of a batch.

    Parameters
    ----------
    hidden : torch.Tensor
        Final hidden states, batch x positions x hidden size; position ``t`` predicts token
        ``t + 1`` of the sequence.
    targets : torch.Tensor
        The true next tokens, batch x positions (int64).
    n_scored : torch.Tensor
        Scored positions per sequence (its length minus one); positions past it are padding.
    head : torch.nn.Module
        The model's output embedding (a linear map to the vocabulary).
    metrics : tuple of str
        Which of :data:`didmem.backends.METRICS` to return.
    chunk_tokens : int
        Positions whose fp32 logits are materialised at once.
    eos_token_ids : tuple of int
        Tokens whose logit is masked for ``extractable``, as greedy decoding with a minimum
        length does.
    prefix_length, suffix_length : int
        ``k`` and ``l`` of (k, l)-extractability: the continuation tokens ``k .. k+l-1`` are
        predicted at positions ``k-1 .. k+l-2``.
    softcap : float, optional
        Final-logit soft-capping of the model, if any.
    min_k : float
        The share ``k`` of lowest-scoring tokens that ``min_k_logprob`` and
        ``min_k_plus_plus`` average (at least one token).
    zlib_bytes : numpy.ndarray, optional
        Compressed length of each sequence (:func:`compressed_lengths`); needed for
        ``zlib_ratio``.

    Returns
    -------
    dict of str to numpy.ndarray
        One value per sequence for each metric: float64, or bool for ``extractable``.
    """
    batch, positions = targets.shape
    device = hidden.device
    pos = torch.arange(positions, device=device)
    valid = pos[None, :] < n_scored[:, None]
    seq_of, pos_of = valid.nonzero(as_tuple=True)
    flat_hidden = hidden[seq_of, pos_of]
    flat_targets = targets[seq_of, pos_of]
    want = set(metrics)
    acc = {
        name: torch.zeros(batch, dtype=torch.float64, device=device)
        for name in ("loglik", "correct", "rank", "entropy", "window_hits")
    }
    # per-token scores of min-k% (log p) and min-k%++ (standardised log p), float64
    tokens = {
        name: torch.empty(flat_targets.numel(), dtype=torch.float64, device=device)
        for name in _PER_TOKEN if name in want
    }
    window_lo, window_hi = prefix_length - 1, prefix_length + suffix_length - 1
    for lo in range(0, flat_targets.numel(), chunk_tokens):
        hi = min(lo + chunk_tokens, flat_targets.numel())
        seq = seq_of[lo:hi]
        target = flat_targets[lo:hi, None]
        logits = head_logits(flat_hidden[lo:hi], head, softcap)
        true_logit = logits.gather(1, target)
        logz = torch.logsumexp(logits, dim=1, keepdim=True)
        true_logp = (true_logit - logz).squeeze(1)
        acc["loglik"].index_add_(0, seq, true_logp.double())
        if "min_k_logprob" in want:
            tokens["min_k_logprob"][lo:hi] = true_logp
        if "token_accuracy" in want:
            hit = logits.argmax(dim=1) == target.squeeze(1)
            acc["correct"].index_add_(0, seq, hit.double())
        if "mean_token_rank" in want:
            rank = (logits > true_logit).sum(dim=1)
            acc["rank"].index_add_(0, seq, rank.double())
        if "extractable" in want:
            in_window = (pos_of[lo:hi] >= window_lo) & (pos_of[lo:hi] < window_hi)
            if in_window.any():
                rows = logits[in_window]
                if eos_token_ids:
                    rows[:, list(eos_token_ids)] = float("-inf")
                hit = rows.argmax(dim=1) == target.squeeze(1)[in_window]
                acc["window_hits"].index_add_(0, seq[in_window], hit.double())
        if "entropy" in want or "min_k_plus_plus" in want:  # last: min-k%++ overwrites logits
            probs = torch.softmax(logits, dim=1)
            # E_p[logit]: entropy = logz - E_p[logit], and the mean log-probability under p
            # is mu = E_p[log p] = E_p[logit] - logz
            expected = torch.bmm(probs.unsqueeze(1), logits.unsqueeze(2)).reshape(-1)
            if "entropy" in want:
                acc["entropy"].index_add_(0, seq, (logz.squeeze(1) - expected).double())
            if "min_k_plus_plus" in want:
                # (log p(x_t) - mu) / sigma with sigma^2 = E_p[(log p - mu)^2], written
                # two-pass as E_p[(logit - E_p[logit])^2] (log p - mu = logit - E_p[logit]),
                # not E[(log p)^2] - mu^2; in place: no other chunk-sized tensor
                centred = logits.sub_(expected[:, None]).square_()
                var = torch.bmm(probs.unsqueeze(1), centred.unsqueeze(2)).reshape(-1)
                mu = expected.double() - logz.squeeze(1).double()
                tokens["min_k_plus_plus"][lo:hi] = (
                    (true_logp.double() - mu) / var.double().sqrt())
            del probs
        del logits
    n = n_scored.double()
    out = {
        "sequence_loglik": acc["loglik"],
        "mean_token_loglik": acc["loglik"] / n,
        "token_accuracy": acc["correct"] / n,
        "mean_token_rank": acc["rank"] / n,
        "entropy": acc["entropy"] / n,
        "extractable": acc["window_hits"] == suffix_length,
    }
    for name, values in tokens.items():
        out[name] = _mean_of_lowest(values, seq_of, n_scored, min_k)
    if "zlib_ratio" in want:
        out["zlib_ratio"] = acc["loglik"] / torch.as_tensor(zlib_bytes, device=device)
    return {m: out[m].cpu().numpy() for m in metrics}
