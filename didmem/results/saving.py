"""Saving fitted results to parquet and reading them back.

A results file is a parquet table with one row per (cohort, checkpoint) cell — the columns of
:meth:`GroupTimeResult.to_frame` — and, in the file's metadata under the key ``didmem``, a
JSON document with the settings, the pre-test, the summary and every memorisation and R
``did`` aggregation with default options (their keys' covariance matrices as little-endian
float64 bytes in base64). Any parquet reader sees the cells; didmem reads the
whole back as a :class:`SavedResult`, which answers the same questions as the fitted result
it came from (``to_frame``, ``profile``, ``aggregate``, ``pretest``, ``summary``) without the
panel. Aggregations with non-default options (an event-time window, another final checkpoint)
need the panel: refit for those.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..errors import (DidmemError, InferenceWarning, MissingFileError, OutputFileError,
                      ParameterError)
from ..inference.choices import PRETREND_METHODS
from ..inference.pretrend.result import PretrendTest
from .common import CellTable, Estimate, PicklableProxies, Pretest, profile_matrix
from ._settings import ResultSettings
from .aggregations import AGGREGATIONS, ALIASES, AggregateResult

__all__ = ["save_result", "load_result", "compute_saved", "SavedResult", "FORMAT_VERSION",
           "write_table", "result_meta", "saved_from_frame"]

FORMAT_VERSION = 3
# 3: the resolved settings ("settings": ResultSettings.to_doc, was the "inference" line alone)
#    and each aggregation's name under "aggregation" (was "kind")
# 2: the aggregations' covariances as float64 bytes in base64 (1: nested lists of floats)
META_KEY = b"didmem"
SAVED_AGGREGATIONS = AGGREGATIONS  # every aggregation, with default options


class ResultFileError(DidmemError, ValueError):
    """A file is not a didmem results file (or of a newer format)."""


def _jsonable(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return repr(value)


def _float(v):
    return None if v is None else float(v)


def _matrix_doc(matrix: np.ndarray) -> dict:
    """A float matrix as its little-endian float64 bytes in base64: exact (NaN included), and
    quick to write and read, where a JSON list costs a float repr each (0.05 s for the
    covariances of the paper's shape, most of the time of writing its results file)."""
    a = np.ascontiguousarray(matrix, dtype="<f8")
    return {"shape": list(a.shape), "float64_base64": base64.b64encode(a.tobytes()).decode()}


def _matrix_from(doc) -> np.ndarray:
    """The matrix of :func:`_matrix_doc`, or of a nested list (results format 1)."""
    if isinstance(doc, dict):
        raw = np.frombuffer(base64.b64decode(doc["float64_base64"]), dtype="<f8")
        return raw.astype(float).reshape(doc["shape"])
    return np.array(doc, dtype=float)


def _aggregate_doc(agg: AggregateResult) -> dict:
    o = agg.overall
    return {
        "aggregation": agg.aggregation, "key_name": agg.key_name, "keys": agg.keys.tolist(),
        "estimates": agg.estimates.tolist(), "std_errors": agg.std_errors.tolist(),
        "overall": [o.estimate, o.std_error, o.ci_lower, o.ci_upper],
        "critical_value": agg.critical_value, "band": agg.band,
        # the keys' analytic covariance, for didmem.sensitivity (absent in older files)
        "covariance": None if agg.covariance is None else _matrix_doc(agg.covariance),
        "reference_event_times": list(agg.reference_event_times),
        "std_error_note": agg.std_error_note,
    }


def _aggregate_from(doc: dict, alpha: float) -> AggregateResult:
    def arr(name):
        a = np.array([np.nan if v is None else v for v in doc[name]], dtype=float)
        a.flags.writeable = False
        return a

    cov = doc.get("covariance")
    if cov is not None:
        cov = _matrix_from(cov).reshape(len(doc["keys"]), len(doc["keys"]))
        cov.flags.writeable = False
    name = doc["aggregation"] if "aggregation" in doc else doc["kind"]  # format <= 2: "kind"
    return AggregateResult(aggregation=name, key_name=doc["key_name"], keys=arr("keys"),
                           estimates=arr("estimates"), std_errors=arr("std_errors"),
                           overall=Estimate(*(math.nan if v is None else float(v)
                                              for v in doc["overall"])),
                           critical_value=float(doc["critical_value"]), band=doc["band"],
                           alpha=float(alpha), covariance=cov,
                           reference_event_times=tuple(doc.get("reference_event_times", ())),
                           std_error_note=doc.get("std_error_note", ""))


def _pyarrow():
    import pyarrow.parquet  # a core dependency: results files need no extra

    return pyarrow.parquet


_TABLE_KINDS = {"sensitivity": ("didmem.honest.result", "SensitivityResult"),
                "power_analysis": ("didmem.power", "PowerAnalysis"),
                "dose_response": ("didmem.results.dose", "DoseResponseResult"),
                "runs": ("didmem.results.runs", "RunsResult"),
                "membership": ("didmem.results.membership", "MembershipResult"),
                "random_timing": ("didmem.results.random_timing", "RandomTimingResult")}
"""The class that reads each ``kind`` of :class:`~didmem.results._table_file.TableFile`
(imported when a file of that kind is read: the analyses beside the results import this
module, so it cannot import them)."""


def write_table(frame: pd.DataFrame, meta: dict, path, what: str) -> Path:
    """Write ``frame`` with ``meta`` (JSON, with its ``kind``) as a didmem parquet file.

    The file is written beside its target and moved into place, so a failed write leaves no
    half-written file behind.
    """
    import pyarrow as pa

    pq = _pyarrow()
    path = _results_path(path, "save")
    if path.suffix != ".parquet":
        raise ParameterError(f"A {what} file must end in '.parquet'; got {str(path)!r}.")
    table = pa.Table.from_pandas(frame, preserve_index=False)
    schema_meta = dict(table.schema.metadata or {})
    schema_meta[META_KEY] = json.dumps({"format_version": FORMAT_VERSION, **meta},
                                       default=_jsonable).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    try:
        pq.write_table(table.replace_schema_metadata(schema_meta), partial)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def _results_path(path, owner: str) -> Path:
    """``path`` as a Path, or a ParameterError naming it when it is not a path at all."""
    if not isinstance(path, (str, os.PathLike)):
        raise ParameterError(f"The 'path' parameter of {owner} must be a path (str or "
                             f"os.PathLike) to a results file. Got {path!r}.")
    return Path(path)


@contextlib.contextmanager
def _quiet_aggregations():
    """Silence the inference warnings of the aggregations a results file holds by default.

    A saved file holds every aggregation; its band type (``simultaneous`` or ``pointwise``)
    records the fallback that a warning would announce (for example R ``aggte``'s pointwise
    intervals where the sup-t value falls below the normal one, which depends on the draws).
    The fit's own warnings were raised by the fit and are not touched. It is entered in the
    calling thread around the whole pool, since ``warnings.catch_warnings`` is process-wide.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InferenceWarning)
        yield


def compute_saved(result, threads: int | None = None) -> None:
    """Compute what a results file holds — every aggregation and the pre-tests — into the
    result's caches, ``threads`` tasks at a time (default: two, or one on one core).

    The tasks are independent and their heavy parts (BLAS products, numba kernels, LAPACK)
    release the GIL, so on two cores they take about two thirds of the time they take in
    turn (0.18 against 0.25 s at the paper's scale, ``benchmarks/cli_speed.py``). The
    numbers are those computed in turn: each task is the same computation, only run
    beside another. A task that fails is left for the caller to meet again when it asks
    for that quantity (:func:`save_result` skips an aggregation that cannot be formed).
    BLAS runs on one thread meanwhile, as each aggregation asks for.
    """
    if isinstance(result, SavedResult):  # read from its file: nothing to compute
        return
    if not (hasattr(result, "inference") and hasattr(result, "aggregate")):
        raise ParameterError(f"compute_saved needs a fitted result (GroupTimeResult) or a "
                             f"SavedResult; got {type(result).__name__}.")
    if threads is not None and not (isinstance(threads, (int, np.integer))
                                    and not isinstance(threads, bool) and threads >= 1):
        raise ParameterError(f"The 'threads' parameter of compute_saved must be None or an "
                             f"integer >= 1. Got {threads!r}.")
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    threads = threads or min(2, os.cpu_count() or 1)
    tasks = [functools.partial(result.aggregate, name) for name in SAVED_AGGREGATIONS]
    tasks += [lambda: result.pretest, result.pretrend_test]

    def run(task):
        try:
            task()
        except Exception:  # noqa: BLE001 - met again, in turn, by whoever asks for it
            pass

    # one limit around the pool: the aggregations' own nested limits then restore it, not
    # each other's. The aggregations were not asked for by the user: their band's fallback
    # (pointwise where the sup-t value falls below the normal one, as R's aggte) is recorded
    # in each AggregateResult's ``band`` and the file, not warned about at saving.
    with threadpool_limits(limits=1, user_api="blas"), _quiet_aggregations():
        if threads <= 1:
            for task in tasks:
                run(task)
            return
        with ThreadPoolExecutor(threads, thread_name_prefix="didmem-save") as pool:
            list(pool.map(run, tasks))


def save_result(result, path) -> Path:
    """Write a fitted result to a parquet file (see the module notes for the layout).

    Parameters
    ----------
    result : GroupTimeResult or SavedResult
    path : str or Path
        The file to write; its name must end in ``.parquet``.

    Returns
    -------
    Path
    """
    path = _results_path(path, "save")
    if path.suffix != ".parquet":
        raise ParameterError(f"A results file must end in '.parquet'; got {str(path)!r}.")
    return write_table(result.to_frame(), result_meta(result), path, "results")


def result_meta(result) -> dict:
    """What a results file's metadata holds of a group-time result (its settings, pre-tests,
    summary and every aggregation with default options), computed first."""
    compute_saved(result)
    aggregations = {}
    with _quiet_aggregations():
        for name in SAVED_AGGREGATIONS:
            try:
                aggregations[name] = _aggregate_doc(result.aggregate(name))
            except DidmemError:  # e.g. no post-treatment cells for persistent
                continue
    pre = result.pretest
    meta = {
        "estimator": result.estimator, "params": dict(result.params),
        "outcome": result.outcome, "lower_is_better": bool(result.lower_is_better),
        "critical_value": float(result.critical_value), "band": result.band,
        "alpha": float(result.alpha), "n_units": int(result.n_units),
        "settings": result.settings.to_doc(),
        "pretest": [_float(pre.statistic), int(pre.df), _float(pre.pvalue), pre.note],
        "pretrend_test": _pretrend_doc(result.pretrend_test()),
        "summary": result.summary(), "aggregations": aggregations,
    }
    return meta


def load_result(path):
    """Read a results file written by :meth:`GroupTimeResult.save` / :func:`save_result`, or
    by the ``save`` of :class:`~didmem.SensitivityResult`, :class:`~didmem.PowerAnalysis`,
    :class:`~didmem.DoseResponseResult`, :class:`~didmem.MembershipResult` or
    :class:`~didmem.results.random_timing.RandomTimingResult`.

    Returns
    -------
    SavedResult, RunsResult, SensitivityResult, PowerAnalysis, DoseResponseResult, ...
        What the file holds (also MembershipResult, RandomTimingResult).

    Raises
    ------
    MissingFileError
        When ``path`` does not exist (also a ``FileNotFoundError``).
    OutputFileError
        When the file is a parquet file cut short (also an ``OSError``): delete it and run
        again.
    DidmemError
        When the file is not a didmem results file, or its contents are malformed (the
        message names the file and what is wrong).
    """
    pq = _pyarrow()
    path = _results_path(path, "load_result")
    if not path.exists():
        raise MissingFileError(f"No results file at {str(path)!r}.")
    table = _read_table(pq, path)
    meta = _read_meta(table, path)
    kind = meta.get("kind", "group_time")
    try:
        if kind != "group_time":
            if kind not in _TABLE_KINDS:
                raise ResultFileError(f"{str(path)!r} holds a {kind!r} result, which this "
                                      "didmem cannot read.")
            import importlib

            module, name = _TABLE_KINDS[kind]
            return getattr(importlib.import_module(module), name)._from_file(table.to_pandas(),
                                                                            meta)
        return _saved_result(table, meta, path)
    except DidmemError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise ResultFileError(f"{str(path)!r} is a didmem results file whose metadata is "
                              f"malformed ({_what(exc)}); it was altered after it was "
                              f"written. {_WRITE_AGAIN}") from None


_WRITE_AGAIN = ("Write it again from its source (didmem estimate, or the result's "
                ".save()).")

_REQUIRED_KEYS = ("estimator", "params", "outcome", "lower_is_better", "critical_value",
                  "band", "alpha", "n_units", "pretest", "summary", "aggregations")
"""The keys of a group-time results file's metadata (and, by format, ``settings`` (3) or
``inference`` (1, 2))."""

_REQUIRED_CELLS = ("cohort", "time", "event_time", "post", "estimate", "std_error", "ci_lower",
                   "ci_upper", "significant")
"""The cell columns a :class:`SavedResult` reads (the report, plots and profiles too)."""


def _what(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no key {exc.args[0]!r}"
    return f"{type(exc).__name__}: {exc}"


def _read_table(pq, path: Path):
    """The file's table, or an error that says whether it is cut short or not parquet."""
    try:
        return pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a non-parquet file
        with open(path, "rb") as fh:
            head = fh.read(4)
        if head == b"PAR1" or path.stat().st_size == 0:
            raise OutputFileError(
                f"{str(path)!r} is cut short: it "
                + ("is empty" if head == b"" else "begins as a parquet file but its end is "
                   "missing") + " (a write, copy or download that was interrupted, or a disk "
                "that filled). Delete it and run again to write it anew (didmem estimate, or "
                f"the result's .save()). ({exc})") from None
        raise ResultFileError(f"{str(path)!r} is not a parquet file ({exc}).") from None


def _read_meta(table, path: Path) -> dict:
    """The didmem metadata of ``table`` as a dict with a usable ``format_version``."""
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise ResultFileError(f"{str(path)!r} is a parquet file but not a didmem results file "
                              "(no 'didmem' metadata); write one with 'didmem estimate'.")
    try:
        meta = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ResultFileError(f"{str(path)!r} has 'didmem' metadata that is not JSON ({exc}); "
                              f"it was altered or damaged after it was written. "
                              f"{_WRITE_AGAIN}") from None
    if not isinstance(meta, dict):
        raise ResultFileError(f"{str(path)!r} has 'didmem' metadata that is a JSON "
                              f"{type(meta).__name__}, not an object of settings; it was "
                              f"altered after it was written. {_WRITE_AGAIN}")
    version = meta.get("format_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ResultFileError(f"{str(path)!r} has the results format_version {version!r}; it "
                              "must be a whole number (1, 2, 3, ...): the file was altered "
                              f"after it was written. {_WRITE_AGAIN}")
    if version > FORMAT_VERSION:
        raise ResultFileError(f"{str(path)!r} was written by a newer didmem (results format "
                              f"{version}); upgrade didmem to read it.")
    return meta


def _saved_result(table, meta: dict, path: Path) -> "SavedResult":
    """The :class:`SavedResult` of a group-time results file's table and metadata."""
    absent = [c for c in _REQUIRED_CELLS if c not in table.column_names]
    if absent:
        raise ResultFileError(f"{str(path)!r} is a didmem results file whose cells lack the "
                              f"column(s) {absent}; it was altered after it was written. "
                              f"{_WRITE_AGAIN}")
    return saved_from_frame(table.to_pandas(), meta, path)


def saved_from_frame(cells: pd.DataFrame, meta: dict, path) -> "SavedResult":
    """The :class:`SavedResult` of a group-time result's cells and metadata (a results file's,
    or one run's part of a file of several runs)."""
    version = meta.get("format_version", 1)
    required = _REQUIRED_KEYS + (("settings",) if version >= 3 else ("inference",))
    missing = [key for key in required if key not in meta]
    if missing:
        raise ResultFileError(f"{str(path)!r} is a didmem results file whose metadata lacks "
                              f"the key(s) {missing}; it was altered after it was written. "
                              f"{_WRITE_AGAIN}")
    if not isinstance(meta["aggregations"], dict) or not isinstance(meta["params"], dict):
        raise ResultFileError(f"{str(path)!r} has 'params' or 'aggregations' that are not "
                              f"JSON objects; it was altered after it was written. "
                              f"{_WRITE_AGAIN}")
    aggregations = {}
    for name, doc in meta["aggregations"].items():
        try:
            aggregations[name] = _aggregate_from(doc, meta["alpha"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ResultFileError(f"{str(path)!r} holds the aggregation {name!r} malformed "
                                  f"({_what(exc)}: a covariance cut short, or a list of "
                                  "another length than the keys'); it was altered after it was "
                                  f"written. {_WRITE_AGAIN}") from None
    settings = (ResultSettings.from_doc(meta["settings"]) if version >= 3
                else ResultSettings.of_old_file(str(meta["inference"])))
    stat, df, pvalue, note = meta["pretest"]
    nan = math.nan
    return SavedResult(
        estimator=meta["estimator"], params=meta["params"], outcome=meta["outcome"],
        lower_is_better=meta["lower_is_better"], critical_value=meta["critical_value"],
        band=meta["band"], alpha=meta["alpha"], n_units=meta["n_units"],
        pretest=Pretest(nan if stat is None else stat, df, nan if pvalue is None else pvalue, note),
        cells=cells, aggregations=aggregations,
        summary_text=meta["summary"], settings=settings, path=str(path),
        calibrated_pretest=_pretrend_from(meta.get("pretrend_test")),
    )


def _pretrend_doc(test: PretrendTest) -> dict:
    doc = dataclasses.asdict(test)
    for key in ("statistic", "pvalue", "power", "drift"):
        doc[key] = None if doc[key] is None else _float(doc[key])
    return doc


def _pretrend_from(doc) -> PretrendTest | None:
    """The stored calibrated pre-test (None in files written before it was saved)."""
    if doc is None:
        return None
    doc = dict(doc)
    for key in ("statistic", "pvalue"):
        doc[key] = math.nan if doc[key] is None else doc[key]
    return PretrendTest(**doc)


@dataclass(frozen=True, eq=False)
class SavedResult(CellTable, PicklableProxies):
    """A result read back from a results file: the cells, aggregations, pre-test and settings.

    It has the read-only interface of :class:`GroupTimeResult` that needs no panel, so
    :mod:`didmem.results.plotting`, :func:`didmem.profile_correlation` and :mod:`didmem.report` take
    either. Aggregations are those computed with default options when the file was saved;
    :attr:`settings` are the fitted result's resolved settings
    (:class:`~didmem.results._settings.ResultSettings`), so its summary and report read the
    same as the fitted result's.
    """

    estimator: str
    params: Mapping[str, Any]
    outcome: str
    lower_is_better: bool
    critical_value: float
    band: str
    alpha: float
    n_units: int
    pretest: Pretest
    cells: pd.DataFrame = field(repr=False)
    aggregations: Mapping[str, AggregateResult] = field(repr=False)
    summary_text: str = field(repr=False, default="")
    settings: ResultSettings = field(repr=False, kw_only=True)
    path: str = ""
    calibrated_pretest: PretrendTest | None = field(repr=False, default=None)

    _proxies = ("params", "aggregations")

    def __post_init__(self):
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "aggregations", MappingProxyType(dict(self.aggregations)))
        object.__setattr__(self, "cells", self.cells.copy())

    def pretrend_test(self, method: str | None = None) -> PretrendTest:
        """The stored pre-test: the calibrated default (``None``) or R's ``"wald"``.

        The other methods need the panel: fit it again and call
        :meth:`GroupTimeResult.pretrend_test`.
        """
        if method == "wald":
            p = self.pretest
            return PretrendTest("wald", p.statistic, p.pvalue, df=float(p.df),
                                n_restrictions=int(p.df), note=p.note)
        if method is None or (self.calibrated_pretest is not None
                              and method == self.calibrated_pretest.method):
            if self.calibrated_pretest is None:
                raise ResultFileError(f"{self.path!r} was saved without the calibrated "
                                      "pre-test; fit the panel again, or ask for 'wald'.")
            return self.calibrated_pretest
        stored = ["None (the default)", "'wald'"] + (
            [repr(self.calibrated_pretest.method)] if self.calibrated_pretest is not None else [])
        if method not in PRETREND_METHODS:
            raise ParameterError(f"The 'method' parameter of pretrend_test must be one of "
                                 f"{set(PRETREND_METHODS)} or None. Got {method!r}.")
        raise ParameterError(f"A results file stores these pre-tests: {', '.join(stored)}; "
                             f"for {method!r} fit the panel again and call "
                             "GroupTimeResult.pretrend_test.")

    def profile(self, value: str = "estimate", significant_only: bool = False) -> pd.DataFrame:
        """The cohort x time matrix of one column (see :meth:`GroupTimeResult.profile`)."""
        return profile_matrix(self.to_frame(), value, significant_only)

    def aggregate(self, aggregation: str = "simple", **options) -> AggregateResult:
        """A saved aggregation (default options only; refit the panel for others)."""
        given = {k: v for k, v in options.items() if v is not None and not (
            isinstance(v, float) and math.isinf(v))}
        if given:
            raise ParameterError(
                f"A saved result keeps its aggregations with default options only; got "
                f"{sorted(given)}. Refit the panel to aggregate with options."
            )
        aggregation = ALIASES.get(aggregation, aggregation) if isinstance(aggregation, str) else aggregation
        if not isinstance(aggregation, str) or aggregation not in self.aggregations:
            raise ParameterError(f"Unknown or unavailable aggregation {aggregation!r}; this result has "
                                 f"{sorted(self.aggregations)}.")
        return self.aggregations[aggregation]

    def summary(self) -> str:
        """The summary printed when the result was fitted."""
        return self.summary_text

    def plot(self, figure: str = "profile", **options):
        """Draw a figure of :mod:`didmem.results.plotting` (see :meth:`GroupTimeResult.plot`)."""
        from .plotting import plot_result

        return plot_result(self, figure, **options)

    def save(self, path) -> Path:
        """Write the result to another parquet file."""
        return save_result(self, path)

    def __repr__(self) -> str:
        return (f"<SavedResult {self.estimator} outcome={self.outcome!r}: {len(self.cells)} "
                f"cells, {self.n_units} units, {self.band} band, from {self.path!r}>")
