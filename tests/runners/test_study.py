"""The study configuration: ``[design]`` tables, ``panel.parquet`` and ``didmem run``.

The whole flow runs on CPU: a tiny GPT-NeoX saved at three checkpoints (local directories
labelled as steps 0, 2 and 4), a pre-shuffled dataset in the ``.bin``/``.idx`` format written
by megatron-core's ``IndexedDatasetBuilder`` (an independent writer; didmem's own helper where
megatron-core is missing) and a validation ``.npy`` file. With ``batch_size = 3`` and
``steps_per_checkpoint = 2`` the first macro-batch holds sequences 0..5 (steps 1, 2) and the
second 4..7 (steps 3, 4), and the sampler takes all of them, so the boundary indices are in
the panel and their cohorts are checked against the rules worked out by hand.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from .conftest import METRICS

import didmem
from didmem.orders.indexed import MMapIndexedDataset, write_indexed_dataset
from didmem.cli import main

pytest.importorskip("torch")
pytest.importorskip("pyarrow")

# Cohorts worked out by hand for sequences 0..11 (B = 3 sequences per step, checkpoints at
# steps 0, 2, 4). didmem: sequence i is trained at step i // 3 + 1 and first seen by the
# checkpoint at or after that step (0..5: steps 1-2, cohort 2; 6..11: steps 3-4, cohort 4).
# The paper's code: batch = ceil(i / 3), cohort = ceil(batch / 2) * 2, i <= 0 validation; it
# differs at the macro-batch boundary i = 6 (batch 2, so cohort 2) and at i = 0.
BY_HAND = {
    "didmem": {0: 2, 1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 4, 7: 4, 8: 4, 9: 4, 10: 4, 11: 4},
    "paper": {0: np.nan, 1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 4, 8: 4, 9: 4, 10: 4, 11: 4},
}
N_DATA, N_VALIDATION, LENGTH = 14, 5, 20


def megatron_builder():
    """megatron-core's IndexedDatasetBuilder, or None where it is not installed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Transformer Engine and Apex are not installed"
            from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    except ImportError:
        return None
    return IndexedDatasetBuilder


def write_with_megatron(prefix, documents, dtype=np.uint16):
    """Write ``documents`` (lists of sequences) with megatron-core's builder."""
    import torch

    builder = megatron_builder()(str(prefix) + ".bin", dtype=dtype)
    for doc in documents:
        for seq in doc:
            builder.add_item(torch.as_tensor(np.asarray(seq, dtype=np.int64)))
        builder.end_document()
    builder.finalize(str(prefix) + ".idx")


WRITERS = ["didmem", pytest.param("megatron", marks=pytest.mark.skipif(
    megatron_builder() is None, reason="megatron-core is not installed (test extra)"))]


@pytest.mark.skipif(megatron_builder() is None, reason="megatron-core is not installed")
@pytest.mark.parametrize("dtype", [np.uint16, np.int32, np.int64])
def test_reader_reads_megatron_indexed_datasets(tmp_path, dtype):
    rng = np.random.default_rng(3)
    documents = [[rng.integers(0, 50_000, size=rng.integers(1, 40)) for _ in range(k)]
                 for k in (1, 3, 2, 1)]
    write_with_megatron(tmp_path / "doc", documents, dtype=dtype)
    ds = MMapIndexedDataset(tmp_path / "doc")
    flat = [s for doc in documents for s in doc]
    assert len(ds) == len(flat) and ds.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(ds.sizes, [s.size for s in flat])
    np.testing.assert_array_equal(ds.doc_idx, np.cumsum([0, 1, 3, 2, 1]))
    for i in np.random.default_rng(0).permutation(len(flat)):
        np.testing.assert_array_equal(ds[np.int64(i)], flat[i])


def write_data(tmp_path, writer):
    rng = np.random.default_rng(11)
    data = rng.integers(1, 96, size=(N_DATA, LENGTH))
    (tmp_path / "pile").mkdir(exist_ok=True)
    if writer == "megatron":
        write_with_megatron(tmp_path / "pile" / "document", [[s] for s in data])
    else:
        write_indexed_dataset(tmp_path / "pile" / "document", data)
    validation = rng.integers(1, 96, size=(N_VALIDATION + 2, LENGTH))
    np.save(tmp_path / "validation.npy", validation)
    return data, validation


def study_config(tmp_path, checkpoints, design, *, extra=()):
    (tmp_path / "pile").mkdir(exist_ok=True)
    steps = {0: checkpoints[0], 2: checkpoints[1000], 4: checkpoints[2000]}
    lines = [
        'model = "tiny"', f"metrics = {json.dumps(METRICS)}", "shard_size = 8",
        "[backend]", 'kind = "transformers"', 'device = "cpu"', "batch_size = 8",
        "prefix_length = 8", "suffix_length = 8",
        "checkpoints = { " + ", ".join(f'{k} = "{v}"' for k, v in steps.items()) + " }",
        "[design]", *design, *extra,
    ]
    path = tmp_path / "study.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def pythia_design(rule="didmem", **changes):
    """The [design] lines of the test's Pythia study; ``changes`` replace (None: drop) keys."""
    keys = {"kind": '"pythia"', "data": '"pile/document"', "validation": '"validation.npy"',
            "seed": 5, "batches_per_cohort": 2, "sequences_per_batch": 3,
            "n_validation": N_VALIDATION, "batch_size": 3, "steps_per_checkpoint": 2,
            "cohort_rule": f'"{rule}"'}
    keys.update(changes)
    return [f"{k} = {v}" for k, v in keys.items() if v is not None]


@pytest.fixture(scope="module")
def three_checkpoints(tmp_path_factory):
    from ..backends.backend_helpers import build_checkpoints

    return build_checkpoints(tmp_path_factory.mktemp("study-ckpt"), n=3)


# A 17-instance panel with 99 draws: its sup-t value can fall below the pointwise one.
@pytest.mark.filterwarnings("ignore::didmem.errors.InferenceWarning")
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("rule", ["didmem", "paper"])
def test_run_gives_the_panel_results_and_report(three_checkpoints, tmp_path, capsys, writer,
                                                rule):
    data, validation = write_data(tmp_path, writer)
    config = study_config(tmp_path, three_checkpoints, pythia_design(rule), extra=[
        "[estimate]", 'outcomes = ["mean_token_loglik", "token_accuracy"]', "n_bootstrap = 99",
        "[report]", 'title = "tiny study"'])
    out = tmp_path / "out"
    assert main(["run", "--config", config, "--out", str(out)]) == 0

    panel = pd.read_parquet(out / "panel.parquet")
    assert {"unit", "time", "cohort", *METRICS, "length", "mean_log_unigram_freq"} <= set(panel)
    assert sorted(panel["time"].unique()) == [0, 2, 4] and len(panel) == 3 * (12 + N_VALIDATION)
    cohort = panel.drop_duplicates("unit").set_index("unit")["cohort"]
    train = cohort[cohort.index >= 0]
    assert sorted(train.index) == list(range(12))  # the sampler took every sequence
    expected = pd.Series(BY_HAND[rule]).sort_index()
    pd.testing.assert_series_equal(train.sort_index(), expected.astype(float),
                                   check_names=False, check_index_type=False)
    assert cohort[cohort.index < 0].isna().all() and (cohort.index < 0).sum() == N_VALIDATION
    # the scored tokens are the dataset's and the validation file's rows
    sample = pd.read_parquet(out / "sample.parquet")
    assert sorted(sample["seq_idx"]) == sorted(cohort.index)
    assert (panel.drop_duplicates("unit")["length"] == LENGTH).all()

    # the panel is what didmem estimate reads, and didmem run fitted it
    result = didmem.load_result(out / "results-mean_token_loglik.parquet")
    fitted = didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(
        didmem.Panel(panel, unit="unit", time="time", cohort="cohort",
                     outcome="mean_token_loglik"))
    np.testing.assert_allclose(result.to_frame()["estimate"], fitted.to_frame()["estimate"],
                               rtol=1e-12, atol=1e-12)
    assert (out / "results-token_accuracy.parquet").is_file()
    html = (out / "report.html").read_text()
    assert "tiny study" in html and "token_accuracy" in html
    capsys.readouterr()

    # a second run redoes nothing; removing a results file redoes only the estimate + report
    assert main(["run", "--config", config, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("done already") == 4 and "scored" not in text
    (out / "results-token_accuracy.parquet").unlink()
    assert main(["run", "--config", config, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1/3 score: done already" in text and "estimate mean_token_loglik (1 of 2): done" in text
    assert "estimate token_accuracy (2 of 2)\n" in text and "3/3 report: wrote" in text


@pytest.mark.parametrize("column", ["step", "index"])
def test_score_with_an_order_table_writes_the_panel(three_checkpoints, instances, tmp_path,
                                                    capsys, column):
    tokens, ids = instances
    np.save(tmp_path / "tokens.npy", tokens)
    np.save(tmp_path / "units.npy", np.array(ids))
    # steps 1, 2 -> checkpoint 2; 3, 4 -> 4; empty -> validation (the contract's "step 1000
    # -> checkpoint 1000, step 1001 -> 2000" on a grid of 0, 2, 4)
    steps = [1, 2, 3, 4, 2, 3, None, None, 1, 4]
    if column == "step":
        table, extra = pd.DataFrame({"unit": ids, "step": steps}), []
    else:  # index in the data order with 3 sequences per step: step = index // 3 + 1
        index = [None if s is None else 3 * (s - 1) + (i % 3) for i, s in enumerate(steps)]
        table, extra = pd.DataFrame({"unit": ids, "index": index}), ["batch_size = 3"]
    table.iloc[::-1].to_parquet(tmp_path / "order.parquet")  # row order does not matter
    config = study_config(tmp_path, three_checkpoints,
                          ['kind = "order"', 'file = "order.parquet"', *extra],
                          extra=["[instances]", 'file = "tokens.npy"', 'units = "units.npy"'])
    assert main(["score", "--config", config, "--out", str(tmp_path / "o")]) == 0
    assert "panel.parquet (cohorts from [design]" in capsys.readouterr().out
    panel = pd.read_parquet(tmp_path / "o" / "panel.parquet")
    cohort = panel.drop_duplicates("unit").set_index("unit")["cohort"].reindex(ids)
    expected = [2, 2, 4, 4, 2, 4, np.nan, np.nan, 2, 4]
    np.testing.assert_array_equal(cohort.to_numpy(), expected)
    scores = pd.read_parquet(tmp_path / "o" / "scores.parquet")
    pd.testing.assert_frame_equal(panel[list(scores.columns)], scores)


@pytest.mark.parametrize(
    "design, message",
    [
        (['kind = "shuffled"'],
         "[design] kind must be one of pythia, order, olmo, hubble, runs; got 'shuffled'"),
        (['kind = "order"', 'file = "order.txt"'], "[design] file must be the path of a .parquet or .csv table"),
        (['kind = "order"', 'file = "order.parquet"', "seed = 1"],
         "[design] unknown key 'seed' for kind = 'order'"),
        (['kind = "order"', 'file = "order.parquet"'], "[design] file"),  # does not exist
        (pythia_design(batch_size=0), "[design] batch_size must be an integer in [1, inf]; got 0"),
        (pythia_design(data=None), "[design] needs the key data: a path (a string)"),
        (pythia_design(cohort_rule='"lesci"'),
         "[design] cohort_rule must be one of {'didmem', 'paper'}; got 'lesci'"),
        (pythia_design(cohorts="[3]"),
         "[design] cohorts must be multiples of steps_per_checkpoint = 2; 3 is not"),
        (pythia_design(n_validation=9), "[design] n_validation = 9 needs as many validation"),
        (pythia_design(batch_size=5), "[design] data: "),  # 14 sequences; cohort 4 needs 20
        (pythia_design(data='"nowhere/doc"'), "[design] data: MMapIndexedDataset:"),
        (pythia_design(validation='"val.parquet"'), "[design] validation "),  # does not exist
        (pythia_design(sequences_per_batch=4), "[design] Cannot draw 2 of 2 batches or 4 of 3"),
        (pythia_design(cohorts="[2, 6]"), "[design] data: "),
        (pythia_design(cohorts="[6]", batch_size=1, sequences_per_batch=1),
         "[design] 2 instances are trained after the last checkpoint 4"),
    ],
)
def test_design_mistakes_are_one_line_naming_file_and_key(three_checkpoints, tmp_path, capsys,
                                                          design, message):
    write_data(tmp_path, "didmem")
    config = study_config(tmp_path, three_checkpoints, design, extra=[
        "[instances]", 'file = "validation.npy"'] if 'kind = "order"' in design else [])
    assert main(["score", "--config", config, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"config {config}: " in err, err
    assert message in err, err


def test_study_config_mistakes(three_checkpoints, tmp_path, capsys):
    write_data(tmp_path, "didmem")
    cases = {
        "instances with pythia": (["[instances]", 'file = "validation.npy"'],
                                  "[instances] is not used with [design] kind = 'pythia'"),
        "estimate key": (["[estimate]", "draws = 3"], "[estimate] unknown key 'draws'"),
        "estimator": (["[estimate]", 'estimator = "twfe"'], "[estimate] estimator must be"),
        "report key": (["[report]", "colour = 1"], "[report] unknown key 'colour'"),
    }
    for name, (extra, message) in cases.items():
        config = study_config(tmp_path, three_checkpoints, pythia_design(), extra=extra)
        assert main(["run", "--config", config, "--out", str(tmp_path / "o")]) == 2, name
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"config {config}" in err and message in err, (name, err)
    # didmem run needs a design
    plain = tmp_path / "plain.toml"
    text = Path(config).read_text().split("[design]")[0]
    plain.write_text(text + '[instances]\nfile = "validation.npy"\n')
    assert main(["run", "--config", str(plain)]) == 2
    assert "running a study needs a [design] table" in capsys.readouterr().err
