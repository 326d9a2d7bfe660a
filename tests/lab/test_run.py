"""End-to-end quick-scale runs: files, determinism, truth, signal, and the output directory."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from didmem.errors import ParameterError


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_import_does_not_load_torch():
    code = "import didmem, didmem.lab, sys; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_layout(quick_run):
    root, cfg = quick_run.out_dir, quick_run.config
    for step in cfg.checkpoints:
        d = root / "checkpoints" / f"step{step}"
        assert (d / "config.json").is_file() and (d / "model.safetensors").is_file()
        assert (root / "twin" / "checkpoints" / f"step{step}" / "model.safetensors").is_file()
    assert (root / "checkpoints" / "tokenizer.json").is_file()
    for g in cfg.exact_cohort_steps:
        steps = sorted(int(p.name[4:]) for p in (root / "exact" / f"cohort{g}").iterdir())
        assert steps == [c for c in cfg.checkpoints if c >= g]
    for name in ("panel", "truth", "truth_units", "twin_scores", "data_order", "sample",
                 "instances", "exact_check", "losses"):
        assert (root / f"{name}.parquet").is_file()
    assert not (root / ".lab-in-progress").exists()


def test_manifest_is_written_last_and_lists_every_file(quick_run):
    root = quick_run.out_dir
    manifest_path = root / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    newest_other = max(p.stat().st_mtime_ns for p in root.rglob("*")
                       if p.is_file() and p != manifest_path)
    assert manifest_path.stat().st_mtime_ns >= newest_other
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert set(manifest["files"]) == on_disk - {"manifest.json"}
    assert manifest["settings"]["config"] == quick_run.config.to_dict()
    assert manifest["derived"]["init_seed"] >= 0
    assert "torch" in manifest["versions"]


def test_rerun_is_bit_identical(quick_run, quick_run_again):
    a, b = _files(quick_run.out_dir), _files(quick_run_again.out_dir)
    assert a.keys() == b.keys()
    differ = [name for name in a if a[name] != b[name]]
    assert differ == []


def test_panel_contract(quick_run):
    panel, cfg = quick_run.panel, quick_run.config
    assert list(panel.columns[:3]) == ["unit", "time", "cohort"]
    assert "mean_token_loglik" in panel.columns
    assert sorted(panel["time"].unique()) == list(cfg.checkpoints)
    order = pd.read_parquet(quick_run.out_dir / "data_order.parquet")
    sample = pd.read_parquet(quick_run.out_dir / "sample.parquet")
    per_unit = panel.groupby("unit")["cohort"].first()
    val = sample.loc[sample["role"] == "validation", "unit"]
    assert per_unit.loc[val].isna().all()
    assert not np.isin(val, order["instance"]).any()  # never trained on
    analysed = order[order["analysed"]]
    np.testing.assert_array_equal(per_unit.loc[analysed["instance"]].to_numpy(),
                                  analysed["cohort"].to_numpy(float))
    assert (analysed["step"] <= analysed["cohort"]).all()
    assert (analysed["step"] > analysed["cohort"] - cfg.checkpoint_every).all()
    assert len(panel) == (len(sample)) * len(cfg.checkpoints)
    assert np.isfinite(panel["mean_token_loglik"]).all()


def test_truth_comes_from_panel_values(quick_run):
    root, cfg = quick_run.out_dir, quick_run.config
    panel = quick_run.panel
    twin = pd.read_parquet(root / "twin_scores.parquet")
    merged = panel.merge(twin, on=["unit", "time"], suffixes=("", "_twin"))
    truth = quick_run.truth
    assert list(truth.columns[:6]) == ["cohort", "time", "metric", "tau", "tau_twin", "exact"]
    assert set(truth["metric"]) == set(cfg.metrics)
    for m in cfg.metrics:
        effect = merged.assign(e=merged[m] - merged[m + "_twin"])
        # the twin's direct effect: its total effect less its drift on the validation units
        drift = effect[effect["cohort"].isna()].groupby("time")["e"].mean()
        recomputed = effect.groupby(["cohort", "time"])["e"].mean()
        recomputed = recomputed - drift.reindex(recomputed.index.get_level_values("time")).to_numpy()
        ours = truth[truth["metric"] == m].set_index(["cohort", "time"])["tau_twin"]
        np.testing.assert_allclose(ours.to_numpy(), recomputed.loc[ours.index].to_numpy(),
                                   rtol=1e-12, atol=1e-15)
    # one cell per cohort and checkpoint
    assert len(truth) == len(cfg.metrics) * len(cfg.cohorts) * len(cfg.checkpoints)


def test_twin_shares_initialisation(quick_run):
    root = quick_run.out_dir
    main0 = (root / "checkpoints" / "step0" / "model.safetensors").read_bytes()
    twin0 = (root / "twin" / "checkpoints" / "step0" / "model.safetensors").read_bytes()
    assert main0 == twin0
    first = quick_run.config.cohorts[0]
    assert (root / "checkpoints" / f"step{first}" / "model.safetensors").read_bytes() != (
        root / "twin" / "checkpoints" / f"step{first}" / "model.safetensors").read_bytes()


def test_instantaneous_memorisation_is_detectable(quick_run):
    inst = quick_run.instantaneous("mean_token_loglik")
    assert (inst["tau"] > 0).all()
    assert (inst["z"] > 2).sum() >= len(inst) - 1
    truth = quick_run.truth[quick_run.truth["metric"] == "mean_token_loglik"]
    assert (truth[truth["time"] == 0]["tau_twin"] == 0).all()  # same initial model


def test_did_tracks_the_exact_truth_at_the_quick_scale(quick_run):
    """The design gives DiD enough signal for a test to see it (issue 16, target 4)."""
    import didmem

    panel = didmem.Panel(quick_run.panel, unit="unit", time="time", cohort="cohort",
                         outcome="mean_token_loglik")
    res = didmem.DiDEstimator(n_bootstrap=499, seed=0).fit(panel)
    row = didmem.compare({"did": res}, truth=quick_run.truth, metric="mean_token_loglik").iloc[0]
    assert row["n_cells"] == 10
    assert row["corr"] >= 0.7
    assert row["coverage"] >= 0.8


def test_exact_truth_for_every_cohort(quick_run):
    truth, cfg = quick_run.truth, quick_run.config
    assert cfg.exact_cohort_steps == cfg.cohorts and truth["exact"].all()
    pre = truth[truth["time"] < truth["cohort"]]
    assert (pre["tau"] == 0).all() and (pre["sd"] == 0).all()  # the same model before g
    assert (pre["tau_twin"] != 0).any()  # the twin's does move before g
    # tau is the exact run's value, cell for cell (means of the same effects, in another order)
    ex = quick_run.exact.set_index(["metric", "cohort", "time"])
    ours = truth.set_index(["metric", "cohort", "time"])
    np.testing.assert_allclose(ours["tau"].to_numpy(), ex.loc[ours.index, "tau_exact"].to_numpy(),
                               rtol=0, atol=1e-15)
    np.testing.assert_allclose(ours["tau_twin"].to_numpy(),
                               ex.loc[ours.index, "tau_twin"].to_numpy(), rtol=0, atol=1e-15)
    units = pd.read_parquet(quick_run.out_dir / "truth_units.parquet")
    assert {"effect", "effect_twin", "exact"} <= set(units.columns)
    for g in cfg.cohorts:
        d = quick_run.out_dir / "exact" / f"cohort{g}" / f"step{cfg.n_steps}" / "model.safetensors"
        assert d.is_file()


def test_truth_is_the_direct_effect_with_the_spillover_rescored(quick_run):
    """tau = tau_total - spillover, the spillover being the exact run's mean effect on the
    never-treated instances: re-scored here from the saved exact checkpoint."""
    from didmem.lab.scoring import score_run

    truth, cfg, root = quick_run.truth, quick_run.config, quick_run.out_dir
    np.testing.assert_allclose(truth["tau"], truth["tau_total"] - truth["spillover"],
                               rtol=0, atol=1e-15)
    np.testing.assert_allclose(truth["tau_nyt"], truth["tau_total"] - truth["spillover_nyt"],
                               rtol=0, atol=1e-15)
    pre = truth[truth["time"] < truth["cohort"]]
    assert (pre[["spillover", "spillover_nyt", "tau_total", "tau_se"]] == 0).all().all()
    post = truth[truth["time"] >= truth["cohort"]]
    assert (post["spillover"] != 0).all() and (post["tau_se"] > 0).all()
    g, c, m = cfg.cohorts[0], cfg.cohorts[1], "mean_token_loglik"
    sample = pd.read_parquet(root / "sample.parquet")
    tokens = pd.read_parquet(root / "instances.parquet").set_index("instance")["tokens"]
    val = sample.loc[sample["role"] == "validation", "unit"].to_numpy()
    rescored = score_run({c: root / "exact" / f"cohort{g}" / f"step{c}"},
                         np.stack(tokens.loc[val].to_numpy()), val, cfg)
    main = quick_run.panel[(quick_run.panel["time"] == c) & quick_run.panel["unit"].isin(val)]
    merged = main.merge(rescored, on=["unit", "time"], suffixes=("", "_exact"))
    assert len(merged) == len(val)
    cell = truth[(truth["metric"] == m) & (truth["cohort"] == g) & (truth["time"] == c)].iloc[0]
    assert cell["spillover"] == pytest.approx((merged[m] - merged[m + "_exact"]).mean(),
                                              rel=1e-9, abs=1e-12)
    # every replacement draw's truth; draw 0 is the truth's own run
    draws = pd.read_parquet(root / "truth_draws.parquet")
    assert set(draws["draw"]) == set(range(cfg.truth_draws + 1))
    first = draws[draws["draw"] == 0].set_index(["metric", "cohort", "time"])
    np.testing.assert_allclose(  # the same effects averaged in another order
        first["tau"], post.set_index(["metric", "cohort", "time"]).loc[first.index, "tau"],
        rtol=1e-14, atol=1e-15)


def test_exact_check(quick_run):
    ex = quick_run.exact
    cfg = quick_run.config
    assert set(ex["cohort"]) == set(cfg.exact_cohort_steps)
    assert (ex.loc[ex["time"] < ex["cohort"], "tau_exact"] == 0).all()
    at = ex[(ex["time"] == ex["cohort"]) & (ex["metric"] == "mean_token_loglik")]
    assert (at["tau_exact"] > 0).all()
    np.testing.assert_allclose(ex["difference"], ex["tau_twin"] - ex["tau_exact"])


def test_subsets_membership_and_scores(subset_run):
    root, cfg = subset_run.out_dir, subset_run.config
    membership = pd.read_parquet(root / "membership.parquet")
    matrix = membership.pivot(index="model", columns="unit", values="member")
    assert matrix.shape == (2, cfg.n_analysed * len(cfg.cohorts))
    assert (matrix.sum(axis=0) == 1).all()
    manifest = json.loads((root / "manifest.json").read_text())
    seeds = membership.groupby("model")["seed"].first().tolist()
    assert seeds == manifest["derived"]["subset_seeds"]
    scores = pd.read_parquet(root / "subset_scores.parquet")
    assert len(scores) == 2 * matrix.shape[1] * len(cfg.checkpoints)
    for j in range(2):
        assert (root / "subsets" / f"model{j}" / f"step{cfg.n_steps}" / "model.safetensors").is_file()
    order = pd.read_parquet(root / "data_order.parquet")
    assert order["instance"].duplicated().any()
    assert not order.loc[order["analysed"], "instance"].isin(
        order.loc[~order["analysed"], "instance"]).any()


def test_same_settings_reuse_the_run(quick_run):
    from didmem.lab import run

    again = run(quick_run.out_dir, quick=True, seed=0)
    assert again.reused
    pd.testing.assert_frame_equal(again.panel, quick_run.panel)


def test_different_run_is_refused(quick_run):
    from didmem.lab import run

    with pytest.raises(ParameterError, match="holds a different lab run"):
        run(quick_run.out_dir, quick=True, seed=1)


def test_foreign_directory_is_refused(tmp_path):
    from didmem.lab import run

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ParameterError, match="not empty and holds no lab run"):
        run(tmp_path, quick=True)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_overwrite_replaces_a_run(tmp_path):
    pytest.importorskip("torch")
    from didmem.lab import run

    small = {"quick": True, "n_steps": 12, "burn_in": 0, "exact_cohorts": (), "n_validation": 16,
             "n_analysed": 4}
    first = run(tmp_path / "r", seed=0, **small)
    (first.out_dir / "exact").mkdir()  # a stale entry that the new run must not keep
    second = run(tmp_path / "r", seed=2, overwrite=True, **small)
    assert not second.reused and not (second.out_dir / "exact").exists()
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["settings"]["config"]["seed"] == 2


def test_interrupted_run_is_restarted(tmp_path):
    from didmem.lab import run
    from didmem.lab.outputs import IN_PROGRESS

    out = tmp_path / "r"
    out.mkdir()
    (out / IN_PROGRESS).write_text("")
    (out / "panel.parquet").write_text("half written")
    result = run(out, quick=True, n_steps=12, burn_in=0, exact_cohorts=(), n_validation=16,
                 n_analysed=4)
    assert len(pd.read_parquet(out / "panel.parquet")) == len(result.panel)


def test_run_on_user_text_files(tmp_path):
    pytest.importorskip("torch")
    from didmem.lab import build_design, quick_config, run

    # a user's text: here, sentences written out by another seed's language
    donor = build_design(quick_config(seed=9))
    tok = donor.corpus.tokenizer
    lines = [tok.decode(row[1:]) for row in donor.tokens]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines * 2), encoding="utf-8")
    result = run(tmp_path / "out", quick=True, text_files=(str(path),), n_steps=24,
                 exact_cohorts=(), n_validation=32)
    manifest = json.loads((result.out_dir / "manifest.json").read_text())
    assert manifest["derived"]["corpus"]["kind"] == "text"
    assert manifest["settings"]["text_files_sha256"][0] is not None
    assert set(result.panel["time"]) == set(result.config.checkpoints)
    instances = pd.read_parquet(result.out_dir / "instances.parquet")
    assert instances["text"].str.startswith("<bos>").all()
    small = tmp_path / "small.txt"
    small.write_text("\n".join(lines[:50]), encoding="utf-8")
    with pytest.raises(ParameterError, match="the run needs at least"):
        run(tmp_path / "too_small", quick=True, text_files=(str(small),))
    assert not (tmp_path / "too_small").exists()


@pytest.mark.slow
def test_demo_scale_signal(tmp_path):
    pytest.importorskip("torch")
    import didmem
    from didmem.lab import run

    result = run(tmp_path / "demo")
    inst = result.instantaneous()
    assert len(inst) == len(result.config.cohorts) == 7
    assert (inst["z"] > 3).all()
    panel = didmem.Panel(result.panel, unit="unit", time="time", cohort="cohort",
                         outcome="mean_token_loglik")
    res = didmem.DiDEstimator(n_bootstrap=999, seed=0).fit(panel)
    row = didmem.compare({"did": res}, truth=result.truth, metric="mean_token_loglik").iloc[0]
    assert row["n_cells"] == 28
    assert row["corr"] >= 0.8 and row["coverage"] >= 0.9  # issue 16's demo targets
