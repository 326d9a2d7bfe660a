"""Per-sequence metrics from one teacher-forced forward pass, in bounded memory.

This module imports torch at the top; only :mod:`didmem.backends.transformers_backend`
imports it, lazily. The output head is applied to the final hidden states a chunk of
positions at a time, so that the fp32 logits of at most ``chunk_tokens`` positions exist at
once, never the batch x sequence x vocabulary tensor.
"""

from __future__ import annotations

import torch

__all__ = ["batch_metrics", "head_logits"]


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
    window_lo, window_hi = prefix_length - 1, prefix_length + suffix_length - 1
    for lo in range(0, flat_targets.numel(), chunk_tokens):
        hi = min(lo + chunk_tokens, flat_targets.numel())
        seq = seq_of[lo:hi]
        target = flat_targets[lo:hi, None]
        logits = head_logits(flat_hidden[lo:hi], head, softcap)
        true_logit = logits.gather(1, target)
        logz = torch.logsumexp(logits, dim=1, keepdim=True)
        acc["loglik"].index_add_(0, seq, (true_logit - logz).squeeze(1).double())
        if "token_accuracy" in want:
            hit = logits.argmax(dim=1) == target.squeeze(1)
            acc["correct"].index_add_(0, seq, hit.double())
        if "mean_token_rank" in want:
            rank = (logits > true_logit).sum(dim=1)
            acc["rank"].index_add_(0, seq, rank.double())
        if "entropy" in want:
            probs = torch.softmax(logits, dim=1)
            expected = torch.bmm(probs.unsqueeze(1), logits.unsqueeze(2)).reshape(-1)
            del probs
            acc["entropy"].index_add_(0, seq, (logz.squeeze(1) - expected).double())
        if "extractable" in want:
            in_window = (pos_of[lo:hi] >= window_lo) & (pos_of[lo:hi] < window_hi)
            if in_window.any():
                rows = logits[in_window]
                if eos_token_ids:
                    rows[:, list(eos_token_ids)] = float("-inf")
                hit = rows.argmax(dim=1) == target.squeeze(1)[in_window]
                acc["window_hits"].index_add_(0, seq[in_window], hit.double())
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
    return {m: out[m].cpu().numpy() for m in metrics}
