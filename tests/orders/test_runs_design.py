"""``[design] kind = "runs"``: several runs' GPT-NeoX index maps, scored run by run.

A tiny indexed dataset (12 documents of 24 tokens), two runs' maps (seeds 1 and 2) of 24-token
sequences, 3 sequences per step: 11 training sequences, steps 1-4, checkpoints 0, 2 and 4.
The instances are 12-token spans trained whole in both runs.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from didmem.errors import ConfigError
from didmem.orders import write_indexed_dataset
from didmem.orders.neox import read_index_maps, run_cohorts, run_exposures, write_index_maps

pytest.importorskip("pyarrow")

L, BATCH, SPAN = 24, 3, 12
METRICS = ["mean_token_loglik", "sequence_loglik"]


def _candidates():
    """Every span of SPAN tokens of the 12 documents."""
    return pd.DataFrame([(d, s, s + SPAN) for d in range(12) for s in range(24 - SPAN + 1)],
                        columns=["document", "start", "end"])


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from ..backends.backend_helpers import build_checkpoints

    return build_checkpoints(tmp_path_factory.mktemp("runs-ckpt"), n=3)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """The dataset, two runs' maps and the spans trained whole in both."""
    root = tmp_path_factory.mktemp("runs-suite")
    rng = np.random.default_rng(0)
    docs = [rng.integers(1, 96, 24) for _ in range(12)]
    data = write_indexed_dataset(root / "pile", docs, dtype=np.uint16)
    (root / "maps").mkdir()
    for seed in (1, 2):
        write_index_maps(root / "maps" / "pile", data.sizes, 11, L, seed)  # one epoch
    candidates = _candidates()
    maps = {seed: read_index_maps(root / "maps", seed) for seed in (1, 2)}
    table = run_exposures(maps, data.sizes, candidates, BATCH)
    both = table.groupby("unit")["run"].nunique()
    whole = candidates.loc[both[both == 2].index].drop_duplicates("document")  # distinct docs
    assert len(whole) >= 4
    instances = whole.head(6).reset_index(drop=True)
    instances.to_parquet(root / "instances.parquet", index=False)
    np.save(root / "validation.npy", rng.integers(1, 96, size=(3, SPAN)))
    return root, data, maps, instances


def _config(root, checkpoints, *, runs=None, design=(), backend_steps=(0, 2, 4)):
    steps = {0: checkpoints[0], 2: checkpoints[1000], 4: checkpoints[2000]}
    shifted = {0: checkpoints[2000], 2: checkpoints[0], 4: checkpoints[1000]}

    def table(mapping):
        return "{ " + ", ".join(f'{k} = "{v}"' for k, v in mapping.items()) + " }"

    runs = runs if runs is not None else [
        ['name = "seed1"', 'maps = "maps"', "seed = 1", f"checkpoints = {table(steps)}"],
        ['name = "seed2"', 'maps = "maps"', "seed = 2", f"checkpoints = {table(shifted)}"],
    ]
    lines = ['model = "tiny"', f"metrics = {json.dumps(METRICS)}",
             "[backend]", 'kind = "transformers"', 'device = "cpu"', "batch_size = 8",
             f"checkpoints = {table({k: steps[k] for k in backend_steps})}",
             "[design]", 'kind = "runs"', 'data = "pile"', 'spans = "instances.parquet"',
             f"batch_size = {BATCH}", 'validation = "validation.npy"', *design]
    for run in runs:
        lines += ["[[design.runs]]", *run]
    path = root / "study.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_each_run_is_scored_at_its_checkpoints_with_its_cohorts(suite, checkpoints, tmp_path):
    from didmem.study import Study

    root, data, maps, instances = suite
    study = Study.from_file(_config(root, checkpoints))
    study.score(tmp_path / "out")
    panel = pd.read_parquet(tmp_path / "out" / "panel.parquet")
    assert panel.columns.tolist()[:4] == ["run", "unit", "time", "cohort"]
    assert sorted(panel["run"].unique()) == ["seed1", "seed2"]
    n = len(instances)
    assert set(panel["unit"]) == set(range(n)) | {-1, -2, -3}
    # cohorts: each run's own order
    exposures = run_exposures({"seed1": maps[1], "seed2": maps[2]}, data.sizes, instances, BATCH)
    want = run_cohorts(exposures, n, [0, 2, 4]).set_index(["run", "unit"])["cohort"]
    got = panel[panel["time"] == 0].set_index(["run", "unit"])["cohort"]
    np.testing.assert_array_equal(got.reindex(want.index).to_numpy(), want.to_numpy())
    assert got.loc["seed1"].loc[[-1, -2, -3]].isna().all()
    # seed2's checkpoint of step 0 is seed1's of step 4 (the test's shifted table)
    a = panel[(panel["run"] == "seed1") & (panel["time"] == 4)].set_index("unit")
    b = panel[(panel["run"] == "seed2") & (panel["time"] == 0)].set_index("unit")
    np.testing.assert_allclose(b.loc[a.index, METRICS].to_numpy(), a[METRICS].to_numpy(),
                               rtol=1e-6)
    assert (tmp_path / "out" / "runs" / "seed1").is_dir()
    # the exposures of the design, with a run column
    table = study.config.design.exposures([0, 2, 4])
    assert table.columns.tolist() == ["run", "unit", "position", "step"]
    with pytest.raises(ConfigError, match="does not estimate it yet"):
        study.run(tmp_path / "out")


@pytest.mark.parametrize("runs, design, backend_steps, message", [
    ([['name = "a"', 'maps = "maps"', "seed = 1", "checkpoints = 5"]],
     (), (0, 2, 4), "run 'a'\\) checkpoints must be a table of step = directory"),
    ([['name = "a"', 'maps = "maps"', "seed = 9", 'model = "m"']], (), (0, 2, 4),
     "run 'a' maps: .* no GPT-NeoX index maps of seed 9"),
    ([['name = "a"', 'maps = "maps"', "seed = 1", 'model = "m"'],
      ['name = "a"', 'maps = "maps"', "seed = 2", 'model = "m"']], (), (0, 2, 4),
     "name 'a' is given to two runs"),
    ([['name = "a"', 'maps = "maps"', "seed = 1"]], (), (0, 2, 4),
     "needs one of checkpoints .* or model"),
    ([['name = "a"', 'maps = "maps"', "seed = 1", 'model = "m"', "colour = 1"]], (),
     (0, 2, 4), "unknown key 'colour'"),
    (None, (), (0, 2), "run 'seed1' has a checkpoint at step 4, which \\[backend\\] does not "
                       "have"),
    ([], (), (0, 2, 4), "needs the key runs: a non-empty list of run tables"),
])
def test_mistakes_are_named_when_the_study_is_read(suite, checkpoints, runs, design,
                                                   backend_steps, message):
    from didmem.study import Study

    root = suite[0]
    with pytest.raises(ConfigError, match=message):
        Study.from_file(_config(root, checkpoints, runs=runs, design=design,
                                backend_steps=backend_steps))


def test_a_run_lacking_a_checkpoint_is_named(suite, checkpoints):
    from didmem.study import Study

    root = suite[0]
    short = f'checkpoints = {{ 0 = "{checkpoints[0]}", 2 = "{checkpoints[1000]}" }}'
    runs = [['name = "seed1"', 'maps = "maps"', "seed = 1", short]]
    with pytest.raises(ConfigError, match="run 'seed1' lacks the checkpoint of step 4"):
        Study.from_file(_config(root, checkpoints, runs=runs))


def test_an_instance_absent_from_one_run_and_maps_of_other_runs(suite, checkpoints, tmp_path):
    from didmem.study import Study

    root, data, maps, instances = suite
    # a span trained whole in seed 1 and split in seed 2
    candidates = _candidates()
    table = run_exposures({1: maps[1], 2: maps[2]}, data.sizes, candidates, BATCH)
    runs_of = table.groupby("unit")["run"].agg(set)
    only_one = runs_of[runs_of.apply(lambda r: r == {1})].index[0]
    extra = pd.concat([instances, candidates.loc[[only_one]]], ignore_index=True)
    extra.to_parquet(root / "instances.parquet", index=False)
    try:
        with pytest.raises(ConfigError, match=f"instance {len(instances)} is trained in some "
                                              "runs but absent from run 'seed2'"):
            Study.from_file(_config(root, checkpoints))
        study = Study.from_file(_config(root, checkpoints, design=["require_all = false"]))
        table = study.config.design.cohort_table(np.arange(len(extra)), [0, 2, 4])
        last = table[table["unit"] == len(instances)].set_index("run")
        assert np.isnan(last.loc["seed2", "cohort"]) and np.isfinite(last.loc["seed1", "cohort"])
    finally:
        instances.to_parquet(root / "instances.parquet", index=False)
    other = tmp_path / "other"
    other.mkdir()
    write_index_maps(other / "pile", data.sizes, 40, L, 3)  # a longer run
    runs = [['name = "seed1"', 'maps = "maps"', "seed = 1", 'model = "m"'],
            ['name = "long"', f'maps = "{other}"', 'model = "m"']]
    with pytest.raises(ConfigError, match="'seed1' and 'long' have index maps of different "
                                          "lengths"):
        Study.from_file(_config(root, checkpoints, runs=runs))
