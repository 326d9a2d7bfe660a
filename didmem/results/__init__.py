"""Results: immutable fitted results, their aggregations, saving and loading, profiles.

The modules, from the leaf up: :mod:`.common` (scalar estimates, the pre-test, intervals,
the profile matrix), :mod:`.aggregations` (aggregation weights and
:class:`AggregateResult`), :mod:`.saving` (results files and :class:`SavedResult`),
:mod:`.cells` (:class:`GroupTimeResult`, :class:`CellResult`), and beside them the analyses
that take results: :mod:`.profiles` and :mod:`.comparison`. A fitted result holds its
inference object (:class:`didmem.inference.cell_inference.CellInference`) and never
recomputes it.

Each name is imported from its module on first use, so that reading a results file
(:func:`load_result`, as ``didmem report`` does) loads neither the fit's inference nor numba.
"""

from .._lazy import attach

_WHERE = {
    "Estimate": "common",
    "Pretest": "common",
    "PretrendTest": "saving",
    "GroupTimeResult": "cells",
    "AggregateResult": "aggregations",
    "CellResult": "cells",
    "ExposureResult": "exposure",
    "DoseResponseResult": "dose",
    "RunsResult": "runs",
    "RunsProfile": "runs",
    "MembershipResult": "membership",
    "SIGN_NOTE": "common",
    "profile_matrix": "common",
    "ALIASES": "aggregations",
    "AGGREGATIONS": "aggregations",
    "AggregationSpec": "aggregations",
    "build_aggregation": "aggregations",
    "aligned_cells": "comparison",
    "compare": "comparison",
    "plot_comparison": "comparison",
    "profile_correlation": "profiles",
    "FORMAT_VERSION": "saving",
    "SavedResult": "saving",
    "load_result": "saving",
    "save_result": "saving",
    "plotting": "plotting",  # the figures, a submodule
}
"""Public name -> the module of this package that defines it (imported on first use)."""

__all__ = ["Estimate", "Pretest", "PretrendTest", "GroupTimeResult", "AggregateResult",
           "CellResult", "ExposureResult",
           "DoseResponseResult", "RunsResult", "RunsProfile", "MembershipResult"]

__getattr__, __dir__ = attach(__name__, _WHERE)
