"""The suites' ``[design]`` kinds end to end: OLMo, Hubble, Pythia's repeats, orders with repeats.

Each test writes the suite's files in their published layout, runs ``didmem score`` on a tiny
GPT-NeoX saved at steps 0, 2 and 4 (batch_size = 3 sequences per step, so positions 0..5 are
steps 1-2 and cohort 2, positions 6..11 steps 3-4 and cohort 4) and checks the panel's
``cohort``, ``cohort_2``, ... and ``exposures`` against values worked out by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from .test_study import study_config

from didmem.orders.indexed import write_indexed_dataset
from didmem.cli import main

pytest.importorskip("torch")
pytest.importorskip("pyarrow")

LENGTH = 20


@pytest.fixture(scope="module")
def three_checkpoints(tmp_path_factory):
    from ..backends.backend_helpers import build_checkpoints

    return build_checkpoints(tmp_path_factory.mktemp("suite-ckpt"), n=3)


def _units(panel):
    return panel.drop_duplicates("unit").set_index("unit")


def _score(config, out, capsys):
    assert main(["score", "--config", config, "--out", str(out)]) == 0, capsys.readouterr().err
    return pd.read_parquet(out / "panel.parquet")


def _raw(path, array, dtype):
    mm = np.memmap(path, dtype=dtype, mode="w+", shape=(len(array),))
    mm[:] = array
    mm.flush()
    return path


def test_olmo_design_writes_first_and_second_exposures(three_checkpoints, tmp_path, capsys):
    rng = np.random.default_rng(3)
    tokens = rng.integers(1, 96, size=(12, LENGTH))
    _raw(tmp_path / "part-0.npy", tokens[:7].ravel(), np.uint16)
    _raw(tmp_path / "part-1.npy", tokens[7:].ravel(), np.uint16)
    # positions 0..11 are steps 1..4 (batch 3); 12..17 come after the last checkpoint
    order = [0, 1, 2, 3, 4, 0, 5, 6, 1, 7, 8, 9, 10, 11, 2, 3, 7, 4]
    _raw(tmp_path / "global_indices.npy", np.array(order), np.uint32)
    np.save(tmp_path / "validation.npy", rng.integers(1, 96, size=(2, LENGTH)))
    config = study_config(tmp_path, three_checkpoints, [
        'kind = "olmo"', 'global_indices = "global_indices.npy"', "batch_size = 3",
        'data = ["part-0.npy", "part-1.npy"]', "sequence_length = 20", 'dtype = "uint16"',
        "units = [0, 1, 2, 7, 9]", 'validation = "validation.npy"'])
    panel = _score(config, tmp_path / "o", capsys)
    got = _units(panel)
    # 0: positions 0 (step 1), 5 (step 2); 1: 1 (step 1), 8 (step 3); 2: 2 (step 1) and 14
    # (step 5, after the last checkpoint: not yet); 7: 9 (step 4); 9: 11 (step 4)
    assert got.loc[[0, 1, 2, 7, 9], "cohort"].tolist() == [2, 2, 2, 4, 4]
    np.testing.assert_array_equal(got.loc[[0, 1, 2, 7, 9], "cohort_2"], [2, 4, np.nan, np.nan,
                                                                         np.nan])
    assert got.loc[[0, 1, 2, 7, 9], "exposures"].tolist() == [2, 2, 1, 1, 1]
    assert got.loc[[-1, -2], ["cohort", "cohort_2"]].isna().all().all()
    assert got.loc[[-1, -2], "exposures"].tolist() == [0, 0]
    # the scored tokens are the OLMo instances
    assert (got["length"] == LENGTH).all()
    assert sorted(panel["time"].unique()) == [0, 2, 4]


@pytest.mark.parametrize("change, message", [
    ({"global_indices": '"gi_bad.npy"'}, "has 2 entries, fewer than one batch of batch_size = 3"),
    ({"units": "[0, 40]"}, "[design] units: OLMo instance 40 is past the data"),
    ({"units": None}, "[design] data needs sequence_length and units"),
    ({"gi": "late"}, "1 units are first trained on after the last checkpoint (4), e.g. unit 0"),
    ({"gi": "past"}, "position 4 holds instance 50, past the 12 instances"),
    ({"dtype": '"int8"'}, "[design] dtype must be one of {'uint16', 'uint32', 'uint64'}"),
    ({"data": None}, "[design] sequence_length goes with data"),
])
def test_olmo_design_mistakes(three_checkpoints, tmp_path, capsys, change, message):
    tokens = np.random.default_rng(0).integers(1, 96, size=(12, LENGTH))
    _raw(tmp_path / "part-0.npy", tokens.ravel(), np.uint16)
    order = {"past": np.r_[0:4, 50, 5:12], "late": np.r_[1:12, 1, 0, 2, 3]}.get(
        change.get("gi"), np.arange(12))
    _raw(tmp_path / "global_indices.npy", order, np.uint32)
    _raw(tmp_path / "gi_bad.npy", np.arange(2), np.uint32)
    keys = {"kind": '"olmo"', "global_indices": '"global_indices.npy"', "batch_size": 3,
            "data": '["part-0.npy"]', "sequence_length": 20, "units": "[0, 5]"}
    keys.update({k: v for k, v in change.items() if k != "gi"})
    config = study_config(tmp_path, three_checkpoints,
                          [f"{k} = {v}" for k, v in keys.items() if v is not None])
    assert main(["score", "--config", config, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"config {config}: [design]" in err and message in err, err


def test_hubble_design_gives_exposures_and_dose(three_checkpoints, tmp_path, capsys):
    rng = np.random.default_rng(5)
    ids = ["bk", "w1", "held"]
    pd.DataFrame({"unit": ids, "token_ids": [list(rng.integers(1, 96, LENGTH)) for _ in ids]}
                 ).to_parquet(tmp_path / "instances.parquet")
    (tmp_path / "books_dup.jsonl").write_text(
        "".join(json.dumps({"text": "b", "meta": {"id": "bk", "duplicates": 3}}) + "\n"
                for _ in range(3)))
    (tmp_path / "wiki_dup.jsonl").write_text(
        json.dumps({"text": "w", "meta": {"id": "w1", "duplicates": 1}}) + "\n")
    # rows of dataset "pert": 0-2 = bk (books_dup sorts first), 3 = w1
    locs = {0: 7, 1: 1, 2: 11, 3: 4}  # bk: steps 3, 1, 4; w1: step 2
    (tmp_path / "info.json").write_text("".join(
        json.dumps({"perturbation_file": "pert", "perturbation_idx": i, "pt_loc": loc}) + "\n"
        for i, loc in locs.items()))
    config = study_config(tmp_path, three_checkpoints, [
        'kind = "hubble"', 'perturbation_info = "info.json"', "batch_size = 3",
        'examples = { pert = ["wiki_dup.jsonl", "books_dup.jsonl"] }'],
        extra=["[instances]", 'file = "instances.parquet"'])
    got = _units(_score(config, tmp_path / "o", capsys))
    assert got.loc["bk", ["cohort", "cohort_2", "cohort_3"]].tolist() == [2, 4, 4]
    assert got.loc["w1", "cohort"] == 2 and np.isnan(got.loc["w1", "cohort_2"])
    assert got.loc["held", ["cohort", "cohort_2", "cohort_3"]].isna().all()
    assert got["exposures"].to_dict() == {"bk": 3, "w1": 1, "held": 0}


def test_order_design_with_several_rows_per_unit(three_checkpoints, instances, tmp_path, capsys):
    tokens, ids = instances
    np.save(tmp_path / "tokens.npy", tokens)
    np.save(tmp_path / "units.npy", np.array(ids))
    rows = [(ids[0], 1), (ids[0], 3), (ids[0], 4), (ids[1], 2), (ids[2], None), (ids[3], 3),
            (ids[3], 2)] + [(u, 1) for u in ids[4:]]
    pd.DataFrame(rows, columns=["unit", "step"]).to_csv(tmp_path / "order.csv", index=False)
    config = study_config(tmp_path, three_checkpoints, ['kind = "order"', 'file = "order.csv"'],
                          extra=["[instances]", 'file = "tokens.npy"', 'units = "units.npy"'])
    got = _units(_score(config, tmp_path / "o", capsys))
    np.testing.assert_array_equal(got.loc[ids[:4], "cohort"], [2, 2, np.nan, 2])
    np.testing.assert_array_equal(got.loc[ids[:4], "cohort_2"], [4, np.nan, np.nan, 4])
    np.testing.assert_array_equal(got.loc[ids[:4], "cohort_3"], [4, np.nan, np.nan, np.nan])
    assert got.loc[ids[:4], "exposures"].tolist() == [3, 1, 0, 2]


def _pythia_files(tmp_path, rows):
    (tmp_path / "pile").mkdir(exist_ok=True)
    write_indexed_dataset(tmp_path / "pile" / "document", rows)
    np.save(tmp_path / "validation.npy",
            np.random.default_rng(1).integers(1, 96, size=(3, LENGTH)))


def _pythia(**extra):
    keys = {"kind": '"pythia"', "data": '"pile/document"', "validation": '"validation.npy"',
            "seed": 5, "batches_per_cohort": 2, "sequences_per_batch": 3, "n_validation": 2,
            "batch_size": 3, "steps_per_checkpoint": 2, **extra}
    return [f"{k} = {v}" for k, v in keys.items()]


def test_pythia_search_finds_repeated_sequences(three_checkpoints, tmp_path, capsys):
    rows = np.random.default_rng(2).integers(1, 96, size=(14, LENGTH))
    rows[9] = rows[1]   # a repeat within the checkpoints: steps 1 and 4
    rows[13] = rows[4]  # a repeat after the last checkpoint (step 5): outside the search
    _pythia_files(tmp_path, rows)
    config = study_config(tmp_path, three_checkpoints, _pythia(second_epoch='"search"'))
    got = _units(_score(config, tmp_path / "o", capsys))
    assert sorted(got.index[got.index >= 0]) == list(range(12))
    # row 9's content was first trained at row 1 (step 1): its first exposure is cohort 2
    assert got.loc[[1, 9], ["cohort", "cohort_2"]].to_numpy().tolist() == [[2, 4], [2, 4]]
    assert got.loc[4, "exposures"] == 1 and np.isnan(got.loc[4, "cohort_2"])
    others = [i for i in range(12) if i not in (1, 9)]
    assert (got.loc[others, "exposures"] == 1).all()
    assert got.loc[got.index < 0, "cohort"].isna().all()


def test_pythia_windows_find_repacked_content(three_checkpoints, tmp_path, capsys):
    rows = np.random.default_rng(2).integers(1, 96, size=(14, LENGTH))
    rows[9, 5:17] = rows[1, 2:14]  # 12 tokens of row 1 re-packed at offset 5 of row 9
    rows[10, 0:6] = rows[4, 0:6]   # 6 tokens of row 4: fewer than min_tokens
    _pythia_files(tmp_path, rows)
    config = study_config(tmp_path, three_checkpoints, _pythia(
        second_epoch='"windows"', window=5, window_stride=1, min_tokens=8))
    got = _units(_score(config, tmp_path / "o", capsys))
    assert sorted(got.index[got.index >= 0]) == list(range(12))
    # rows 1 (step 1) and 9 (step 4) share 12 tokens: each is an exposure of the other
    assert got.loc[[1, 9], ["cohort", "cohort_2"]].to_numpy().tolist() == [[2, 4], [2, 4]]
    assert got.loc[[4, 10], "exposures"].tolist() == [1, 1]
    others = [i for i in range(12) if i not in (1, 9)]
    assert (got.loc[others, "exposures"] == 1).all()
    found = pd.read_parquet(tmp_path / "o" / "exposures.parquet")  # what the search found
    assert found.loc[found["unit"] == 1, ["position", "tokens"]].values.tolist() == [
        [1, LENGTH], [9, 12]]
    assert (found["searched"] == "rows 0 .. 11").all()  # up to the last checkpoint (step 4)
    capsys.readouterr()
    bad = study_config(tmp_path, three_checkpoints, _pythia(second_epoch='"search"', window=5))
    assert main(["score", "--config", bad, "--out", str(tmp_path / "o2")]) == 2
    assert "window goes with second_epoch = 'windows'" in capsys.readouterr().err


def test_pythia_offset_route_is_checked(three_checkpoints, tmp_path, capsys):
    first = np.random.default_rng(4).integers(1, 96, size=(6, LENGTH))
    _pythia_files(tmp_path, np.concatenate([first, first, first[:2]]))  # rows 6.. replay 0..
    config = study_config(tmp_path, three_checkpoints,
                          _pythia(second_epoch='"offset"', epoch_sequences=6, cohorts="[2]",
                                  batches_per_cohort=2))
    got = _units(_score(config, tmp_path / "o", capsys))
    train = got[got.index >= 0]
    assert sorted(train.index) == list(range(6))
    # row i (steps 1-2, cohort 2) repeats at row i + 6 (steps 3-4, cohort 4)
    assert (train["cohort"] == 2).all() and (train["cohort_2"] == 4).all()
    shuffled = np.concatenate([first, first[::-1], first[:2]])
    _pythia_files(tmp_path, shuffled)
    capsys.readouterr()
    out = tmp_path / "o2"
    assert main(["score", "--config", config, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "second_epoch = 'offset': 6 of 6 sampled rows differ" in err
