"""A results file that cannot be read gives a didmem error naming the file and what to do
(issue 40 item 5: the odd-input probe's results files met KeyError, TypeError, JSONDecodeError
and numpy's reshape error)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

import didmem
from didmem.errors import DidmemError, OutputFileError

pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    data, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=15,
                                             n_never_treated=20, n_times=5, seed=2)
    panel = didmem.Panel(data, unit="unit", time="time", cohort="cohort", outcome="y")
    with warnings.catch_warnings():  # a band below the pointwise one, by the draws (as R)
        warnings.simplefilter("ignore", didmem.errors.InferenceWarning)
        result = didmem.DiDEstimator(n_bootstrap=49, seed=0).fit(panel)
        return result.save(tmp_path_factory.mktemp("good") / "result.parquet")


def _with_meta(saved, path, change):
    """A copy of ``saved`` whose didmem metadata is ``change(meta)`` (bytes or a JSON value)."""
    table = pq.read_table(saved)
    meta = json.loads(table.schema.metadata[b"didmem"])
    raw = change(meta)
    raw = raw if isinstance(raw, bytes) else json.dumps(raw).encode()
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"didmem": raw}),
                   path)
    return path


def _without(key):
    def change(meta):
        del meta[key]
        return meta
    return change


def _version(value):
    return lambda meta: {**meta, "format_version": value}


def _cut_covariance(meta):
    doc = meta["aggregations"]["dynamic"]["covariance"]
    import base64

    raw = base64.b64decode(doc["float64_base64"])
    doc["float64_base64"] = base64.b64encode(raw[:-16]).decode()
    return meta


CASES = [
    ("not JSON", lambda meta: b"{'format_version': 3, oops", "metadata that is not JSON"),
    ("a JSON list", lambda meta: [meta], "a JSON list, not an object"),
    *[(f"no {key}", _without(key), rf"lacks the key\(s\) \['{key}'\]")
      for key in ("params", "aggregations", "pretest", "outcome", "estimator", "summary",
                  "settings")],
    ("format_version '2'", _version("2"), "format_version '2'; it must be a whole number"),
    ("format_version null", _version(None), "format_version None; it must be a whole number"),
    ("a cut covariance", _cut_covariance, "aggregation 'dynamic' malformed"),
    ("pretest not a list", lambda meta: {**meta, "pretest": 3}, "metadata is malformed"),
    ("a power analysis without its settings", lambda meta: {"format_version": 3,
                                                         "kind": "power_analysis"},
     "metadata is malformed"),
    ("a kind that is a list", lambda meta: {**meta, "kind": ["x"]}, "metadata is malformed"),
]


@pytest.mark.parametrize("change, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_metadata_is_refused_by_name(saved, tmp_path, change, words):
    path = _with_meta(saved, tmp_path / "bad.parquet", change)
    with pytest.raises(DidmemError, match=words) as info:
        didmem.load_result(path)
    message = str(info.value)
    assert repr(str(path)) in message
    assert "Write it again" in message


def test_a_missing_cell_column_is_refused_by_name(saved, tmp_path):
    table = pq.read_table(saved)
    path = tmp_path / "no_estimate.parquet"
    pq.write_table(table.drop(["estimate"]), path)
    with pytest.raises(DidmemError, match=r"cells lack the column\(s\) \['estimate'\]") as info:
        didmem.load_result(path)
    assert repr(str(path)) in str(info.value) and "Write it again" in str(info.value)


@pytest.mark.parametrize("keep", [0.5, 0.0], ids=["half", "empty"])
def test_a_truncated_file_says_delete_it_and_run_again(saved, tmp_path, keep):
    raw = saved.read_bytes()
    path = tmp_path / "cut.parquet"
    path.write_bytes(raw[:int(len(raw) * keep)])
    with pytest.raises(OutputFileError, match="is cut short") as info:
        didmem.load_result(path)
    assert repr(str(path)) in str(info.value)
    assert "Delete it and run again" in str(info.value)


def test_not_parquet_is_still_named_so(tmp_path):
    path = tmp_path / "text.parquet"
    path.write_text("a text file")
    with pytest.raises(DidmemError, match="is not a parquet file"):
        didmem.load_result(path)


def test_the_cli_names_a_truncated_results_file_in_one_line(saved, tmp_path):
    path = tmp_path / "cut.parquet"
    path.write_bytes(saved.read_bytes()[:1000])
    proc = subprocess.run([sys.executable, "-m", "didmem.cli", "report", str(path), "--out",
                           str(tmp_path / "r.html")], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert "is cut short" in proc.stderr and "Delete it and run again" in proc.stderr
