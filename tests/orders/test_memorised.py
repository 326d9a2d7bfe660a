"""Memorised-index lists (pythia-memorized-evals' layout) joined with a training order: the
binary panel of every sequence x checkpoint as pattern counts, its fit equal to the fit of the
dense panel, and the files that are refused by name."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import didmem
from didmem.cli import main
from didmem.errors import DidmemWarning, MissingFileError, PanelError, ParameterError
from didmem.orders import find_memorised_lists, read_memorised
from didmem.panel.patterns import count_patterns, pattern_bits

B, STEPS = 4, 60  # a small Pythia-like order: 240 sequences, sequence i trained at i // 4 + 1
CHECKPOINTS = np.array([10, 20, 30, 40, 50])  # sequences trained after 50: never treated


def _dense(seed=0, n=B * STEPS, times=CHECKPOINTS, cohorts=None):
    """A dense 0/1 panel (n x T) whose memorisation rises after training, and its cohorts."""
    rng = np.random.default_rng(seed)
    if cohorts is None:
        step = np.arange(n) // B + 1
        pos = np.searchsorted(times, step)
        cohorts = np.where(pos < times.size, times[np.minimum(pos, times.size - 1)], np.inf)
    p = np.where(times[None, :] >= cohorts[:, None], 0.45, 0.15)
    return rng.random((n, times.size)) < p, cohorts


def _write_split(path, index, shards=1, suffix=""):
    """One split's parquet files as the dataset has them: index, 64 tokens, pandas' index."""
    path.parent.mkdir(parents=True, exist_ok=True)
    files = []
    for i, part in enumerate(np.array_split(np.asarray(index, dtype=np.int64), shards)):
        tokens = pa.array([[int(j) % 50_000] * 64 for j in part], type=pa.list_(pa.int64()))
        table = pa.table({"index": part, "tokens": tokens, "__index_level_0__": part})
        name = f"{path.name}-{i:05d}-of-{shards:05d}{suffix}.parquet"
        pq.write_table(table, path.parent / name)
        files.append(path.parent / name)
    return files


def _write_lists(root, dense, model="deduped.70m", times=CHECKPOINTS, final=None):
    """The lists of one model in the repository's layout (data/{split}-0000i-of-0000n.parquet);
    a ``final`` column index is written as the split without a step (step 143,000)."""
    for t, step in enumerate(times):
        split = model if t == final else f"{model}.{step}"
        _write_split(root / "data" / split, np.flatnonzero(dense[:, t]), shards=1 + t % 2,
                     suffix="-0a1b2c" if t % 3 == 0 else "")
    return root


def _long(dense, cohorts, times=CHECKPOINTS):
    n = dense.shape[0]
    return pd.DataFrame({"unit": np.repeat(np.arange(n), times.size),
                         "time": np.tile(times.astype(float), n),
                         "cohort": np.repeat(cohorts, times.size),
                         "memorised": dense.ravel().astype(float)})


def _quiet_fit(estimator, data):
    with warnings.catch_warnings():  # R did's drop of the first cohort, said once per fit
        warnings.simplefilter("ignore", didmem.errors.DataDroppedWarning)
        return estimator.fit(data)


@pytest.mark.parametrize("control", ["never_treated", "not_yet_treated"])
def test_lists_give_the_dense_panels_fit(tmp_path, control):
    """Estimates, SEs, Welch df and the pre-test from the lists equal the in-memory fit of the
    dense 0/1 panel of every sequence x checkpoint (its zeros written), to 1e-9."""
    dense, cohorts = _dense()
    root = _write_lists(tmp_path / "evals", dense)
    patterns = read_memorised(root, batch_size=B, sequences=B * STEPS)
    assert patterns.n_units == B * STEPS and patterns.outcome == "memorised"
    np.testing.assert_array_equal(patterns.times, CHECKPOINTS)
    est = didmem.DiDEstimator(control_group=control, n_bootstrap=0)
    got = _quiet_fit(est, patterns).to_frame()
    ref = _quiet_fit(est, didmem.Panel(_long(dense, cohorts), unit="unit", time="time",
                                       cohort="cohort", outcome="memorised")).to_frame()
    assert got[["cohort", "time"]].equals(ref[["cohort", "time"]])
    for col in ("estimate", "std_error", "ci_lower", "ci_upper"):
        np.testing.assert_allclose(got[col], ref[col], rtol=1e-9, atol=1e-12, err_msg=col)
    g = _quiet_fit(est, patterns).pretrend_test()
    r = _quiet_fit(est, didmem.Panel(_long(dense, cohorts), unit="unit", time="time",
                                     cohort="cohort", outcome="memorised")).pretrend_test()
    assert g.statistic == pytest.approx(r.statistic, rel=1e-9)


def test_pattern_counts_are_the_dense_panels(tmp_path):
    """The counts of each (cohort, pattern) are those of the dense panel's rows, and the
    repository's and the hub's converted layouts read alike (the final split: step 143,000)."""
    times = np.append(CHECKPOINTS, 143_000)
    dense, cohorts = _dense(seed=1, times=times)
    repo = _write_lists(tmp_path / "repo", dense, times=times, final=times.size - 1)
    converted = tmp_path / "hub" / "default"
    for t, step in enumerate(times):
        split = "deduped.70m" if step == 143_000 else f"deduped.70m.{step}"
        (converted / split).mkdir(parents=True)
        for i, f in enumerate(sorted((repo / "data").glob(f"{split}-*.parquet"))):
            (converted / split / f"{i:04d}.parquet").write_bytes(f.read_bytes())
    (converted.parent / "README.md").write_text("the card")  # other files are left alone
    a = read_memorised(repo, batch_size=B, sequences=B * STEPS)
    b = read_memorised(tmp_path / "hub", batch_size=B, sequences=B * STEPS)
    np.testing.assert_array_equal(a.times, times)
    frame = pd.DataFrame(dense.astype(np.uint8), columns=[str(t) for t in times])
    frame.insert(0, "cohort", cohorts)
    ref = frame.groupby(list(frame.columns)).size().reset_index(name="count")
    for got in (a.frame(), b.frame()):
        got.columns = [str(c) for c in got.columns]
        pd.testing.assert_frame_equal(got, ref, check_dtype=False)


def test_any_order_of_steps(tmp_path):
    """With ``steps`` (any order, here shuffled), cohorts follow each sequence's step; with
    Pythia's steps the panel equals the batch order's."""
    rng = np.random.default_rng(4)
    steps = rng.permutation(np.arange(B * STEPS) // B + 1)
    pos = np.searchsorted(CHECKPOINTS, steps)
    cohorts = np.where(pos < CHECKPOINTS.size, CHECKPOINTS[np.minimum(pos, 4)], np.inf)
    dense, _ = _dense(seed=2, cohorts=cohorts)
    root = _write_lists(tmp_path / "evals", dense)
    got = read_memorised(root, steps=steps)
    mapping = {int(s): sorted((root / "data").glob(f"deduped.70m.{s}-*")) for s in CHECKPOINTS}
    same = read_memorised(mapping, steps=steps)
    est = didmem.DiDEstimator(n_bootstrap=0)
    ref = _quiet_fit(est, didmem.Panel(_long(dense, cohorts), unit="unit", time="time",
                                       cohort="cohort", outcome="memorised")).to_frame()
    for data in (got, same):
        np.testing.assert_allclose(_quiet_fit(est, data).to_frame()["estimate"],
                                   ref["estimate"], rtol=1e-9, atol=1e-12)
    pythia = read_memorised(root, steps=np.arange(B * STEPS) // B + 1).frame()
    pd.testing.assert_frame_equal(pythia, read_memorised(root, batch_size=B,
                                                         sequences=B * STEPS).frame())


def test_count_patterns_sorting_path_equals_the_bincount_path():
    """Many cohorts x times (keys past 2**24) are counted by sorting; same counts."""
    rng = np.random.default_rng(5)
    n, n_t = 3000, 20
    bits = pattern_bits(n, n_t)
    bits[:] = rng.integers(0, 4, n)  # few distinct patterns
    codes = rng.integers(0, 40, n)
    values = np.arange(40.0)
    wide = count_patterns(np.arange(n_t), bits, lambda lo, hi: codes[lo:hi], values)
    keys = codes.astype(np.int64) * 4 + bits
    uniq, counts = np.unique(keys, return_counts=True)
    np.testing.assert_array_equal(wide.counts, counts)
    np.testing.assert_array_equal(wide.cohorts, values[uniq // 4])
    np.testing.assert_array_equal(wide.patterns[:, :2] @ np.array([1, 2]), uniq % 4)


def test_the_cli_fits_the_lists(tmp_path, capsys):
    dense, _ = _dense(seed=3)
    root = _write_lists(tmp_path / "evals", dense)
    out = tmp_path / "r.parquet"
    args = ["estimate", str(root), "--memorised", "--batch-size", str(B), "--sequences",
            str(B * STEPS), "--n-bootstrap", "0", "--out", str(out)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", didmem.errors.DataDroppedWarning)
        assert main(args) == 0
    ref = _quiet_fit(didmem.DiDEstimator(n_bootstrap=0, outcome="memorised"),
                     read_memorised(root, batch_size=B, sequences=B * STEPS)).to_frame()
    got = didmem.load_result(out).to_frame()
    np.testing.assert_allclose(got["estimate"], ref["estimate"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["std_error"], ref["std_error"], rtol=1e-9, atol=1e-12)
    assert main(["estimate", str(root), "--sequences", "5", "--outcome", "y",
                 "--out", str(out)]) == 2
    assert "--memorised only" in capsys.readouterr().err
    # the one fit driver (issue 46) serves the difference estimator from the lists' moments
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", didmem.errors.DataDroppedWarning)
        assert main([*args, "--estimator", "difference"]) == 0
    ref = _quiet_fit(didmem.DifferenceEstimator(n_bootstrap=0, outcome="memorised"),
                     read_memorised(root, batch_size=B, sequences=B * STEPS)).to_frame()
    got = didmem.load_result(out).to_frame()
    np.testing.assert_allclose(got["estimate"], ref["estimate"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["std_error"], ref["std_error"], rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------------- bad input
@pytest.fixture()
def lists(tmp_path):
    dense, _ = _dense(seed=6)
    return _write_lists(tmp_path / "evals", dense)


def _read(root):
    return read_memorised(root, batch_size=B, sequences=B * STEPS)


def test_another_schema_is_named(lists):
    bad = next((lists / "data").glob("deduped.70m.20-*"))
    pq.write_table(pa.table({"idx": [1, 2]}), bad)
    with pytest.raises(PanelError, match=rf"{bad.name}.*no 'index' column.*'idx'"):
        _read(lists)
    pq.write_table(pa.table({"index": [1.5, 2.0], "tokens": [[1], [2]]}), bad)
    with pytest.raises(PanelError, match=rf"{bad.name}.*'index' holds double"):
        _read(lists)


def test_truncated_and_non_parquet_files_are_named(lists):
    bad = next((lists / "data").glob("deduped.70m.30-*"))
    bad.write_bytes(bad.read_bytes()[:-200])
    with pytest.raises(PanelError, match=rf"{bad.name}.*not a parquet file, or cut short"):
        _read(lists)
    bad.write_text("index,tokens\n1,2\n")
    with pytest.raises(PanelError, match=rf"{bad.name}.*not a parquet file"):
        _read(lists)


def test_an_index_outside_the_order_is_named(lists):
    bad = next((lists / "data").glob("deduped.70m.40-*"))
    pq.write_table(pa.table({"index": np.array([3, B * STEPS + 7], dtype=np.int64)}), bad)
    with pytest.raises(PanelError, match=rf"{bad.name}: 1 indices lie outside the training "
                                         rf"order's 240 sequences.*{B * STEPS + 7} at row 1"):
        _read(lists)


def test_a_sequence_listed_twice_at_a_checkpoint_is_named(lists):
    shards = sorted((lists / "data").glob("deduped.70m.20-*"))
    assert len(shards) == 2
    first = pq.read_table(shards[0]).column("index").to_numpy()
    extra = pa.table({"index": np.append(pq.read_table(shards[1]).column("index").to_numpy(),
                                         first[0])})
    pq.write_table(extra, shards[1])
    with pytest.raises(PanelError, match=rf"Sequence {first[0]} is listed twice at step 20.*"
                                         rf"{shards[0].name}.*{shards[1].name}"):
        _read(lists)


def test_names_models_and_folders(tmp_path, lists):
    with pytest.raises(MissingFileError, match="No folder"):
        _read(tmp_path / "nothing")
    (lists / "data" / "notes.parquet").write_bytes(b"x")
    with pytest.raises(PanelError, match="notes.parquet: not named as a memorised-index list"):
        _read(lists)
    (lists / "data" / "notes.parquet").unlink()
    dense, _ = _dense(seed=7)
    _write_lists(lists, dense, model="duped.1.4b")
    with pytest.raises(ParameterError, match="2 models.*'deduped.70m', 'duped.1.4b'"):
        _read(lists)
    with pytest.raises(ParameterError, match="no list of model 'deduped.12b'"):
        read_memorised(lists, model="deduped.12b", batch_size=B, sequences=B * STEPS)
    found = find_memorised_lists(lists, model="duped.1.4b")
    assert list(found) == list(CHECKPOINTS) and [len(f) for f in found.values()] == [1, 2] * 2 + [1]


def test_lists_of_only_trained_sequences_are_flagged(tmp_path):
    """EleutherAI's intermediate lists evaluated the sequences trained by then only: a list
    without any later sequence, where its rate says it should have many, is warned about."""
    n = 40 * 1000
    dense, cohorts = _dense(seed=8, n=n, cohorts=None)
    step = np.arange(n) // 1000 + 1
    dense[step[:, None] > CHECKPOINTS[None, :]] = False  # not evaluated: absent
    root = _write_lists(tmp_path / "evals", dense)
    with pytest.warns(DidmemWarning) as record:
        read_memorised(root, batch_size=1000, sequences=n)
    said = [str(w.message) for w in record]
    assert len(said) == 3  # steps 10, 20, 30; after step 40 no sequence is left to train
    assert said[0].startswith("The list at step 10")
    assert "names no sequence trained after step 10, of 30,000" in said[0]
    dense[-5:, 0] = True  # a list that names later sequences too is taken as evaluating all
    with pytest.warns(DidmemWarning) as record:
        read_memorised(_write_lists(tmp_path / "other", dense), batch_size=1000, sequences=n)
    assert [str(w.message)[:19] for w in record] == ["The list at step 20",
                                                     "The list at step 30"]


@pytest.mark.parametrize("lists", [5, None, [1, 2]])
def test_lists_of_another_type_are_named(lists):
    """Neither a folder nor a mapping: a ParameterError naming the argument, not a TypeError."""
    with pytest.raises(ParameterError, match="'lists' argument of read_memorised"):
        didmem.orders.read_memorised(lists)


def test_a_uint64_index_beyond_int64_is_named_with_its_value(lists):
    """2**64 - 1 was cast to int64 first and reported as "-1 at row 0"."""
    bad = next((lists / "data").glob("deduped.70m.40-*"))
    huge = np.array([np.iinfo(np.uint64).max, 3], dtype=np.uint64)
    pq.write_table(pa.table({"index": huge}), bad)
    with pytest.raises(PanelError, match=rf"{bad.name}: 1 indices lie outside the training "
                                         r"order's 240 sequences.*18446744073709551615 at row 0"):
        _read(lists)
