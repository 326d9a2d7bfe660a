"""OLMo's global_indices.npy (raw uint32), token memmaps and checkpoint names, in their exact layout."""

from __future__ import annotations

import numpy as np
import pytest

from didmem.orders.exposures import exposure_cohorts
from didmem.orders.olmo import (OlmoTokens, olmo_exposures, parse_olmo_checkpoint,
                                  read_global_indices)
from didmem.errors import ParameterError


def _write_raw(path, array, dtype):
    """As OLMo writes them: np.memmap(mode="w+"), no .npy header."""
    mm = np.memmap(path, dtype=dtype, mode="w+", shape=(len(array),))
    mm[:] = array
    mm.flush()
    del mm
    return path


@pytest.fixture
def olmo_files(tmp_path):
    rng = np.random.default_rng(0)
    seq_len, n = 8, 12
    tokens = rng.integers(0, 50_000, size=(n, seq_len))
    # two token files: 5 and 7 instances, the second with a 3-token tail that is dropped
    f1 = _write_raw(tmp_path / "part-0.npy", tokens[:5].ravel(), np.uint16)
    f2 = _write_raw(tmp_path / "part-1.npy",
                    np.concatenate([tokens[5:].ravel(), [1, 2, 3]]), np.uint16)
    # two epochs over 12 instances, batch 4: 24 positions = 6 steps
    order = np.concatenate([rng.permutation(n), rng.permutation(n)]).astype(np.uint32)
    gi = _write_raw(tmp_path / "global_indices.npy", order, np.uint32)
    return dict(tokens=tokens, paths=[f1, f2], order=order, gi=gi, seq_len=seq_len)


def test_tokens_are_read_like_olmo(olmo_files):
    data = OlmoTokens(olmo_files["paths"], olmo_files["seq_len"], "uint16")
    assert len(data) == 12
    for i in range(12):
        np.testing.assert_array_equal(data[i], olmo_files["tokens"][i])
    with pytest.raises(ParameterError, match="OLMo instance 12 is past the data: the token "
                                             "files hold 12 instances of 8 tokens"):
        data[12]


def test_exposures_steps_and_cohorts(olmo_files):
    order = read_global_indices(olmo_files["gi"], batch_size=4)
    np.testing.assert_array_equal(order, olmo_files["order"])
    wanted = [3, 7]
    exp = olmo_exposures(order, wanted, 4, n_instances=12)
    for unit in wanted:
        positions = np.flatnonzero(olmo_files["order"] == unit)
        rows = exp[exp["unit"] == unit]
        np.testing.assert_array_equal(rows["position"], positions)
        np.testing.assert_array_equal(rows["step"], positions // 4 + 1)  # step s: (s-1)B..sB-1
    panel = exposure_cohorts(exp, [3, 7, -1], checkpoints=[2, 4, 6])
    first = exp.groupby("unit")["step"].min()
    second = exp.groupby("unit")["step"].max()
    for unit in wanted:
        row = panel[panel["unit"] == unit].iloc[0]
        assert row["cohort"] == [2, 4, 6][np.searchsorted([2, 4, 6], first[unit])]
        assert row["cohort_2"] == [2, 4, 6][np.searchsorted([2, 4, 6], second[unit])]
    assert panel.iloc[2][["cohort", "cohort_2"]].isna().all()


@pytest.mark.parametrize("write, batch, message", [
    (lambda p: np.save(p, np.arange(8, dtype=np.uint32)), 4, "has a .npy header"),
    (lambda p: p.write_bytes(b"\x00" * 10), 1, "has 10 bytes, not a positive multiple of 4"),
    (lambda p: _write_raw(p, np.arange(3), np.uint32), 4,
     "has 3 entries, fewer than one batch of batch_size = 4"),
])
def test_bad_global_indices(tmp_path, write, batch, message):
    path = tmp_path / "global_indices.npy"
    write(path)
    with pytest.raises(ParameterError, match=f"global_indices '.*global_indices.npy' {message}"):
        read_global_indices(path, batch)


def test_index_past_the_data(olmo_files, tmp_path):
    path = _write_raw(tmp_path / "gi.npy", np.array([0, 1, 99, 2], np.uint32), np.uint32)
    with pytest.raises(ParameterError, match=r"gi.npy: position 2 holds instance 99, past the "
                                             r"12 instances"):
        olmo_exposures(read_global_indices(path, 2), [0], 2, n_instances=12,
                       where=str(path))


def test_token_files_with_wrong_dtype_or_header(tmp_path):
    odd = tmp_path / "odd.npy"
    odd.write_bytes(b"\x00" * 7)
    with pytest.raises(ParameterError, match="odd.npy' has 7 bytes, not a multiple of 2"):
        OlmoTokens([odd], 4, "uint16")
    saved = tmp_path / "saved.npy"
    np.save(saved, np.arange(8, dtype=np.uint16))
    with pytest.raises(ParameterError, match="saved.npy' has a .npy header"):
        OlmoTokens([saved], 4, "uint16")
    with pytest.raises(ParameterError, match="dtype must be one of uint16, uint32, uint64"):
        OlmoTokens([saved], 4, "int8")


@pytest.mark.parametrize("name, stage, ingredient, step, tokens", [
    ("step1000-tokens4B", 1, None, 1000, 4),
    ("stage1-step928646-tokens3896B", 1, None, 928646, 3896),
    ("stage2-ingredient3-step11931-tokens50B", 2, 3, 11931, 50),
    ("step557000-unsharded", 1, None, 557000, None),
])
def test_checkpoint_names(name, stage, ingredient, step, tokens):
    parsed = parse_olmo_checkpoint(name)
    assert (parsed.stage, parsed.ingredient, parsed.step, parsed.tokens_billions) == (
        stage, ingredient, step, tokens)


@pytest.mark.parametrize("name", ["main", "step1000-tokens", "stage1-ingredient1-step5-tokens1B",
                                  "stage3-step1-tokens1B"])
def test_bad_checkpoint_names(name):
    with pytest.raises(ParameterError, match="is not an OLMo checkpoint name"):
        parse_olmo_checkpoint(name)
