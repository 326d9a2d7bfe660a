"""The results file of RandomTimingEstimator: saved, read back equal, reported."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import didmem
from didmem.errors import DidmemError
from didmem.results.random_timing import RandomTimingResult

from .conftest import reference_file


@pytest.fixture(scope="module")
def fitted():
    frame = pd.read_csv(reference_file("rt_sim1.csv"))
    panel = didmem.Panel(frame, unit="i", time="t", cohort="g", outcome="y")
    return didmem.RandomTimingEstimator(n_draws=200, n_fisher=49, seed=3).fit(panel)


def _equal_frames(a: pd.DataFrame, b: pd.DataFrame):
    assert list(a.columns) == list(b.columns)
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True),
                                  check_exact=True)


def test_saved_result_reads_back_equal(fitted, tmp_path):
    path = fitted.save(tmp_path / "rt.parquet")
    loaded = didmem.load_result(path)
    assert isinstance(loaded, RandomTimingResult)
    _equal_frames(loaded.to_frame(), fitted.to_frame())
    for name in ("simple", "group", "calendar", "dynamic"):
        _equal_frames(loaded.aggregate(name).to_frame(), fitted.aggregate(name).to_frame())
    assert "fisher_pvalue" in loaded.to_frame()
    for name in ("group", "calendar", "dynamic"):  # every key is tested (issue 47 item 2)
        frame = loaded.aggregate(name).to_frame()
        assert len(frame) > 2 and np.isfinite(frame["fisher_pvalue"]).all()
        assert np.isfinite(frame["fisher_pvalue_r"]).all()
    assert loaded.fisher_sup_pvalue == fitted.fisher_sup_pvalue
    assert loaded.randomised == fitted.randomised == "training"
    assert loaded.params["beta"] is None and loaded.params["n_fisher"] == 49
    assert loaded.summary() == fitted.summary()
    # the design travels too: the balance test of the loaded result is the fitted one's
    _equal_frames(loaded.balance_test(), fitted.balance_test())
    # and a loaded result saves again to the same rows
    again = didmem.load_result(loaded.save(tmp_path / "again.parquet"))
    _equal_frames(again.to_frame(), fitted.to_frame())


def test_file_is_a_parquet_table_of_rows_with_its_kind(fitted, tmp_path):
    path = fitted.save(tmp_path / "rt.parquet")
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"didmem"])
    assert meta["kind"] == "random_timing" and meta["randomised"] == "training"
    rows = table.to_pandas()
    assert set(rows["kind"]) == {"cell", "simple", "group", "calendar", "dynamic"}
    assert (rows["kind"] == "cell").sum() == len(fitted.to_frame())


def test_a_generator_seed_is_saved_as_none(tmp_path):
    frame = pd.read_csv(reference_file("rt_sim1.csv"))
    panel = didmem.Panel(frame, unit="i", time="t", cohort="g", outcome="y")
    res = didmem.RandomTimingEstimator(n_draws=0, seed=np.random.default_rng(1)).fit(panel)
    loaded = didmem.load_result(res.save(tmp_path / "rt.parquet"))
    assert loaded.params["seed"] is None
    _equal_frames(loaded.to_frame(), res.to_frame())


def test_an_altered_file_is_refused_by_name(fitted, tmp_path):
    path = fitted.save(tmp_path / "rt.parquet")
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"didmem"])
    del meta["design"]["cov"]
    pq.write_table(table.replace_schema_metadata({b"didmem": json.dumps(meta).encode()}), path)
    with pytest.raises(DidmemError, match="rt.parquet.*malformed"):
        didmem.load_result(path)


def test_loaded_result_reports(fitted, tmp_path):
    pytest.importorskip("matplotlib")  # the report draws the profile
    loaded = didmem.load_result(fitted.save(tmp_path / "rt.parquet"))
    page = didmem.report.render_report(loaded)
    assert "RandomTimingEstimator" in page
    assert "assigned at random" in page and "design-based" in page
    assert "Fisher randomisation test (49 permutations" in page
    assert "joint Wald p" in page  # the balance test, from the saved design
    from didmem.report._html import table

    for name in ("group", "calendar"):  # the keys' Fisher p-values are in their tables
        frame = loaded.aggregate(name).to_frame()
        assert np.isfinite(frame["fisher_pvalue"]).all() and table(frame) in page

    def body(text):  # the page without its time stamp
        return [line for line in text.splitlines() if "class='meta'" not in line]

    assert body(page) == body(didmem.report.render_report(fitted))


def test_report_without_fisher_says_so_and_names_the_validation_split(tmp_path):
    pytest.importorskip("matplotlib")
    frame = pd.read_csv(reference_file("rt_sim1.csv"))
    panel = didmem.Panel(frame, unit="i", time="t", cohort="g", outcome="y")
    res = didmem.RandomTimingEstimator(n_draws=0, randomised="all").fit(panel)
    page = didmem.report.render_report(didmem.load_result(res.save(tmp_path / "rt.parquet")))
    assert "No Fisher randomisation test was run" in page
    assert "random validation split" in page and "plug-in efficient beta" in page
    assert "No Fisher randomisation test (n_fisher=0)." in res.summary()
