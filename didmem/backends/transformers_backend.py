"""Score causal-LM checkpoints with torch and transformers (imported lazily)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from .._validation import Integral, Interval, OneOf, check_all
from ..errors import ParameterError, optional_import
from ._instances import (CheckpointError, DeviceMemoryError, InstanceBatch, InstanceError,
                         Instances, check_scorable, listing, min_tokens)
from ._parts import time_label
from ._spec import BackendSpec, register_builder
from .base import OutcomeBackend, check_checkpoint_times

__all__ = ["TransformersBackend", "METRICS"]

METRICS = (
    "sequence_loglik",
    "mean_token_loglik",
    "token_accuracy",
    "mean_token_rank",
    "entropy",
    "extractable",
    "min_k_logprob",
    "min_k_plus_plus",
    "zlib_ratio",
    "reference_ratio",
)
# Config entries that must agree across checkpoints of one run.
_ARCH_KEYS = (
    "model_type",
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
)
_DTYPES = ("auto", "float32", "bfloat16", "float16", "float64")
# torch's device types that can run a model's forward pass ("meta" holds no values)
_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "hpu", "npu", "mtia", "xla", "privateuseone")
_DEVICE = re.compile(rf"(?:{'|'.join(_DEVICE_TYPES)})(?::\d+)?")


class TransformersBackend(OutcomeBackend):
    """Metrics of causal-LM checkpoints from one teacher-forced forward pass per batch.

    Parameters
    ----------
    checkpoints : mapping of number to path
        Checkpoint time (training step) to a local directory saved with
        ``save_pretrained``: safetensors weights, or ``pytorch_model.bin`` pickle weights
        (read without running code, see Notes). For hub revisions use
        :meth:`from_pretrained_revisions`.
    device : str, optional
        ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...; defaults to CUDA when available.
    batch_size : int
        Sequences per forward pass. A batch that runs out of device memory is split in halves
        (and halves of halves) for that call only; the next batch is tried at ``batch_size``
        again, and :meth:`spec` always sends ``batch_size`` to other workers. A single sequence
        that does not fit raises :class:`~didmem.backends.DeviceMemoryError`.
    dtype : {"auto", "float32", "bfloat16", "float16", "float64"}
        Weights and activations; ``"auto"`` is bf16 on CUDA and fp32 on CPU. The metrics are
        always computed from fp32 logits and accumulated in float64.
    prefix_length, suffix_length : int
        ``k`` and ``l`` of (k, l)-extractability (Carlini et al. 2023); default 32 and 32.
    eos_token_id : int or sequence of int, optional
        Tokens masked for ``extractable``; defaults to the model config's ``eos_token_id``.
    chunk_tokens : int, optional
        Positions whose fp32 logits exist at once; defaults to about 256 MiB of logits.
    weights_cache : path, optional
        A directory where local pickle checkpoints are converted once to safetensors, so
        that later runs load them memory-mapped; by default they are read from the pickle
        each time.
    min_k : float
        The share ``k`` in (0, 1] of lowest-scoring tokens averaged by ``min_k_logprob`` and
        ``min_k_plus_plus``; default 0.2.
    tokenizer : str or path, optional
        A tokenizer (local directory or hub id, loaded with ``AutoTokenizer``, no remote
        code) that decodes each sequence for ``zlib_ratio``; without one the token ids
        themselves are compressed (see Notes).
    reference : path, (hub name, revision) or mapping of number to either, optional
        The reference model of ``reference_ratio``: one checkpoint (a directory or a hub
        revision: another revision of the same run, a smaller model of the same tokenizer,
        a model trained on other data) used at every checkpoint, or a mapping from each
        checkpoint time to its own reference (such as the lab's twin run, step by step).
        It must share the scored model's tokenizer (see Notes).

    Notes
    -----
    The first token of each sequence is not scored; with ``n`` tokens there are ``n - 1``
    scored positions ``t = 1 .. n-1``, and :math:`\\log p_t = \\log p(x_t \\mid x_{<t})`.

    - ``sequence_loglik``: :math:`\\sum_t \\log p_t`; ``mean_token_loglik``: its mean.
    - ``token_accuracy``: the share of positions whose argmax is :math:`x_t`.
    - ``mean_token_rank``: mean number of tokens with a strictly larger logit than the true
      one (0 when the true token is the argmax); lower is better.
    - ``entropy``: mean entropy (nats) of the predictive distributions; not oriented.
    - ``extractable``: (k, l)-extractability, true iff with the EOS logit masked the argmax
      equals the true token at each of the ``l`` positions after a ``k``-token prefix, which
      is exactly when greedy decoding from the prefix with a minimum length reproduces them.
      Every sequence needs at least ``k + l`` tokens.
    - ``min_k_logprob`` (Min-K%, Shi et al. 2024): the mean of the ``m = max(1, floor(k n'))``
      lowest :math:`\\log p_t` of the :math:`n' = n - 1` scored positions (``k`` is
      ``min_k``, read as the decimal it is written as).
    - ``min_k_plus_plus`` (Min-K%++, Zhang et al. 2024): the same mean over
      :math:`(\\log p_t - \\mu_t) / \\sigma_t`, where :math:`\\mu_t = \\sum_v p_v \\log p_v` and
      :math:`\\sigma_t^2 = \\sum_v p_v (\\log p_v - \\mu_t)^2` are the mean and variance of the
      log-probability under the model's own next-token distribution :math:`p` at position
      ``t``. A position whose distribution is one-hot in floating point (:math:`\\sigma_t = 0`)
      gives an infinite or NaN score.
    - ``zlib_ratio`` (Carlini et al. 2021): ``sequence_loglik`` divided by the length in bytes
      of ``zlib.compress`` (level 6) of the sequence: of its text decoded by ``tokenizer``
      (UTF-8) when one is given, otherwise of its ``n`` token ids written as little-endian
      unsigned 32-bit integers (4 bytes a token). The two choices give different values: a
      panel holds one of them (:meth:`describe` names the tokenizer).
    - ``reference_ratio`` (the reference-model attack, Carlini et al. 2021; Mireshghallah
      et al. 2022): the log of the per-token likelihood ratio of the scored model to the
      ``reference`` model, :math:`\\frac{1}{n'} \\sum_t (\\log p_t - \\log p^{ref}_t)`, that is
      ``mean_token_loglik`` of the checkpoint minus that of its reference on the same
      batch. Both forward passes run batch by batch, so the reference adds one model's
      weights and one batch's hidden states. One reference for every checkpoint scores each
      instance once, at the first checkpoint, and its values are kept (about 150 bytes an
      instance, see :meth:`reference_scores`): later checkpoints run no reference pass. The two
      models must read the same token ids: their configs must agree on ``vocab_size`` and,
      where both are local directories with a ``tokenizer.json`` (or ``vocab.json``), on
      its vocabulary; otherwise a :class:`~didmem.backends.CheckpointError` names both.
      Hub revisions are compared by ``vocab_size`` only.

    Every metric is oriented so that higher means the model predicts the instance better,
    except ``mean_token_rank`` (lower is better) and ``entropy``. Every metric needs at least
    two tokens per sequence (one scored position); a shorter sequence is refused with an
    :class:`~didmem.backends.InstanceError` before any weight loads.

    Weights load with ``trust_remote_code=False`` and SDPA attention. Safetensors weights
    are preferred; pickle weights (``pytorch_model.bin``, or its shards with
    ``pytorch_model.bin.index.json``: the format of Pythia's revisions as first uploaded) are
    read only through torch's restricted unpickler (``weights_only=True``), which rebuilds
    tensors and refuses any other callable. Before any weight is read, every local weight
    file is checked (:meth:`check_weights`): a pickle's pickle is read by stand-ins that
    call nothing, every tensor must lie inside its own storage record, records must be stored
    uncompressed inside the file, sizes, strides and offsets must be possible, a safetensors
    header must be bounded JSON whose spans are exactly its tensors' bytes, and every shape
    must be the one the config gives; a file that breaks any of these (or would run code) is
    refused with a :class:`~didmem.backends.CheckpointError` naming the file, the record and
    the reason, and nothing in it runs (pickles in torch's legacy format, before torch 1.6,
    too: their records are found by walking their headers).

    **When values are bitwise equal.** A work item is scored in batches of ``batch_size``
    instances from its first instance, each right-padded to its longest sequence. The matrix
    kernels choose their summation order from the batch's shape, the number of CPU threads,
    the CPU's instruction set and the GPU model, so an instance scored in a batch of another
    shape can differ in the last bits. Values are bitwise equal when every instance is scored
    in the same batch, in a process with the same device, dtype, library versions and CPU
    threads (a resumed run against an uninterrupted one with the same ``shard_size``; the
    Ray and local runners on the same work items with the same threads). Otherwise (another
    ``shard_size`` that is not a multiple of ``batch_size``, another ``batch_size``, an
    out-of-memory split, other threads or hardware) float32 values of ``sequence_loglik`` and
    ``mean_token_loglik`` agree to about 1e-6 relative, while bf16, which rounds every
    product to 8 significant bits, moves them by about 1e-5 to 1e-3 relative; the discrete
    metrics can flip only where two logits tie within that noise. See the section on values
    in ``docs/ray.rst`` for the measurements.

    Examples
    --------
    >>> backend = TransformersBackend({0: "ckpt/step0", 1000: "ckpt/step1000"},
    ...                               device="cpu", batch_size=4)  # doctest: +SKIP
    >>> frame = backend.score(token_ids, unit_ids=ids,
    ...                       metrics=["mean_token_loglik", "extractable"])  # doctest: +SKIP
    """

    default_metrics = ("sequence_loglik", "mean_token_loglik", "token_accuracy", "mean_token_rank")
    metric_names = METRICS
    _constraints = {
        "batch_size": Integral(1),
        "dtype": OneOf(*_DTYPES),
        "prefix_length": Integral(1),
        "suffix_length": Integral(1),
        "chunk_tokens": Integral(1, allow_none=True),
        "min_k": Interval(0, 1, closed="right"),
    }
    #: The one metric the reference model is asked for; ``reference_ratio`` is the scored
    #: model's value minus the reference's.
    _REFERENCE_METRIC = "mean_token_loglik"

    def __init__(
        self,
        checkpoints,
        *,
        device: str | None = None,
        batch_size: int = 8,
        dtype: str = "auto",
        prefix_length: int = 32,
        suffix_length: int = 32,
        eos_token_id=None,
        chunk_tokens: int | None = None,
        weights_cache=None,
        min_k: float = 0.2,
        tokenizer=None,
        reference=None,
    ) -> None:
        if not hasattr(checkpoints, "items"):
            raise ParameterError(
                "The 'checkpoints' parameter of TransformersBackend must be a mapping of "
                f"checkpoint time to directory, such as {{1000: 'ckpt/step1000'}}. Got "
                f"{type(checkpoints).__name__}."
            )
        sources = {}
        for time, src in checkpoints.items():
            if isinstance(src, (tuple, list)) and len(src) == 2 and all(
                isinstance(part, str) for part in src
            ):
                name, revision = src
            elif isinstance(src, (str, os.PathLike)):
                name, revision = os.fspath(src), None
            else:
                raise ParameterError(
                    "The 'checkpoints' parameter of TransformersBackend maps each training step "
                    "to a directory (a path) or to a (hub name, revision) pair of strings; step "
                    f"{time!r} has {type(src).__name__} {src!r}."
                )
            sources[time] = (str(name), revision)
        self._checkpoints = check_checkpoint_times(sources, "TransformersBackend")
        self._sources = {t: sources[t] for t in self._checkpoints}
        check_all("TransformersBackend", {
            "batch_size": batch_size, "dtype": dtype, "prefix_length": prefix_length,
            "suffix_length": suffix_length, "chunk_tokens": chunk_tokens, "min_k": min_k,
        }, self._constraints)
        self.min_k = float(min_k)
        if tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)):
            raise ParameterError(
                "The 'tokenizer' parameter of TransformersBackend must be a tokenizer's "
                f"directory or hub id (a string or path), or None. Got {type(tokenizer).__name__}."
            )
        self.tokenizer_name = None if tokenizer is None else os.fspath(tokenizer)
        self._tokenizer = None
        self.batch_size = int(batch_size)
        self.prefix_length = int(prefix_length)
        self.suffix_length = int(suffix_length)
        self.chunk_tokens = None if chunk_tokens is None else int(chunk_tokens)
        self.dtype_name = dtype
        if weights_cache is not None and not isinstance(weights_cache, (str, os.PathLike)):
            raise ParameterError(
                "The 'weights_cache' parameter of TransformersBackend must be a directory (a "
                f"path) or None. Got {type(weights_cache).__name__}."
            )
        self.weights_cache = None if weights_cache is None else os.fspath(weights_cache)
        if device is not None and not (isinstance(device, str) and _DEVICE.fullmatch(device)):
            raise ParameterError(
                "The 'device' parameter of TransformersBackend must be a torch device such as "
                f"'cpu', 'cuda' or 'cuda:0' (a type of {list(_DEVICE_TYPES)} with an optional "
                f"':index'), or None. Got {device!r}."
            )
        self.device_name = device
        if eos_token_id is not None:
            eos_token_id = (eos_token_id,) if np.ndim(eos_token_id) == 0 else tuple(eos_token_id)
            if not eos_token_id or not all(
                isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in eos_token_id
            ):
                raise ParameterError(
                    "The 'eos_token_id' parameter of TransformersBackend must be a token id or "
                    f"a list of token ids (integers), or None. Got {eos_token_id!r}."
                )
        self._eos_override = eos_token_id
        self._config = None
        self._model = None
        self._checked_head = False
        self._reference_sources = _reference_sources(reference, self._checkpoints)
        self._reference = None
        self._reference_cache = {}

    @classmethod
    def from_pretrained_revisions(cls, name: str, steps, *, revision_format="step{}", **kwargs):
        """A backend over revisions of one hub repository, such as Pythia's ``step1000``.

        Parameters
        ----------
        name : str
            Repository id, e.g. ``"EleutherAI/pythia-160m-deduped"``.
        steps : sequence of int
            Training steps; step ``s`` is loaded from revision ``revision_format.format(s)``.
        revision_format : str
            How a step names its revision.
        **kwargs
            Passed to :class:`TransformersBackend`.
        """
        owner = "TransformersBackend.from_pretrained_revisions"
        if not isinstance(name, str):
            raise ParameterError(
                f"The 'name' parameter of {owner} must be a hub repository id (a string). Got "
                f"{type(name).__name__}."
            )
        if not isinstance(revision_format, str) or "{}" not in revision_format:
            raise ParameterError(
                f"The 'revision_format' parameter of {owner} must be a string with '{{}}' for "
                f"the step, such as 'step{{}}'. Got {revision_format!r}."
            )
        if isinstance(steps, (str, bytes, dict)) or not hasattr(steps, "__iter__"):
            raise ParameterError(
                f"The 'steps' parameter of {owner} must be a list of training steps. Got "
                f"{type(steps).__name__} {steps!r}."
            )
        steps = check_checkpoint_times(steps, owner)
        return cls({s: (name, revision_format.format(s)) for s in steps}, **kwargs)

    # ----------------------------------------------------------------- settings
    @property
    def checkpoints(self) -> tuple:
        """Checkpoint times, ascending."""
        return self._checkpoints

    @property
    def device(self):
        """The torch device that scores."""
        torch = optional_import("torch", "lm")
        if self.device_name is None:
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device_name)

    @property
    def dtype(self):
        """The torch dtype of weights and activations."""
        torch = optional_import("torch", "lm")
        if self.dtype_name == "auto":
            return torch.bfloat16 if self.device.type == "cuda" else torch.float32
        return getattr(torch, self.dtype_name)

    def checkpoint_source(self, checkpoint) -> str:
        """The directory, or ``name@revision``, of a checkpoint."""
        name, revision = self._sources[checkpoint]
        return name if revision is None else f"{name}@{revision}"

    @classmethod
    def from_spec(cls, spec: BackendSpec) -> "TransformersBackend":
        """The backend a :class:`~didmem.backends.BackendSpec` of kind ``"transformers"`` describes.

        ``spec.params`` holds either ``checkpoints`` (step -> directory, or ``[hub name,
        revision]``) or ``name`` and ``steps`` (hub revisions), plus any keyword of the
        constructor. Nothing is loaded until the first checkpoint is scored.
        """
        params = dict(spec.params)
        if "checkpoints" in params:
            if "name" in params or "steps" in params:
                raise ParameterError(
                    "A transformers backend spec takes either 'checkpoints' (local directories) "
                    "or 'name' and 'steps' (hub revisions), not both."
                )
            raw = params.pop("checkpoints")
            if not isinstance(raw, dict):
                raise ParameterError(
                    "'checkpoints' of a transformers backend spec must map training steps to "
                    f"directories, such as {{\"1000\": \"ckpt/step1000\"}}; got {type(raw).__name__}."
                )
            sources = {_step(k): tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
            return cls(sources, **params)
        if "name" in params and "steps" in params:
            name, steps = params.pop("name"), params.pop("steps")
            return cls.from_pretrained_revisions(name, steps, **params)
        raise ParameterError(
            "A transformers backend spec needs 'checkpoints' (step -> directory) or 'name' and "
            f"'steps' (hub revisions); got keys {sorted(params)}."
        )

    def spec(self):
        """The :class:`~didmem.backends.BackendSpec` that rebuilds this backend elsewhere."""
        checkpoints = {
            time_label(t): name if revision is None else [name, revision]
            for t, (name, revision) in self._sources.items()
        }
        params = {
            "checkpoints": checkpoints,
            "device": self.device_name,
            "batch_size": self.batch_size,
            "dtype": self.dtype_name,
            "prefix_length": self.prefix_length,
            "suffix_length": self.suffix_length,
            "eos_token_id": None if self._eos_override is None else list(self._eos_override),
            "chunk_tokens": self.chunk_tokens,
            "min_k": self.min_k,
            "tokenizer": self.tokenizer_name,
        }
        if self.weights_cache is not None:
            params["weights_cache"] = self.weights_cache
        if self._reference_sources is not None:
            params["reference"] = self._reference_spec()
        return BackendSpec("transformers", params)

    def _reference_spec(self):
        """The ``reference`` parameter in JSON-ready form."""
        def one(source):
            name, revision = source
            return name if revision is None else [name, revision]

        fixed = self._reference_sources.get(None)
        if fixed is not None:
            return one(fixed)
        return {time_label(t): one(src) for t, src in self._reference_sources.items()}

    def describe(self) -> dict:
        """Settings that change the scores."""
        return {
            "backend": "TransformersBackend",
            "dtype": str(self.dtype),
            "device_type": self.device.type,
            "prefix_length": self.prefix_length,
            "suffix_length": self.suffix_length,
            "eos_token_ids": list(self._eos_tokens()),
            "min_k": self.min_k,
            "tokenizer": self.tokenizer_name,
            # only when set, so that the manifests of runs without one stay as they were
            **({} if self._reference_sources is None else {"reference": self._reference_spec()}),
        }

    def load_tokenizer(self):
        """The tokenizer named by ``tokenizer`` (loaded once), or None."""
        if self.tokenizer_name is not None and self._tokenizer is None:
            transformers = optional_import("transformers", "lm")
            try:
                self._tokenizer = transformers.AutoTokenizer.from_pretrained(
                    self.tokenizer_name, trust_remote_code=False)
            except (OSError, ValueError) as exc:
                raise ParameterError(
                    f"Cannot load the tokenizer {self.tokenizer_name!r} of TransformersBackend "
                    f"(for zlib_ratio): {exc}"
                ) from None
        return self._tokenizer

    # ----------------------------------------------------------------- checks
    def _locate(self, checkpoint):
        """Check a local checkpoint directory; return its weights' format and files.

        Hub revisions return ``(None, [])``: transformers finds their files.
        """
        from ._weights import weight_files

        name, revision = self._sources[checkpoint]
        if revision is not None:
            return None, []
        path = Path(name)
        where = f"checkpoint {checkpoint} ({name!r})"
        if not path.is_dir():
            raise CheckpointError(f"The directory of {where} does not exist.")
        if not (path / "config.json").is_file():
            raise CheckpointError(f"The directory of {where} has no config.json.")
        return weight_files(path, where[0].upper() + where[1:])

    def _model_shapes(self) -> tuple:
        """The shape of every parameter of the model the configs describe, and its base-model
        prefix; built on torch's meta device, so no memory is allocated."""
        if getattr(self, "_shapes", None) is None:
            torch = optional_import("torch", "lm")
            transformers = optional_import("transformers", "lm")
            if self._config is None:
                self.configs()
            try:
                with torch.device("meta"):
                    model = transformers.AutoModelForCausalLM.from_config(
                        self._config, trust_remote_code=False)
            except (ValueError, TypeError, KeyError, RuntimeError) as exc:
                first = self._checkpoints[0]
                raise CheckpointError(
                    f"The config of checkpoint {first} ({self.checkpoint_source(first)!r}) "
                    f"does not describe a causal language model that transformers can build: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
            self._shapes = (shapes, getattr(model, "base_model_prefix", "") or "")
        return self._shapes

    def check_weights(self, checkpoint) -> tuple:
        """Check a local checkpoint's weight files against their records and the config's
        shapes, reading no weight; return their format and files (``(None, [])`` for a hub
        revision).

        Raises
        ------
        CheckpointError
            Naming the file, the record and the reason (see :mod:`._weight_records`).
        """
        from ._weight_records import check_weight_files

        fmt, files = self._locate(checkpoint)
        if fmt is not None:
            shapes, prefix = self._model_shapes()
            where = f"Checkpoint {checkpoint} ({self.checkpoint_source(checkpoint)!r})"
            check_weight_files(fmt, files, where, shapes, prefix)
        return fmt, files

    def _load_config(self, checkpoint):
        transformers = optional_import("transformers", "lm")
        self._locate(checkpoint)
        name, revision = self._sources[checkpoint]
        try:
            return transformers.AutoConfig.from_pretrained(
                name, revision=revision, trust_remote_code=False
            )
        except (OSError, ValueError) as exc:
            raise CheckpointError(
                f"Cannot read the config of checkpoint {checkpoint} "
                f"({self.checkpoint_source(checkpoint)!r}): {exc}"
            ) from exc

    def configs(self) -> dict:
        """Read every checkpoint's config and check that they agree; return them by time."""
        configs = {c: self._load_config(c) for c in self._checkpoints}
        first = self._checkpoints[0]
        reference = configs[first].to_dict()
        for c, cfg in configs.items():
            d = cfg.to_dict()
            differ = [k for k in _ARCH_KEYS if d.get(k) != reference.get(k)]
            if differ:
                diffs = "; ".join(f"{k}: {reference.get(k)!r} vs {d.get(k)!r}" for k in differ)
                raise CheckpointError(
                    f"Checkpoints {first} ({self.checkpoint_source(first)!r}) and {c} "
                    f"({self.checkpoint_source(c)!r}) disagree on {diffs}. All checkpoints of "
                    "one run must share the architecture and vocabulary."
                )
        self._config = configs[first]
        return configs

    def _eos_tokens(self) -> tuple:
        if self._eos_override is not None:
            return self._eos_override
        eos = None if self._config is None else getattr(self._config, "eos_token_id", None)
        if eos is None:
            return ()
        return (int(eos),) if np.ndim(eos) == 0 else tuple(int(e) for e in eos)

    def validate(self, instances: Instances, metrics: tuple) -> None:
        """Check metrics, configs, token ids and lengths before loading any weights."""
        unknown = [m for m in metrics if m not in METRICS]
        if unknown:
            raise ParameterError(
                f"Unknown metrics {unknown}; TransformersBackend has {list(METRICS)}."
            )
        if instances.token_ids is None:
            raise InstanceError("TransformersBackend needs token_ids; got only unit ids.")
        self.configs()
        for checkpoint in self._checkpoints:
            self.check_weights(checkpoint)
        cfg = self._config
        first = self._checkpoints[0]
        check_scorable(
            instances, min_tokens=min_tokens(metrics, self.prefix_length, self.suffix_length),
            max_positions=getattr(cfg, "max_position_embeddings", None),
            vocab_size=cfg.vocab_size,
            where=f"the model of checkpoint {first} ({self.checkpoint_source(first)!r})")
        if "zlib_ratio" in metrics:
            self.load_tokenizer()
        vocab = cfg.vocab_size
        eos = self._eos_tokens()
        if any(e < 0 or e >= vocab for e in eos):
            raise ParameterError(
                f"eos_token_id {list(eos)} is outside the vocabulary (size {vocab})."
            )
        if "reference_ratio" in metrics:
            self._check_reference(instances)

    def reference_backend(self) -> "TransformersBackend":
        """The backend that scores the reference models (built once; nothing loaded).

        Its checkpoints are the scored backend's (one reference each), or the single time
        0 for one reference used at every checkpoint; it shares device, dtype, batch size
        and ``chunk_tokens``.
        """
        if self._reference_sources is None:
            raise ParameterError(
                "The metric 'reference_ratio' needs a reference model: pass "
                "TransformersBackend(..., reference='dir/of/reference') (a directory, a "
                "(hub name, revision) pair, or one per checkpoint)."
            )
        if self._reference is None:
            fixed = self._reference_sources.get(None)
            sources = {0: fixed} if fixed is not None else dict(self._reference_sources)
            sources = {t: name if revision is None else (name, revision)
                       for t, (name, revision) in sources.items()}
            self._reference = TransformersBackend(
                sources, device=self.device_name, batch_size=self.batch_size,
                dtype=self.dtype_name, chunk_tokens=self.chunk_tokens,
                weights_cache=self.weights_cache)
        return self._reference

    def _reference_time(self, checkpoint):
        return 0 if None in self._reference_sources else checkpoint

    def _check_reference(self, instances: Instances) -> None:
        """The reference models read the same token ids as the scored model, and can score
        every instance; checked before any weight loads."""
        reference = self.reference_backend()
        reference.validate(instances, (self._REFERENCE_METRIC,))
        first = self._checkpoints[0]
        mine, theirs = self._config, reference._config
        ref_first = reference.checkpoints[0]
        names = (f"checkpoint {first} ({self.checkpoint_source(first)!r})",
                 f"the reference model ({reference.checkpoint_source(ref_first)!r})")
        if mine.vocab_size != theirs.vocab_size:
            raise CheckpointError(
                f"The reference model has another tokenizer than the scored model: "
                f"{names[0]} has vocab_size {mine.vocab_size}, {names[1]} has "
                f"{theirs.vocab_size}. reference_ratio compares the two models' "
                "probabilities of the same token ids, so they must share the tokenizer."
            )
        vocab = _vocabulary_file(self._sources[first])
        for time in reference.checkpoints:
            other = _vocabulary_file(reference._sources[time])
            if vocab is not None and other is not None and vocab != other:
                raise CheckpointError(
                    f"The reference model has another tokenizer than the scored model: the "
                    f"vocabulary of {names[0]} differs from that of the reference "
                    f"{reference.checkpoint_source(time)!r} (their tokenizer files map "
                    "tokens to other ids), although both have vocab_size "
                    f"{mine.vocab_size}. reference_ratio needs the same tokenizer."
                )

    # ----------------------------------------------------------------- scoring
    def open_checkpoint(self, checkpoint) -> None:
        """Load the checkpoint's weights onto the device."""
        from ._loading import load_model

        weights = self.check_weights(checkpoint)
        self._model = load_model(
            self._sources[checkpoint],
            self.checkpoint_source(checkpoint),
            checkpoint,
            device=self.device,
            dtype=self.dtype,
            weights=weights,
            cache=self.weights_cache,
        )
        if not self._checked_head:
            from ._loading import check_head

            check_head(self._model, self.device)
            self._checked_head = True

    def reference_scores(self, batch: InstanceBatch) -> np.ndarray:
        """``mean_token_loglik`` of each instance of ``batch`` under the reference model of
        the checkpoint being scored.

        With one reference for every checkpoint an instance's value does not depend on the
        checkpoint: it is computed once (at the first checkpoint that scores it, in that
        batch) and kept, keyed by unit and a hash of its tokens (about 150 bytes an
        instance), so the reference model is loaded and run only while new instances come.
        """
        from ._loading import forward_metrics

        name = self._REFERENCE_METRIC
        fixed = None in self._reference_sources
        keys = [(u, hash(t.tobytes())) for u, t in zip(batch.units.tolist(), batch.token_ids)]
        todo = [i for i, k in enumerate(keys) if not fixed or k not in self._reference_cache]
        values = {}
        if todo:
            self._open_reference(self._scoring)
            sub = batch if len(todo) == len(batch) else InstanceBatch(
                batch.units[todo], [batch.token_ids[i] for i in todo])
            scores = forward_metrics(self.reference_backend(), sub, (name,))[name]
            values = dict(zip((keys[i] for i in todo), scores))
            if fixed:
                self._reference_cache.update(values)
        return np.array([values[k] if k in values else self._reference_cache[k]
                         for k in keys], dtype=np.float64)

    def _open_reference(self, checkpoint) -> None:
        """Load the reference model of ``checkpoint`` unless it is the one loaded; it is
        freed with the checkpoint (:meth:`close_checkpoint`)."""
        time = self._reference_time(checkpoint)
        reference = self.reference_backend()
        if reference._model is None or getattr(self, "_reference_open", None) != time:
            reference._model = None
            reference.open_checkpoint(time)
            self._reference_open = time

    def close_checkpoint(self) -> None:
        """Free the weights (the reference model's too)."""
        self._model = None
        if self._reference is not None:
            self._reference._model = None
            self._reference_open = None
        torch = optional_import("torch", "lm")
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def score_batch(self, checkpoint, batch: InstanceBatch, metrics: tuple) -> dict:
        """Score a batch; a part that runs out of device memory is split in halves and retried.

        The smaller size holds for the rest of this batch only: :attr:`batch_size` is not
        changed, so the next batch, and a backend rebuilt from :meth:`spec`, start at it again.

        Raises
        ------
        DeviceMemoryError
            A single sequence does not fit in the device's memory.
        """
        from ._loading import forward_metrics, is_out_of_memory

        torch = optional_import("torch", "lm")
        self._scoring = checkpoint  # whose reference model reference_scores loads
        size, start, parts = len(batch), 0, []
        while start < len(batch):
            stop = min(start + size, len(batch))
            sub = batch if (start, stop) == (0, len(batch)) else InstanceBatch(
                batch.units[start:stop], batch.token_ids[start:stop])
            try:
                parts.append(forward_metrics(self, sub, metrics))
            except Exception as exc:
                if not is_out_of_memory(exc):
                    raise
                if size == 1:
                    raise DeviceMemoryError(
                        f"Out of memory on {self.device} scoring a single sequence (unit "
                        f"{sub.units[0]!r}, {sub.lengths[0]} tokens) at checkpoint {checkpoint}: "
                        "this is a memory limit of the device, not bad input. Lower "
                        "chunk_tokens, use a lower-precision dtype, free the device, or use a "
                        "device with more memory."
                    ) from exc
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                size = (size + 1) // 2
                continue
            start = stop
        if len(parts) == 1:
            return parts[0]
        return {m: np.concatenate([p[m] for p in parts]) for m in metrics}


def _one_source(src, where: str) -> tuple:
    """``(name, revision)`` of a directory or a ``(hub name, revision)`` pair."""
    if isinstance(src, (tuple, list)) and len(src) == 2 and all(isinstance(p, str) for p in src):
        return str(src[0]), src[1]
    if isinstance(src, (str, os.PathLike)):
        return os.fspath(src), None
    raise ParameterError(
        f"The 'reference' parameter of TransformersBackend {where} must be a directory (a "
        f"path) or a (hub name, revision) pair of strings. Got {type(src).__name__} {src!r}."
    )


def _reference_sources(reference, checkpoints: tuple):
    """The reference model of each checkpoint: ``None`` (no reference), ``{None: source}``
    (one model for every checkpoint) or ``{time: source}`` covering every checkpoint."""
    if reference is None:
        return None
    if not hasattr(reference, "items"):
        return {None: _one_source(reference, "")}
    sources = {_step(t): _one_source(src, f"at step {t!r}") for t, src in reference.items()}
    missing = [t for t in checkpoints if t not in sources]
    extra = [t for t in sources if t not in checkpoints]
    if missing or extra:
        raise ParameterError(
            "The 'reference' parameter of TransformersBackend, as a mapping, must give one "
            f"reference model for each checkpoint {list(checkpoints)}; "
            + (f"it lacks {missing}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"it has steps that are not checkpoints: {extra}" if extra else "") + "."
        )
    return {t: sources[t] for t in checkpoints}


def _vocabulary_file(source: tuple):
    """The vocabulary of a local directory's ``tokenizer.json`` (or ``vocab.json``) as a
    dict, or None when it has neither (or is a hub revision)."""
    import json

    name, revision = source
    if revision is not None:
        return None
    for file, path in (("tokenizer.json", ("model", "vocab")), ("vocab.json", ())):
        target = Path(name) / file
        if target.is_file():
            try:
                data = json.loads(target.read_text(encoding="utf-8"))
                for key in path:
                    data = data[key]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise CheckpointError(f"Cannot read the vocabulary of {target}: {exc}") from None
            return data
    return None


def _step(key):
    """A checkpoint step from a mapping key; JSON and TOML keys are strings."""
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        return key
    try:
        value = float(key)
    except (TypeError, ValueError):
        raise ParameterError(
            f"Checkpoint keys must be training steps (numbers); got {key!r}."
        ) from None
    return int(value) if value.is_integer() else value


register_builder("transformers", TransformersBackend.from_spec)
