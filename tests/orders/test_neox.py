"""GPT-NeoX index maps (PolyPythias' data orders) against a plain oracle of GPT-NeoX's reading.

The oracle below is written from the behaviour of GPT-NeoX v1.0 (commit d36f623, the one
Pythia was trained with), ``megatron/data/gpt2_dataset.py``: ``GPT2Dataset.__getitem__``
returns, for training index ``j``, sample ``s = shuffle_idx[j]``: the tokens of the
documents ``doc_idx[sample_idx[s, 0]] .. doc_idx[sample_idx[s + 1, 0]]`` read one after the
other, from offset ``sample_idx[s, 1]`` of the first to offset ``sample_idx[s + 1, 1]`` of
the last, both included; ``_build_sample_idx`` walks the documents so that each sample
holds ``L + 1`` tokens and the next starts at its last token, skipping empty documents.
"""

import numpy as np
import pandas as pd
import pytest

from didmem.errors import DidmemError, ParameterError
from didmem.orders import write_indexed_dataset
from didmem.orders.neox import (build_index_maps, index_map_files, read_index_maps,
                                run_cohorts, run_exposures, sample_starts, sequence_spans,
                                span_exposures, write_index_maps)

L = 16  # sequence length of the tiny maps


# ---------------------------------------------------------------- the oracle
def oracle_sample_idx(sizes, doc_idx, seq_length, n_samples):
    """Walk the documents token by token: each sample advances L tokens from the last."""
    rows = [(0, 0)]
    p, o = 0, 0
    while sizes[doc_idx[p]] == 0:
        p += 1
    for _ in range(n_samples):
        need = seq_length
        while need:
            left = sizes[doc_idx[p]] - 1 - o  # tokens after o in this document
            if need <= left:
                o, need = o + need, 0
            else:
                need -= left + 1
                p, o = p + 1, 0
                while sizes[doc_idx[p]] == 0:
                    p += 1
        rows.append((p, o))
    rows[0] = (rows[0][0], 0)
    return np.asarray(rows, dtype=np.int64)


def oracle_getitem(docs, doc_idx, sample_idx, shuffle_idx, j):
    """Tokens of the j-th training sequence, as GPT2Dataset.__getitem__ reads them."""
    s = int(shuffle_idx[j])
    (pf, of), (pl, ol) = sample_idx[s], sample_idx[s + 1]
    if pf == pl:
        return docs[doc_idx[pf]][of:ol + 1]
    parts = [docs[doc_idx[pf]][of:]]
    parts += [docs[doc_idx[i]] for i in range(pf + 1, pl)]
    parts.append(docs[doc_idx[pl]][:ol + 1])
    return np.concatenate(parts)


def oracle_exposures(docs, maps, spans, batch_size):
    """Brute force: the training sequences whose pieces hold each span whole."""
    pieces = [p for p in oracle_pieces(docs, maps) if p[0] < maps.trained]  # asked for
    rows = []
    for unit, (d, start, end) in enumerate(spans):
        for j, doc, lo, hi in pieces:
            if doc == d and lo <= start and end <= hi:
                rows.append((unit, j, j // batch_size + 1))
    return pd.DataFrame(rows, columns=["unit", "position", "step"])


def oracle_pieces(docs, maps):
    """(j, document, start, end) of every piece of every training sequence."""
    sizes = np.array([len(d) for d in docs])
    out = []
    for j in range(len(maps)):
        s = int(maps.shuffle_idx[j])
        (pf, of), (pl, ol) = maps.sample_idx[s], maps.sample_idx[s + 1]
        for p in range(pf, pl + 1):
            doc = int(maps.doc_idx[p])
            lo = of if p == pf else 0
            hi = ol + 1 if p == pl else sizes[doc]
            if hi > lo:
                out.append((j, doc, lo, hi))
    return out


# ---------------------------------------------------------------- fixtures
def _documents(seed, n=40, empty=True):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 3 * L, n)
    if empty:
        sizes[[3, 17]] = 0  # indexed datasets may hold empty documents
    return [rng.integers(0, 500, s) for s in sizes]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("neox")
    docs = _documents(0)
    data = write_indexed_dataset(root / "pile", docs, dtype=np.uint16)
    total = sum(len(d) for d in docs)
    n_samples = (total - 1) // L + 20  # more than one epoch: documents seen twice
    runs = {seed: write_index_maps(root / "pile", data.sizes, n_samples, L, seed)
            for seed in (1234, 7)}
    return root, docs, data, runs


# ---------------------------------------------------------------- building and reading
@pytest.mark.parametrize("chunk", [None, 5])
@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("seq_length", [2, 5, 16])
def test_built_maps_follow_gpt_neox(seed, seq_length, chunk, monkeypatch):
    if chunk is not None:  # documents in chunks smaller than the maps
        monkeypatch.setattr("didmem.orders.neox._CHUNK", chunk)
    docs = _documents(seed)
    sizes = np.array([len(d) for d in docs])
    n_samples = 50
    doc_idx, sample_idx, shuffle_idx = build_index_maps(sizes, n_samples, seq_length, seed)
    assert doc_idx.dtype == np.int32 and sample_idx.dtype == np.int32
    assert shuffle_idx.dtype == np.uint32
    per_epoch = sizes.sum()
    epochs = next(e for e in range(1, 100) if (e * per_epoch - 1) // seq_length >= n_samples)
    n = (epochs * per_epoch - 1) // seq_length
    # doc_idx: every document once per epoch, shuffled by RandomState(seed), then shuffle_idx
    rng = np.random.RandomState(seed)
    expected = np.tile(np.arange(sizes.size, dtype=np.int32), epochs)
    rng.shuffle(expected)
    np.testing.assert_array_equal(doc_idx, expected)
    np.testing.assert_array_equal(sample_idx, oracle_sample_idx(sizes, doc_idx, seq_length, n))
    order = np.arange(n, dtype=np.uint32)
    rng.shuffle(order)
    np.testing.assert_array_equal(shuffle_idx, order)


def test_written_maps_have_gpt_neox_names(corpus):
    root, _, _, runs = corpus
    maps = runs[1234]
    assert maps.seed == 1234 and maps.seq_length == L
    assert maps.trained < len(maps)  # the samples of whole epochs, more than asked for
    assert f"_{maps.trained}ns_" in maps.files["doc_idx"].name
    name = maps.files["doc_idx"].name
    assert name.startswith("pile_train_0_indexmap_") and name.endswith("_16sl_1234s_doc_idx.npy")
    for path in (maps.label, maps.files["shuffle_idx"]):
        assert index_map_files(path) == maps.files
    assert index_map_files(root, seed=7) == runs[7].files
    with pytest.raises(ParameterError, match="several runs"):
        index_map_files(root)
    with pytest.raises(ParameterError, match="no GPT-NeoX index maps of seed 99"):
        index_map_files(root, seed=99)


def test_every_training_sequence_is_what_gpt_neox_reads(corpus):
    _, docs, data, runs = corpus
    maps = runs[1234]
    pieces = sequence_spans(maps, data.sizes, np.arange(len(maps)))
    for j, part in pieces.groupby("position"):
        tokens = np.concatenate([data[int(r.document)][r.start:r.end]
                                 for r in part.itertuples()])
        want = oracle_getitem(docs, maps.doc_idx, maps.sample_idx, maps.shuffle_idx, j)
        np.testing.assert_array_equal(tokens, want)
        assert tokens.size == L + 1
    assert pieces["position"].nunique() == len(maps)
    starts = sample_starts(maps, data.sizes)
    np.testing.assert_array_equal(starts, np.arange(maps.n_samples + 1) * L)


def _spans(docs, rng, n=60):
    rows = []
    while len(rows) < n:
        d = int(rng.integers(len(docs)))
        if len(docs[d]) < 3:
            continue
        start = int(rng.integers(0, len(docs[d]) - 2))
        end = int(rng.integers(start + 2, min(len(docs[d]), start + L) + 1))
        rows.append((d, start, end))
    return rows


@pytest.mark.parametrize("chunk", [None, 7])
def test_span_exposures_match_the_oracle(corpus, monkeypatch, chunk):
    if chunk is not None:  # the chunked passes, with chunks smaller than the maps
        monkeypatch.setattr("didmem.orders.neox._CHUNK", chunk)
    _, docs, data, runs = corpus
    spans = _spans(docs, np.random.default_rng(1))
    for maps in runs.values():
        got = span_exposures(maps, data.sizes, spans, batch_size=4)
        want = oracle_exposures(docs, maps, spans, 4).sort_values(
            ["unit", "position"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False)
        # by content: the exposed sequence holds the span's tokens
        for row in got.itertuples():
            d, start, end = spans[row.unit]
            seq = oracle_getitem(docs, maps.doc_idx, maps.sample_idx, maps.shuffle_idx,
                                 row.position)
            window = np.lib.stride_tricks.sliding_window_view(seq, end - start)
            assert (window == docs[d][start:end]).all(axis=1).any()
        same = span_exposures(maps, data.sizes, spans, 4, positions=maps.training_positions())
        pd.testing.assert_frame_equal(same, got)


def test_whole_documents_as_instances(corpus):
    _, docs, data, runs = corpus
    maps = runs[7]
    short = [d for d in range(len(docs)) if 2 <= len(docs[d]) <= L // 2]
    got = span_exposures(maps, data.sizes, short, batch_size=4)
    spans = [(d, 0, len(docs[d])) for d in short]
    want = oracle_exposures(docs, maps, spans, 4).sort_values(["unit", "position"])
    pd.testing.assert_frame_equal(got, want.reset_index(drop=True), check_dtype=False)
    frame = span_exposures(maps, data.sizes, pd.DataFrame({"document": short}), 4)
    pd.testing.assert_frame_equal(frame, got)


# ---------------------------------------------------------------- several runs
def test_run_exposures_and_cohorts(corpus):
    _, docs, data, runs = corpus
    spans = _spans(docs, np.random.default_rng(2), n=30)
    table = run_exposures({"seed1234": runs[1234], "seed7": runs[7].label}, data.sizes,
                          spans, batch_size=4)
    assert table.columns.tolist() == ["run", "unit", "position", "step"]
    for name, maps in (("seed1234", runs[1234]), ("seed7", runs[7])):
        mine = table[table["run"] == name].drop(columns="run").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, span_exposures(maps, data.sizes, spans, 4))
    last = int(table["step"].max())
    # keep the spans trained whole in both runs
    both = table.groupby("unit")["run"].nunique()
    keep = both[both == 2].index
    table = table[table["unit"].isin(keep)]
    table = table.assign(unit=table["unit"].map({u: i for i, u in enumerate(keep)}))
    cohorts = run_cohorts(table, len(keep), range(0, last + 5, 5), runs=["seed1234", "seed7"])
    assert cohorts.columns[:3].tolist() == ["run", "unit", "cohort"]
    assert "cohort_2" in cohorts and (cohorts["exposures"] >= 1).all()
    first = table.groupby(["run", "unit"])["step"].min()
    want = np.ceil(first / 5) * 5
    got = cohorts.set_index(["run", "unit"])["cohort"]
    np.testing.assert_array_equal(got.reindex(want.index).to_numpy(), want.to_numpy())


def test_an_instance_absent_from_one_run_is_named(corpus):
    _, docs, data, runs = corpus
    spans = _spans(docs, np.random.default_rng(3), n=80)
    table = run_exposures({"a": runs[1234], "b": runs[7]}, data.sizes, spans, 4)
    with pytest.raises(ParameterError, match=r"instance \d+ is absent from run '(a|b)''s order"):
        run_cohorts(table, len(spans), range(0, 1000, 5))
    kept = run_cohorts(table, len(spans), range(0, 1000, 5), require_all=False)
    assert len(kept) == 2 * len(spans)


def test_a_run_without_exposures_is_kept_and_an_unknown_one_refused(corpus):
    table = pd.DataFrame({"run": ["a"], "unit": [0], "step": [3]})
    out = run_cohorts(table, 1, [0, 5], runs=["a", "b"], require_all=False)
    assert out["run"].tolist() == ["a", "b"] and np.isnan(out["cohort"].iloc[1])
    with pytest.raises(ParameterError, match="absent from run 'b'"):
        run_cohorts(table, 1, [0, 5], runs=["a", "b"])
    with pytest.raises(ParameterError, match="instance 1 is absent from run 'a''s order"):
        run_cohorts(table, 2, [0, 5], runs=["a"])  # trained whole in no run at all
    with pytest.raises(ParameterError, match="run 'c', which is not among the runs"):
        run_cohorts(table.assign(run="c"), 1, [0, 5], runs=["a", "b"])


def test_maps_of_different_lengths_or_dtypes_are_refused(corpus, tmp_path):
    _, docs, data, runs = corpus
    shorter = write_index_maps(tmp_path / "pile", data.sizes, 10, L, 5)  # one epoch, not two
    with pytest.raises(ParameterError, match="different lengths") as info:
        run_exposures({"a": runs[1234], "b": shorter}, data.sizes, [(0, 0, 2)], 4)
    assert "'a'" in str(info.value) and "'b'" in str(info.value)
    files = {k: np.load(v) for k, v in runs[7].files.items()}
    prefix = tmp_path / "wide_train_0_indexmap_1ns_16sl_8s"
    for kind, array in files.items():
        np.save(f"{prefix}_{kind}.npy", array.astype(np.int64) if kind == "shuffle_idx"
                else array)
    with pytest.raises(ParameterError, match="shuffle_idx of different dtypes"):
        run_exposures({"a": runs[1234], "b": prefix}, data.sizes, [(0, 0, 2)], 4)
    with pytest.raises(ParameterError, match="needs at least one run"):
        run_exposures({}, data.sizes, [(0, 0, 2)], 4)


def test_bad_maps_are_refused_naming_the_file(corpus, tmp_path):
    _, _, data, runs = corpus
    good = {k: np.load(v) for k, v in runs[7].files.items()}

    def write(name, **change):
        prefix = tmp_path / name
        for kind, array in {**good, **change}.items():
            np.save(f"{prefix}_{kind}.npy", array)
        return prefix

    cases = [
        (write("float", doc_idx=good["doc_idx"].astype(np.float32)),
         "doc_idx.* must hold integers"),
        (write("flat", sample_idx=good["sample_idx"][:, 0]), "sample_idx.* must have N \\+ 1 rows"),
        (write("short", shuffle_idx=good["shuffle_idx"][:-1]), "GPT-NeoX writes one shuffle entry"),
        (write("range", shuffle_idx=good["shuffle_idx"] + 1), "shuffle_idx.* outside the"),
        (write("back", sample_idx=good["sample_idx"][::-1].copy()), "goes back in doc_idx"),
    ]
    for prefix, message in cases:
        with pytest.raises(ParameterError, match=message) as info:
            read_index_maps(prefix)
        assert str(prefix) in str(info.value)
    with pytest.raises(ParameterError, match="belong to another dataset"):
        read_index_maps(runs[7].label, n_documents=5)
    missing = write("missing")
    (tmp_path / "missing_sample_idx.npy").unlink()
    with pytest.raises(ParameterError, match="missing_sample_idx.npy' does not exist"):
        read_index_maps(missing)
    assert issubclass(ParameterError, DidmemError)


def test_bad_instances_are_refused(corpus):
    _, docs, data, runs = corpus
    maps = runs[7]
    with pytest.raises(ParameterError, match="Document 400 is not in the indexed dataset"):
        span_exposures(maps, data.sizes, [400], 4)
    with pytest.raises(ParameterError, match="fewer than 2 tokens"):
        span_exposures(maps, data.sizes, [(0, 1, 2)], 4)
    with pytest.raises(ParameterError, match="columns document, start and end"):
        span_exposures(maps, data.sizes, pd.DataFrame({"document": [0], "start": [0]}), 4)
    with pytest.raises(ParameterError, match="must be in 0"):
        sequence_spans(maps, data.sizes, [len(maps)])


# ---------------------------------------------------------------- issue 50: data-derived indices
def _rewrite(tmp_path, maps, name, **change):
    """The maps' three files under a new prefix, with some arrays replaced."""
    prefix = tmp_path / name
    for kind, path in maps.files.items():
        np.save(f"{prefix}_{kind}.npy", change.get(kind, np.load(path)))
    return prefix


def test_sizes_shorter_than_the_documents_the_maps_name_are_refused(corpus):
    """The compiled passes gather sizes[doc_idx[p]] without a bounds check: sizes of a cut
    dataset read past the array (sample_starts returned garbage, span_exposures an empty
    table, sequence_spans a raw IndexError)."""
    _, _, data, runs = corpus
    maps = runs[7]
    highest = int(np.max(np.load(maps.files["doc_idx"])))
    cut = np.array(data.sizes[:highest], copy=True)  # one document too few
    first = int(np.argmax(np.load(maps.files["doc_idx"]) >= highest))
    for call in (lambda: sample_starts(maps, cut),
                 lambda: span_exposures(maps, cut, [0], 4),
                 lambda: run_exposures({"a": maps}, cut, [0], 4)):
        with pytest.raises(ParameterError, match=f"names document {highest} at position "
                                                 f"{first}, but doc_sizes has {highest}"):
            call()
    with pytest.raises(ParameterError, match=f"doc_idx .* holds {highest} at position"):
        sequence_spans(maps, cut, np.arange(len(maps)))
    for bad, message in ((data.sizes.astype(float), "1-D array of integers"),
                         (-np.asarray(data.sizes, dtype=np.int64), "negative size")):
        with pytest.raises(ParameterError, match=message):
            sample_starts(maps, bad)
    # the full sizes still work and agree with the pieces of every sequence
    starts = sample_starts(maps, data.sizes)
    assert starts[0] == 0 and np.all(np.diff(starts) == L)


def test_a_shuffle_index_that_is_not_a_permutation_is_refused(corpus, tmp_path):
    """A repeated sample passed read_index_maps(check_values=True), and the sample it
    replaced (an exposure) disappeared from every result."""
    _, _, data, runs = corpus
    maps = runs[7]
    shuffle = np.load(maps.files["shuffle_idx"])
    twice = shuffle.copy()
    twice[5] = shuffle[2]
    prefix = _rewrite(tmp_path, maps, "twice", shuffle_idx=twice)
    with pytest.raises(ParameterError, match=(
            f"not a permutation of the {maps.n_samples} samples: sample {int(shuffle[2])} "
            f"is at positions 2 and 5, and sample {int(shuffle[5])} is at none")) as info:
        read_index_maps(prefix)
    assert str(prefix) in str(info.value)
    read_index_maps(prefix, check_values=False)  # the caller's choice not to check


def test_uint64_entries_beyond_int64_are_reported_with_their_value(corpus, tmp_path):
    """2**64 - 1 was read as -1 ("holds sample -1")."""
    _, _, _, runs = corpus
    shuffle = np.load(runs[7].files["shuffle_idx"]).astype(np.uint64)
    shuffle[3] = np.iinfo(np.uint64).max
    prefix = _rewrite(tmp_path, runs[7], "huge", shuffle_idx=shuffle)
    for check in (True, False):
        with pytest.raises(ParameterError, match="holds 18446744073709551615 at position 3"):
            read_index_maps(prefix, check_values=check)
    rows = np.load(runs[7].files["sample_idx"]).astype(np.uint64)
    rows[4, 1] = np.iinfo(np.uint64).max
    prefix = _rewrite(tmp_path, runs[7], "huge_rows", sample_idx=rows)
    with pytest.raises(ParameterError, match="holds 18446744073709551615 at row 4"):
        read_index_maps(prefix)


def test_unchecked_maps_that_do_not_fit_are_refused_by_the_readers(corpus, tmp_path):
    """Maps opened with check_values=False: the readers check the entries they follow."""
    _, _, data, runs = corpus
    maps = runs[7]
    shuffle = np.load(maps.files["shuffle_idx"])
    out = shuffle.copy()
    out[4] = maps.n_samples + 3
    unchecked = read_index_maps(_rewrite(tmp_path, maps, "out", shuffle_idx=out),
                                check_values=False)
    with pytest.raises(ParameterError, match=f"shuffle_idx .* holds {maps.n_samples + 3} at "
                                             "position 4, which is not a sample"):
        sequence_spans(unchecked, data.sizes, [3, 4])
    rows = np.load(maps.files["sample_idx"])
    rows[-1, 0] = maps.doc_idx.shape[0] + 2
    unchecked = read_index_maps(_rewrite(tmp_path, maps, "far", sample_idx=rows),
                                check_values=False)
    with pytest.raises(ParameterError, match=f"points at position {maps.doc_idx.shape[0] + 2} "
                                             f"of doc_idx at row {maps.n_samples}"):
        sample_starts(unchecked, data.sizes)
    with pytest.raises(ParameterError, match=f"holds {maps.doc_idx.shape[0] + 2} at row "
                                             f"{maps.n_samples}, which is not a position"):
        sequence_spans(unchecked, data.sizes, [int(np.flatnonzero(shuffle == maps.n_samples - 1)[0])])
