"""The lab with several runs: one corpus, one data order per run, each run's exact truth."""

import json

import numpy as np
import pandas as pd
import pytest

from didmem.errors import ParameterError
from didmem.lab import build_design, quick_config
from didmem.lab.runs import run_design, run_streams, stack_runs

SMALL = {"n_steps": 36, "n_analysed": 12, "n_validation": 16, "truth_draws": 0,
         "metrics": ("mean_token_loglik", "reference_ratio")}


# ---------------------------------------------------------------- designs (no torch)
@pytest.fixture(scope="module")
def designs():
    cfg = quick_config(seed=3, runs=3, duplicate_fraction=0.3, n_subset_models=2)
    base = build_design(cfg)
    return base, [run_design(base, r) for r in range(3)]


def test_run_zero_is_the_single_run(designs):
    base, runs = designs
    assert runs[0] is base
    single = build_design(quick_config(seed=3, duplicate_fraction=0.3, n_subset_models=2))
    np.testing.assert_array_equal(single.order, base.order)
    np.testing.assert_array_equal(single.analysed_cohorts, base.analysed_cohorts)
    assert single.init_seed == base.init_seed


def test_every_run_trains_the_same_corpus(designs):
    base, runs = designs
    for design in runs[1:]:
        assert design.tokens is base.tokens
        # the same multiset of trained instances (duplicated fillers included)
        np.testing.assert_array_equal(np.sort(design.order), np.sort(base.order))
        assert not np.array_equal(design.order, base.order)
        assert set(design.analysed_ids) == set(base.analysed_ids)
        np.testing.assert_array_equal(design.order[design.analysed_positions],
                                      design.analysed_ids)
        np.testing.assert_array_equal(design.validation_ids, base.validation_ids)
        assert not np.isin(design.validation_ids, design.order).any()


def test_each_run_has_n_analysed_per_cohort_in_its_own_order(designs):
    base, runs = designs
    cfg = base.config
    cohorts = []
    for design in runs:
        values, counts = np.unique(design.analysed_cohorts, return_counts=True)
        assert values.tolist() == list(cfg.cohorts)
        assert (counts == cfg.n_analysed).all()
        by_id = pd.Series(design.analysed_cohorts, index=design.analysed_ids).sort_index()
        cohorts.append(by_id.to_numpy())
        batch = design.analysed_positions // cfg.batch_size
        assert (batch >= cfg.burn_in * cfg.checkpoint_every).all()
    # the runs place the instances independently: cohorts agree about as often as chance
    share = np.mean(cohorts[0] == cohorts[1])
    assert 0.1 < share < 0.45  # 1 / 4 cohorts by chance


def test_replacements_and_membership_follow_the_instance(designs):
    base, runs = designs
    pairs = dict(zip(base.analysed_ids.tolist(), base.replacement_ids.tolist()))
    member = {u: tuple(base.membership[:, i]) for i, u in enumerate(base.analysed_ids)}
    for design in runs[1:]:
        assert dict(zip(design.analysed_ids.tolist(), design.replacement_ids.tolist())) == pairs
        assert {u: tuple(design.membership[:, i])
                for i, u in enumerate(design.analysed_ids)} == member
        twin = design.twin_order()
        assert not np.isin(design.analysed_ids, twin).any()


def test_init_is_shared_unless_varied(designs):
    base, runs = designs
    assert {d.init_seed for d in runs} == {base.init_seed}
    varied = build_design(base.config.replace(vary_init=True))
    seeds = [run_design(varied, r).init_seed for r in range(3)]
    assert seeds[0] == base.init_seed and len(set(seeds)) == 3


def test_run_designs_are_reproducible_and_streams_distinct():
    cfg = quick_config(seed=5, runs=2)
    a, b = run_design(build_design(cfg), 1), run_design(build_design(cfg), 1)
    np.testing.assert_array_equal(a.order, b.order)
    one, two = run_streams(5, 1), run_streams(5, 2)
    assert one["placement"].integers(1 << 62) != two["placement"].integers(1 << 62)


def test_settings_of_several_runs_are_checked():
    with pytest.raises(ParameterError, match="runs=2 with exposures=2"):
        quick_config(runs=2, exposures=2)
    with pytest.raises(ParameterError, match="vary_init=True .* needs runs >= 2"):
        quick_config(vary_init=True)
    with pytest.raises(ParameterError, match="'runs' parameter of LabConfig"):
        quick_config(runs=0)


def test_replicate_refuses_several_runs(tmp_path):
    from didmem.lab import replicate

    with pytest.raises(ParameterError, match="replicate scores single runs; got runs=2"):
        replicate(tmp_path, n_seeds=2, quick=True, runs=2)
    assert not any(tmp_path.iterdir())


def test_last_batch_placement_in_every_run():
    cfg = quick_config(seed=2, runs=2, placement="last_batch", n_analysed=4)
    design = run_design(build_design(cfg), 1)
    macro = cfg.batch_size * cfg.checkpoint_every
    assert ((design.analysed_positions % macro) >= macro - cfg.batch_size).all()
    assert (np.unique(design.analysed_cohorts, return_counts=True)[1] == 4).all()


def test_a_single_runs_settings_are_as_before():
    cfg = quick_config()
    assert "runs" not in cfg.to_dict() and "vary_init" not in cfg.to_dict()
    several = quick_config(runs=3, vary_init=True)
    assert several.to_dict()["runs"] == 3
    assert type(cfg).from_dict(several.to_dict()) == several


def test_stack_runs_puts_run_first():
    out = stack_runs([pd.DataFrame({"a": [1, 2]}), pd.DataFrame({"a": [3]})])
    assert out.columns.tolist() == ["run", "a"]
    assert out["run"].tolist() == [0, 0, 1] and out["run"].dtype == np.int64


# ---------------------------------------------------------------- the pipeline
@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from didmem.lab import run

    root = tmp_path_factory.mktemp("labruns")
    several = run(root / "runs", quick=True, seed=1, runs=2, workers=2, **SMALL)
    single = run(root / "single", quick=True, seed=1, **SMALL)
    return several, single


@pytest.fixture(scope="module")
def in_one_process(tmp_path_factory, two_runs):
    """The runs of ``two_runs`` again, everything in this process (``workers=1``)."""
    from didmem.lab import run

    return run(tmp_path_factory.mktemp("labruns") / "one", quick=True, seed=1, runs=2,
               workers=1, **SMALL)


def test_the_files_do_not_depend_on_the_workers(two_runs, in_one_process):
    several, _ = two_runs
    assert "runs" in several.timings and "runs" not in in_one_process.timings
    manifests = [json.loads((r.out_dir / "manifest.json").read_text())
                 for r in (several, in_one_process)]
    assert manifests[0]["files"].keys() == manifests[1]["files"].keys()
    assert manifests[0]["settings"] == manifests[1]["settings"]
    assert manifests[0]["derived"] == manifests[1]["derived"]
    tables = [name for name in manifests[0]["files"] if name.endswith(".parquet")]
    assert "runs/run1/truth_units.parquet" in tables and "panel.parquet" in tables
    for name in tables:  # each run's panel, truth and every other table
        a, b = (pd.read_parquet(r.out_dir / name) for r in (several, in_one_process))
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9, atol=1e-12)
    for name in (n for n in manifests[0]["files"] if n.endswith("study.toml")):
        assert (several.out_dir / name).read_text() == \
            (in_one_process.out_dir / name).read_text()


def test_workers_are_checked_and_ignored_with_one_run(tmp_path):
    from didmem.lab import run

    with pytest.raises(ParameterError, match="'workers' parameter of didmem.lab.run"):
        run(tmp_path / "x", quick=True, runs=2, workers=0)
    assert not (tmp_path / "x").exists()


def test_panel_and_truth_have_a_run_column(two_runs):
    several, _ = two_runs
    panel, truth = several.panel, several.truth
    assert panel.columns.tolist()[:5] == ["run", "unit", "time", "cohort", "domain"]
    assert truth.columns[0] == "run"
    assert sorted(panel["run"].unique()) == [0, 1] and sorted(truth["run"].unique()) == [0, 1]
    units = [set(part["unit"]) for _, part in panel.groupby("run")]
    assert units[0] == units[1]
    for _, part in panel.groupby("run"):  # balanced within each run
        assert part.groupby("unit").size().nunique() == 1
    first = panel[panel["time"] == 0].pivot(index="unit", columns="run", values="cohort")
    assert (first[0].isna() == first[1].isna()).all()  # validation in both runs
    assert (first[0] != first[1]).any()  # some instance is trained at another step


def test_run_zero_equals_the_single_run(two_runs):
    several, single = two_runs
    zero = several.panel[several.panel["run"] == 0].drop(columns="run").reset_index(drop=True)
    pd.testing.assert_frame_equal(zero, single.panel)
    truth = several.truth[several.truth["run"] == 0].drop(columns="run").reset_index(drop=True)
    pd.testing.assert_frame_equal(truth, single.truth)


def test_each_runs_truth_averages_its_own_instances(two_runs):
    several, _ = two_runs
    units = pd.read_parquet(several.out_dir / "truth_units.parquet")
    assert units.columns[0] == "run"
    cohort = several.panel[several.panel["time"] == 0].set_index(["run", "unit"])["cohort"]
    got = cohort.reindex(pd.MultiIndex.from_frame(units[["run", "unit"]])).to_numpy()
    np.testing.assert_array_equal(got, units["cohort"].to_numpy(np.float64))
    mean = units.groupby(["run", "cohort", "time", "metric"])["effect"].mean()
    truth = several.truth.set_index(["run", "cohort", "time", "metric"])["tau"]
    np.testing.assert_allclose(truth.reindex(mean.index).to_numpy(), mean.to_numpy(),
                               rtol=1e-12, atol=1e-12)


def test_each_run_has_its_own_directory_and_manifest_entry(two_runs):
    several, _ = two_runs
    manifest = json.loads((several.out_dir / "manifest.json").read_text())
    runs = manifest["derived"]["runs"]
    assert [r["directory"] for r in runs] == ["runs/run0", "runs/run1"]
    assert runs[0]["init_seed"] == runs[1]["init_seed"]
    assert any(name.startswith("runs/run1/checkpoints/") for name in manifest["files"])
    for r in (0, 1):
        own = pd.read_parquet(several.out_dir / "runs" / f"run{r}" / "truth.parquet")
        stacked = several.truth[several.truth["run"] == r].drop(columns="run")
        pd.testing.assert_frame_equal(own, stacked.reset_index(drop=True))
        assert (several.out_dir / "runs" / f"run{r}" / "study.toml").is_file()
    assert several.checkpoint_dir == several.out_dir / "runs" / "run0" / "checkpoints"


def test_every_run_has_run_zeros_twin_as_reference(two_runs):
    several, _ = two_runs
    manifest = json.loads((several.out_dir / "manifest.json").read_text())
    assert manifest["derived"]["scoring_backend"]["reference"] == \
        "runs/run0/twin/checkpoints/step36"
    panel = several.panel
    reference = (panel["mean_token_loglik"] - panel["reference_ratio"]).rename("ref")
    table = panel[["run", "unit", "time"]].assign(ref=reference)
    wide = table.pivot_table(index=["unit", "time"], columns="run", values="ref")
    np.testing.assert_allclose(wide[1].to_numpy(), wide[0].to_numpy(), rtol=1e-5, atol=1e-6)
    # and the same score of a unit at every checkpoint: one fixed reference model
    spread = table.groupby(["run", "unit"])["ref"].agg(lambda v: v.max() - v.min())
    assert spread.max() < 1e-5


def test_several_runs_reload_and_summarise(two_runs):
    from didmem.lab import load, run

    several, _ = two_runs
    again = load(several.out_dir)
    pd.testing.assert_frame_equal(again.truth, several.truth)
    assert "run" in again.panel
    text = several.summary()
    assert "run 0" in text and "run 1" in text
    reused = run(several.out_dir, quick=True, seed=1, runs=2, **SMALL)
    assert reused.reused
