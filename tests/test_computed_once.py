"""Each quantity of a fitted result is computed once: the summary, the results file and the
report ask for the same aggregations and pre-tests, which the result keeps."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import didmem
from didmem.inference.cell_inference import CellInference
from didmem.results.aggregations import AGGREGATIONS


@pytest.fixture
def fitted(small_panel):
    return didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(small_panel)


def _counting(monkeypatch, cls, name):
    calls = []
    original = getattr(cls, name)

    def counted(self, *args, **kwargs):
        calls.append(args[:1])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return calls


def test_summary_and_save_compute_each_aggregation_once(fitted, monkeypatch, tmp_path):
    combinations = _counting(monkeypatch, CellInference, "combination")
    pretrends = _counting(monkeypatch, CellInference, "pretrend_test")
    first = fitted.summary()
    fitted.save(tmp_path / "a.parquet")
    fitted.save(tmp_path / "b.parquet")
    assert fitted.summary() == first
    assert len(combinations) == len(AGGREGATIONS)  # every aggregation once, 'simple' shared with the summary
    assert len(pretrends) == 1
    assert didmem.load_result(tmp_path / "a.parquet").summary() == first


def test_repeated_questions_return_the_kept_answer(fitted):
    assert fitted.aggregate("dynamic") is fitted.aggregate("dynamic")
    assert fitted.aggregate("dynamic", max_e=2) is not fitted.aggregate("dynamic")
    assert fitted.pretrend_test() is fitted.pretrend_test()
    assert fitted.pretrend_test("max_t") is not fitted.pretrend_test()


def test_kept_answers_do_not_travel_in_pickles(fitted):
    agg = fitted.aggregate("group")
    clone = pickle.loads(pickle.dumps(fitted))
    assert "_memo_values" not in clone.__dict__
    again = clone.aggregate("group")
    np.testing.assert_allclose(again.estimates, agg.estimates, rtol=1e-12)
    np.testing.assert_allclose(again.std_errors, agg.std_errors, rtol=1e-12)
