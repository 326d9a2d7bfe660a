"""Training orders: which instance each suite trained on at which step, as exposures per instance.

A suite's published training order says when training saw each instance; didmem turns it
into the panel's cohorts (the first checkpoint at or after the step, and one ``cohort_k``
column per later exposure). The readers take nothing from scoring (:mod:`didmem.backends`
only scores), and each ends in the same long table of ``(unit, step)`` exposures that
:func:`exposure_cohorts` turns into cohorts:

- Pythia: the pre-shuffled Pile as a Megatron ``MMapIndexedDataset``
  (:class:`MMapIndexedDataset`), the paper's sample (:mod:`didmem.orders.pythia`), and the
  repeat search for later exposures: whole rows (:func:`find_repeats`, the deduplicated
  suite's second pass by offset, :func:`offset_repeats`) or ``k``-token windows
  (:func:`find_windows`).
- OLMo: ``global_indices.npy`` and its token memmaps (:mod:`didmem.orders.olmo`).
- Hubble: the inserted examples and their perturbation info (:mod:`didmem.orders.hubble`).
- Memorised-index lists (EleutherAI's pythia-memorized-evals) joined with an order: a binary
  panel of every training sequence x checkpoint as pattern counts (:func:`read_memorised`).
- PolyPythias and any GPT-NeoX run: the index maps of each seed (``*_doc_idx.npy``,
  ``*_sample_idx.npy``, ``*_shuffle_idx.npy``), instances by content (documents or token
  spans) found in every run (:mod:`didmem.orders.neox`: :func:`run_exposures`,
  :func:`run_cohorts`).
- Your own table of ``(unit, step)`` or positions: :func:`exposure_frame`,
  :func:`exposure_steps`, :func:`exposure_cohorts` (:mod:`didmem.orders.exposures`).

A study's ``[design]`` table (:mod:`didmem.study.designs`) calls these readers.
"""

from .._lazy import attach

_WHERE = {
    "MMapIndexedDataset": "indexed",
    "write_indexed_dataset": "indexed",
    "PythiaSample": "pythia",
    "sample_paper_design": "pythia",
    "pack_sequences": "pythia",
    "training_step": "pythia",
    "treatment_checkpoint": "pythia",
    "row_hashes": "pythia_repeats",
    "find_repeats": "pythia_repeats",
    "offset_repeats": "pythia_repeats",
    "window_hashes": "windows",
    "find_windows": "windows",
    "window_exposures": "windows",
    "read_global_indices": "olmo",
    "trained_positions": "olmo",
    "olmo_exposures": "olmo",
    "OlmoTokens": "olmo",
    "OlmoCheckpoint": "olmo",
    "parse_olmo_checkpoint": "olmo",
    "read_perturbation_info": "hubble",
    "read_inserted_examples": "hubble",
    "hubble_exposures": "hubble",
    "IndexMaps": "neox",
    "read_index_maps": "neox",
    "index_map_files": "neox",
    "build_index_maps": "neox",
    "write_index_maps": "neox",
    "sequence_spans": "neox",
    "sample_starts": "neox",
    "span_exposures": "neox",
    "run_exposures": "neox",
    "run_cohorts": "neox",
    "exposure_steps": "exposures",
    "exposure_frame": "exposures",
    "exposure_cohorts": "exposures",
    "cohort_column": "exposures",
    "read_memorised": "memorised",
    "find_memorised_lists": "memorised",
}
"""Public name -> the module of this package that defines it (imported on first use)."""

__all__ = list(_WHERE)

__getattr__, __dir__ = attach(__name__, _WHERE)
