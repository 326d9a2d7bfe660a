"""The units of the outcome metrics didmem knows, for labels in figures, tables and reports."""

from __future__ import annotations

__all__ = ["OUTCOME_UNITS", "LOWER_IS_BETTER", "outcome_unit", "outcome_label"]

#: What one unit of each known metric is (the backends' metrics and the paper's columns).
OUTCOME_UNITS = {
    "mean_token_loglik": "nats per token",
    "sequence_loglik": "nats per sequence",
    "token_accuracy": "share of tokens predicted",
    "mean_token_rank": "rank of the true token",
    "entropy": "nats per token",
    "extractable": "share extractable",
    "min_k_logprob": "nats per token",
    "min_k_plus_plus": "standard deviations",
    "zlib_ratio": "nats per compressed byte",
    "reference_ratio": "nats per token",
    "sup_seq": "nats per token",
    "acc_seq": "share of tokens predicted",
    "avg_rank": "rank of the true token",
    "entr_seq": "nats per token",
}

#: The known metrics on which a lower value means the model predicts the instance better
#: (memorisation lowers them): fitted with ``lower_is_better``.
LOWER_IS_BETTER = frozenset({"mean_token_rank", "avg_rank", "sup_seq"})


def outcome_unit(outcome: str) -> str:
    """The unit of ``outcome`` ("units of y" for a column didmem does not know)."""
    return OUTCOME_UNITS.get(str(outcome), f"units of {outcome}")


def outcome_label(result) -> str:
    """``"mean_token_loglik, nats per token"`` (with "sign flipped" when lower is better)."""
    flipped = ", sign flipped" if getattr(result, "lower_is_better", False) else ""
    unit = OUTCOME_UNITS.get(str(result.outcome))
    return f"{result.outcome}" + (f", {unit}" if unit else "") + flipped
