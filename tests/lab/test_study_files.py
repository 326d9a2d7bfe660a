"""``didmem lab`` writes the files of a study: ``didmem run`` on them re-scores and fits it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from didmem.cli import main

pytest.importorskip("pyarrow")


def test_the_order_table_gives_the_labs_cohorts(quick_run):
    root = quick_run.out_dir
    order = pd.read_parquet(root / "study_order.parquet")
    instances = pd.read_parquet(root / "study_instances.parquet")
    panel = quick_run.panel.drop_duplicates("unit").set_index("unit")
    assert sorted(instances["unit"]) == sorted(panel.index)
    from didmem.orders.exposures import exposure_cohorts

    cohorts = exposure_cohorts(order, instances["unit"], quick_run.config.checkpoints)
    got = cohorts.set_index("unit")["cohort"].reindex(panel.index)
    np.testing.assert_array_equal(got.to_numpy(), panel["cohort"].to_numpy())
    tokens = pd.read_parquet(root / "instances.parquet").set_index("instance")["tokens"]
    for unit, ids in zip(instances["unit"][:5], instances["token_ids"][:5]):
        np.testing.assert_array_equal(ids, tokens[unit])


def test_didmem_run_on_a_lab_run(quick_run, tmp_path, capsys):
    root = quick_run.out_dir
    text = (root / "study.toml").read_text()
    assert 'kind = "order"' in text and "checkpoints/step" in text
    out = tmp_path / "study"
    assert main(["run", "--config", str(root / "study.toml"), "--out", str(out)]) == 0, \
        capsys.readouterr().err
    panel = pd.read_parquet(out / "panel.parquet").sort_values(["unit", "time"])
    lab = quick_run.panel.sort_values(["unit", "time"])
    np.testing.assert_array_equal(panel["unit"], lab["unit"])
    np.testing.assert_array_equal(panel["cohort"], lab["cohort"])
    for metric in quick_run.config.metrics:  # the lab's backend settings, re-scored
        np.testing.assert_allclose(panel[metric], lab[metric], rtol=1e-5, atol=1e-7)
    assert (out / "report.html").is_file()
    assert (out / "results-mean_token_loglik.parquet").is_file()
