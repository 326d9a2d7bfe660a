"""A picklable recipe of a backend, so that a worker process can build its own copy.

Distributed runners send work to other processes (Ray actors). A loaded model cannot and
should not travel there; a :class:`BackendSpec` can: it names the backend's kind and the
keyword arguments that rebuild it, all plain JSON values. The same spec is what a ``didmem
score`` configuration file describes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import ParameterError

__all__ = ["BackendSpec", "BACKEND_KINDS"]

BACKEND_KINDS = ("transformers",)


@dataclass(frozen=True)
class BackendSpec:
    """The kind of a backend and the keyword arguments that rebuild it.

    Parameters
    ----------
    kind : {"transformers"}
        ``"transformers"`` builds a :class:`~didmem.backends.TransformersBackend`.
    params : dict
        JSON-serialisable keyword arguments. For ``"transformers"``: either ``checkpoints``
        (a mapping of training step to a local checkpoint directory, or to a
        ``[hub name, revision]`` pair) or ``name`` and ``steps``
        (hub revisions, with an optional ``revision_format``, default ``"step{}"``), plus any
        keyword of :class:`~didmem.backends.TransformersBackend` (``batch_size``, ``dtype``,
        ``device``, ``prefix_length``, ...).

    Examples
    --------
    >>> spec = BackendSpec("transformers", {"checkpoints": {0: "ckpt/step0"}, "batch_size": 4})
    >>> spec.kind
    'transformers'
    """

    kind: str
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in BACKEND_KINDS:
            raise ParameterError(
                f"The 'kind' of a backend spec must be one of {set(BACKEND_KINDS)}. "
                f"Got {self.kind!r}."
            )
        if not isinstance(self.params, dict):
            raise ParameterError(
                f"The 'params' of a backend spec must be a dict; got {type(self.params).__name__}."
            )
        try:
            json.dumps(self.params)
        except TypeError as exc:
            raise ParameterError(
                f"The 'params' of a backend spec must be JSON values (numbers, strings, lists, "
                f"dicts): {exc}"
            ) from exc

    def build(self):
        """Build the backend this spec describes."""
        from .transformers_backend import TransformersBackend

        params = dict(self.params)
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
            return TransformersBackend(sources, **params)
        if "name" in params and "steps" in params:
            name, steps = params.pop("name"), params.pop("steps")
            return TransformersBackend.from_pretrained_revisions(name, steps, **params)
        raise ParameterError(
            "A transformers backend spec needs 'checkpoints' (step -> directory) or 'name' and "
            f"'steps' (hub revisions); got keys {sorted(params)}."
        )

    def to_dict(self) -> dict:
        """The spec as a JSON-serialisable dict (``kind`` and ``params``)."""
        return {"kind": self.kind, "params": json.loads(json.dumps(self.params))}


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
