"""Memorisation measured while the model trains.

:class:`MemorisationTracker` scores a designed sample of instances on the live model at the
evaluation steps of any PyTorch training loop and records, as it happens, which of them each
optimiser step trained on; :class:`MemorisationCallback` does the same inside a
``transformers.Trainer``. Both write a folder of panel parts that ``didmem estimate FOLDER``
reads, and give the current profile at any step. torch and transformers are imported when a
model is scored (``pip install 'didmem[lm]'``; the callback needs ``transformers.Trainer``).
"""

from .._lazy import attach

_WHERE = {
    "MemorisationTracker": "tracker",
    "TRACK_METRICS": "tracker",
    "MemorisationCallback": "callback",
}
"""Public name -> the module of this package that defines it (imported on first use)."""

__all__ = list(_WHERE)

__getattr__, __dir__ = attach(__name__, _WHERE)
