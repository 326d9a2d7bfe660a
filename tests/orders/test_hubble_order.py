"""Hubble's insertion metadata, written in the layout of allegro-lab/hubble's tools."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from didmem.orders.exposures import exposure_cohorts
from didmem.orders.hubble import (hubble_exposures, read_inserted_examples,
                                    read_perturbation_info)
from didmem.errors import ParameterError


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def hubble(tmp_path):
    # two source files tokenized (in sorted order) into one dataset "copyright"
    a = _jsonl(tmp_path / "b_books_dup.jsonl",
               [{"text": "book", "meta": {"id": "bk", "duplicates": 4}}] * 4)
    b = _jsonl(tmp_path / "a_wiki_dup.jsonl",
               [{"text": "w1", "meta": {"id": "w1", "duplicates": 1}},
                {"text": "w2", "meta": {"id": "w2", "duplicates": 0}}])
    examples = read_inserted_examples("copyright", [a, b])
    # rows: 0 = w1 (a_wiki first), 1 = w2, 2..5 = bk
    positions = {0: 50, 2: 3, 3: 70, 4: 21, 5: 99}
    info = _jsonl(tmp_path / "standard_text_document_perturbation_info.json", [
        {"perturbation_file": "copyright", "perturbation_idx": i, "pt_loc": loc,
         "pt_shuffle_idx": 7, "doc_index_f": 1, "doc_index_l": 2, "offset_f": 0, "offset_l": 5}
        for i, loc in positions.items()])
    return examples, info


def test_exposures_and_dose(hubble):
    examples, info_path = hubble
    assert examples["unit"].tolist() == ["w1", "w2", "bk", "bk", "bk", "bk"]
    info = read_perturbation_info(info_path)
    exp = hubble_exposures(info, examples, batch_size=10)
    assert exp.groupby("unit")["step"].apply(list).to_dict() == {
        "bk": [1, 3, 8, 10], "w1": [6]}
    panel = exposure_cohorts(exp, ["bk", "w1", "w2"], checkpoints=[5, 10])
    assert panel["exposures"].tolist() == [4, 1, 0]
    assert panel.loc[0, ["cohort", "cohort_2", "cohort_3", "cohort_4"]].tolist() == [5, 5, 10, 10]
    assert panel.loc[1, "cohort"] == 10 and np.isnan(panel.loc[2, "cohort"])


def test_copies_must_match_declared_duplicates(hubble):
    examples, info_path = hubble
    info = read_perturbation_info(info_path)
    with pytest.raises(ParameterError, match=r"1 examples were inserted a number of times other "
                                             r"than their meta.duplicates, e.g. 'bk': 3 copies"):
        hubble_exposures(info[info["perturbation_idx"] != 5], examples, 10)
    with pytest.raises(ParameterError, match=r"1 inserted copies have no example row, e.g. "
                                             r"'other' row 0"):
        extra = pd.concat([info, pd.DataFrame({"perturbation_file": ["other"],
                                               "perturbation_idx": [0], "pt_loc": [1]})])
        hubble_exposures(extra, examples, 10)


@pytest.mark.parametrize("line, message", [
    ("not json", "line 2 is not JSON"),
    ('{"perturbation_file": "x", "pt_loc": 1}', "line 2 lacks 'perturbation_idx'"),
    ('{"perturbation_file": "x", "perturbation_idx": 0, "pt_loc": -1}',
     "line 2: pt_loc and perturbation_idx must be non-negative integers"),
    ('{"perturbation_file": "x", "perturbation_idx": 1, "pt_loc": 4}',
     "1 positions are used twice, e.g. pt_loc 4"),
])
def test_bad_info_files(tmp_path, line, message):
    path = tmp_path / "info.json"
    path.write_text('{"perturbation_file": "x", "perturbation_idx": 0, "pt_loc": 4}\n' + line
                    + "\n")
    with pytest.raises(ParameterError, match=f"info.json' {message}" if "twice" not in message
                       else f"info.json': {message}"):
        read_perturbation_info(path)
