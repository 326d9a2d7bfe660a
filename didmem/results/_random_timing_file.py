"""The results file of a :class:`~didmem.results.random_timing.RandomTimingResult`.

One parquet table in the results-file family of :mod:`didmem.results.saving` (kind
``"random_timing"``): one row per row of the fit's tables (``kind`` ``"cell"`` for a
(cohort, checkpoint) cell, else the aggregation; ``key`` its cohort, time or event time, NaN
for an overall value) with the estimate, both standard errors, ``beta``, the band's critical
value and the Fisher p-values; in the metadata the settings and the design (times, cohorts,
cohort sizes, mean paths and covariance matrices as little-endian float64 in base64, exact),
which re-aggregating, the balance test and the report need. Any parquet reader sees the rows.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["file_contents", "from_file", "TABLE_COLUMNS"]

TABLE_COLUMNS = ("kind", "cohort", "time", "key", "estimate", "std_error", "std_error_neyman",
                 "beta", "critical_value", "fisher_pvalue", "fisher_pvalue_r")
"""The columns of the file's table, the fields of the fit's ``RandomTimingTables``."""
DESIGN_ARRAYS = ("times", "cohorts", "codes", "count", "mean", "cov")
"""The arrays of the design (``TimingDesign``) kept in the metadata."""


def _json_param(value):
    """A parameter as JSON: numbers, strings, booleans and None as they are; anything else
    (a ``numpy.random.Generator`` seed) as None, since it cannot be written back."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def file_contents(result):
    """``(frame, settings)`` of :meth:`TableFile.save` for a random-timing result."""
    import pandas as pd

    from .saving import _matrix_doc

    tables = result.tables
    frame = pd.DataFrame({name: np.asarray(getattr(tables, name)) for name in TABLE_COLUMNS})
    frame["kind"] = frame["kind"].astype(str)
    design = {name: _matrix_doc(np.asarray(getattr(result.design, name), dtype=np.float64))
              for name in DESIGN_ARRAYS}
    sup = tables.fisher_sup_pvalue
    return frame, {
        "estimator": result.estimator,
        "params": {k: _json_param(v) for k, v in dict(result.params).items()},
        "outcome": result.outcome, "randomised": result.randomised,
        "n_fisher": int(tables.n_fisher),
        "fisher_sup_pvalue": None if sup is None or math.isnan(sup) else float(sup),
        "design": design, "summary": result.summary()}


def from_file(cls, frame, settings: dict):
    """The result of :func:`file_contents`'s table and settings (a ValueError, or a KeyError
    for a missing key, on a malformed file: :func:`didmem.load_result` turns either into a
    ResultFileError naming the file)."""
    from ..inference.random_timing.design import TimingDesign
    from ..inference.random_timing.fit import RandomTimingTables
    from .saving import _matrix_from

    missing = [c for c in TABLE_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"the table lacks the column(s) {missing}")
    arrays = {name: _matrix_from(settings["design"][name]) for name in DESIGN_ARRAYS}
    k, t = arrays["cohorts"].size, arrays["times"].size
    if (arrays["codes"].size, arrays["count"].size, arrays["mean"].shape,
            arrays["cov"].shape) != (k, k, (k, t), (k, t, t)):
        raise ValueError("the design's arrays have inconsistent shapes")
    design = TimingDesign(**arrays)
    kinds = {"cell", "simple", "group", "calendar", "dynamic"}
    kind = frame["kind"].to_numpy(dtype=str)
    if not set(kind) <= kinds:
        raise ValueError(f"unknown row kinds {sorted(set(kind) - kinds)}")
    floats = {c: frame[c].to_numpy(dtype=np.float64) for c in TABLE_COLUMNS if c != "kind"}
    sup = settings["fisher_sup_pvalue"]
    n_fisher = settings["n_fisher"]
    if isinstance(n_fisher, bool) or not isinstance(n_fisher, int) or n_fisher < 0:
        raise ValueError(f"n_fisher {n_fisher!r} is not a count")
    tables = RandomTimingTables(kind=kind, **floats,
                                fisher_sup_pvalue=math.nan if sup is None else float(sup),
                                n_fisher=n_fisher)
    if not isinstance(settings["params"], dict):
        raise ValueError("params is not an object")
    return cls(estimator=str(settings["estimator"]), params=dict(settings["params"]),
               outcome=str(settings["outcome"]), randomised=str(settings["randomised"]),
               design=design, tables=tables)
