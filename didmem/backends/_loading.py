"""Loading checkpoints and running the forward pass (imports torch; imported lazily)."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import optional_import
from ._instances import CheckpointError, InstanceBatch
from ._lm_metrics import batch_metrics, compressed_lengths, head_logits

__all__ = ["load_model", "check_head", "forward_metrics", "model_metrics", "is_out_of_memory"]

_CHUNK_BYTES = 256 << 20


def load_model(source: tuple, label: str, checkpoint, *, device, dtype, weights=(None, []),
               cache=None):
    """Load one checkpoint: no remote code, no code from pickles, SDPA attention, eval mode.

    The caller has checked local weight files (``TransformersBackend.check_weights``: every
    tensor inside its own record, bounded sizes, the config's shapes) without reading a
    weight. Safetensors weights load memory-mapped; pickle weights are read by transformers
    with ``weights_only=True`` (memory-mapped from a zip archive); with ``cache`` they are
    converted once to safetensors there.

    Parameters
    ----------
    source : tuple of (str, str or None)
        A local directory and ``None``, or a hub repository id and a revision.
    label : str
        How errors name the checkpoint's source.
    checkpoint : int or float
        The checkpoint's time, for errors.
    device, dtype
        Where the weights go, and in which precision.
    weights : tuple of (str or None, list of path)
        A local directory's weight format and files (:func:`._weights.weight_files`);
        ``(None, [])`` for a hub revision.
    cache : path, optional
        Where a local pickle checkpoint is converted once to safetensors.
    """
    import pickle

    from ._weights import PICKLE, SAFETENSORS, cached_safetensors, refusal

    transformers = optional_import("transformers", "lm")
    name, revision = source
    fmt, files = weights
    where = f"Checkpoint {checkpoint} ({label!r})"
    if fmt == PICKLE:
        if cache is not None:
            name, fmt = str(cached_safetensors(name, files, cache, where)), SAFETENSORS
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            name,
            revision=revision,
            use_safetensors=True if fmt == SAFETENSORS else (False if fmt == PICKLE else None),
            weights_only=True,
            trust_remote_code=False,
            dtype=dtype,
            attn_implementation="sdpa",
            output_loading_info=True,
        )
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"{where}: its pickle weights are refused: {refusal(exc)}; didmem reads pickle "
            "weights only through torch's restricted unpickler (weights_only=True) and never "
            "runs their code."
        ) from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(
            f"Cannot load checkpoint {checkpoint} ({label!r}): {exc}. A missing directory or "
            "revision gives this error."
        ) from exc
    model, info = model
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        raise CheckpointError(
            f"{where}: its weights lack {len(missing)} parameter(s) of the "
            f"{type(model).__name__} its config describes, e.g. {missing[0]!r}; a model with "
            "randomly initialised parameters would be scored."
        )
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)


def _softcap(model):
    return getattr(model.config, "final_logit_softcapping", None)


@torch.inference_mode()
def check_head(model, device) -> None:
    """Check that the output head on the base model's hidden states gives the model's logits.

    The backend computes logits in chunks as ``head(base_model(x))``; a model that transforms
    its logits in another way would be scored wrongly, so it is refused.
    """
    head = model.get_output_embeddings()
    if head is None or not hasattr(head, "weight"):
        raise CheckpointError(
            f"{type(model).__name__} has no linear output embedding; TransformersBackend "
            "scores causal LMs whose logits are a linear map of the final hidden states."
        )
    vocab = head.weight.shape[0]
    ids = (torch.arange(8, device=device) * 7919 % vocab)[None, :]
    full = model(input_ids=ids, use_cache=False).logits[0].float()
    hidden = model.base_model(input_ids=ids, use_cache=False)[0][0]
    ours = head_logits(hidden, head, _softcap(model))
    precise = model.dtype in (torch.float32, torch.float64)
    tol = (1e-4 if precise else 3e-2) * (1.0 + full.abs().max().item())
    err = (full - ours).abs().max().item()
    if not err <= tol:
        raise CheckpointError(
            f"{type(model).__name__} post-processes its logits (they differ from the output "
            f"head applied to the final hidden states by up to {err:.3g}); TransformersBackend "
            "cannot score it."
        )


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is a device out-of-memory error."""
    oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    return isinstance(exc, oom) or (isinstance(exc, RuntimeError) and "out of memory" in str(exc))


@torch.inference_mode()
def forward_metrics(backend, batch: InstanceBatch, metrics: tuple) -> dict:
    """One forward pass over a right-padded batch, then the chunked metrics.

    Right padding needs no attention mask: with causal attention a real token attends only
    to earlier positions, all of which are real.
    """
    if "reference_ratio" in metrics:
        # the scored model's mean_token_loglik minus its reference's, batch by batch
        own = tuple(m for m in metrics if m != "reference_ratio")
        name = backend._REFERENCE_METRIC
        out = forward_metrics(backend, batch, own + (() if name in own else (name,)))
        out["reference_ratio"] = out[name] - backend.reference_scores(batch)
        return {m: out[m] for m in metrics}
    return model_metrics(
        backend._model, batch, metrics, device=backend.device, chunk_tokens=backend.chunk_tokens,
        eos_token_ids=backend._eos_tokens(), prefix_length=backend.prefix_length,
        suffix_length=backend.suffix_length, min_k=backend.min_k,
        tokenizer=backend.load_tokenizer() if "zlib_ratio" in metrics else None)


@torch.inference_mode()
def model_metrics(model, batch: InstanceBatch, metrics: tuple, *, device, chunk_tokens=None,
                  eos_token_ids: tuple = (), prefix_length: int = 32, suffix_length: int = 32,
                  min_k: float = 0.2, tokenizer=None) -> dict:
    """The metrics of one right-padded batch under ``model``: one forward pass of the base
    model, then the output head a chunk of positions at a time (:func:`batch_metrics`).

    The one forward-pass code of :class:`~didmem.backends.TransformersBackend` (a loaded
    checkpoint) and of :mod:`didmem.track` (the live model during training). ``model`` is a
    causal LM in eval mode; ``chunk_tokens`` defaults to about 256 MiB of fp32 logits.
    """
    lengths = batch.lengths
    padded = np.zeros((len(batch), int(lengths.max())), dtype=np.int64)
    for row, tokens in enumerate(batch.token_ids):
        padded[row, : tokens.size] = tokens
    ids = torch.from_numpy(padded).to(device)
    hidden = model.base_model(input_ids=ids[:, :-1], use_cache=False)[0]
    head = model.get_output_embeddings()
    chunk = chunk_tokens or max(1, _CHUNK_BYTES // (4 * head.weight.shape[0]))
    return batch_metrics(
        hidden,
        ids[:, 1:],
        torch.from_numpy(lengths - 1).to(device),
        head,
        metrics,
        chunk_tokens=chunk,
        eos_token_ids=tuple(eos_token_ids),
        prefix_length=prefix_length,
        suffix_length=suffix_length,
        softcap=_softcap(model),
        min_k=min_k,
        zlib_bytes=(compressed_lengths(batch.token_ids, tokenizer)
                    if "zlib_ratio" in metrics else None),
    )
