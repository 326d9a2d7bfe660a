"""The panel: the validated long table (:class:`Panel`), its checks, a parquet folder read as
unit paths (:mod:`~didmem.panel.scan`, :mod:`~didmem.panel.scan_dense`), a binary panel as its
patterns' counts, repeated exposures and several runs."""

from .core import PYTHIA_BATCH_SIZE, PYTHIA_STEPS_PER_CHECKPOINT, Panel, cohort_from_sequence_index

__all__ = ["Panel", "cohort_from_sequence_index", "PYTHIA_BATCH_SIZE", "PYTHIA_STEPS_PER_CHECKPOINT"]
