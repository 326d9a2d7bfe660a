"""Results files: save, load, and the same answers without the panel."""

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import didmem

pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def res():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=30, n_never_treated=80,
                                           seed=3)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    return didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(panel)


def test_round_trip(res, tmp_path):
    path = res.save(tmp_path / "res.parquet")
    loaded = didmem.load_result(path)
    pd.testing.assert_frame_equal(loaded.to_frame(), res.to_frame())
    for kind in ("simple", "instantaneous", "persistent", "residual", "dynamic", "group",
                 "calendar", "cohort"):
        pd.testing.assert_frame_equal(loaded.aggregate(kind).to_frame(),
                                      res.aggregate(kind).to_frame())
    assert loaded.pretest == res.pretest
    # the stored summary describes the stored numbers (not only itself)
    overall = loaded.aggregate("simple").overall
    text = loaded.summary()
    assert text.startswith("DiDEstimator on outcome 'y'")
    assert f"overall ATT (simple): {overall.estimate:.4g} (SE {overall.std_error:.3g}" in text
    assert (f"all {loaded.pretest.df} pre-treatment cells; over-rejects with many cells): "
            f"W = {loaded.pretest.statistic:.4g}") in text
    assert loaded.pretrend_test().describe() in text
    assert f"-{loaded.critical_value:.3f}" in text  # the largest of the cells' multipliers
    assert loaded.critical_value == res.critical_value and loaded.band == res.band
    pd.testing.assert_frame_equal(loaded.profile(significant_only=True),
                                  res.profile(significant_only=True))
    # a saved result saves again to the same content
    again = didmem.load_result(loaded.save(tmp_path / "again.parquet"))
    pd.testing.assert_frame_equal(again.to_frame(), res.to_frame())
    # the cells are plain parquet for any reader
    assert len(pd.read_parquet(path)) == len(res.to_frame())


def test_saved_result_is_immutable(res, tmp_path):
    loaded = didmem.load_result(res.save(tmp_path / "res.parquet"))
    frame = loaded.to_frame()
    frame["estimate"] = 0.0
    assert not np.allclose(loaded.to_frame()["estimate"], 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.outcome = "other"
    with pytest.raises(TypeError):
        loaded.params["alpha"] = 0.1


def test_options_need_the_panel(res, tmp_path):
    loaded = didmem.load_result(res.save(tmp_path / "res.parquet"))
    with pytest.raises(didmem.ParameterError, match="default options"):
        loaded.aggregate("dynamic", max_e=2)


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        didmem.load_result(tmp_path / "missing.parquet")
    (tmp_path / "x.parquet").write_text("not parquet")
    with pytest.raises(didmem.DidmemError, match="not a parquet file"):
        didmem.load_result(tmp_path / "x.parquet")
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "plain.parquet")
    with pytest.raises(didmem.DidmemError, match="not a didmem results file"):
        didmem.load_result(tmp_path / "plain.parquet")


def test_covariances_round_trip_exactly_in_binary(res, tmp_path):
    import json

    import pyarrow.parquet as pq

    path = res.save(tmp_path / "res.parquet")
    meta = json.loads(pq.read_schema(path).metadata[b"didmem"])
    assert meta["format_version"] == didmem.results.FORMAT_VERSION == 3
    doc = meta["aggregations"]["dynamic"]["covariance"]
    assert set(doc) == {"shape", "float64_base64"}  # not a list of float reprs
    loaded = didmem.load_result(path)
    for kind in ("dynamic", "group", "calendar"):
        np.testing.assert_array_equal(loaded.aggregate(kind).covariance,
                                      res.aggregate(kind).covariance)


FORMAT_2 = Path(__file__).parent / "data" / "results_files" / "results_format2.parquet"


def _format_2_fit():
    """The fit saved in FORMAT_2 (tests/data/results_files/make_format2.py), refitted today."""
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=15,
                                           n_never_treated=20, n_times=5, seed=7)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    return didmem.DiDEstimator(n_bootstrap=49, seed=0).fit(panel)


# 49 draws: whether a 3-key aggregation's sup-t value falls below the normal quantile (and
# its band reverts to pointwise, with this warning) is the draws', which changed with the
# Gaussian bootstrap's BLAS products (issue 46 item 4); the file's reading is the test
@pytest.mark.filterwarnings("ignore:The simultaneous critical value is below the pointwise"
                            ":didmem.errors.InferenceWarning")
def test_format_2_files_still_load():
    """A file written by the didmem of commit b0828df (results format 2) reads as it did:
    its estimates and standard errors are today's fit's, its settings hold the inference
    line it stored. (Its band came from per-unit Gaussian multipliers; today's fit draws
    them from the moments' law, the same bootstrap in distribution but other draws for the
    seed, so the draws' columns are the file's own: ci_lower, ci_upper, significant.)"""
    import json

    import pyarrow.parquet as pq

    assert json.loads(pq.read_schema(FORMAT_2).metadata[b"didmem"])["format_version"] == 2
    loaded = didmem.load_result(FORMAT_2)
    fitted = _format_2_fit()
    drawn = ["ci_lower", "ci_upper", "significant"]
    pd.testing.assert_frame_equal(loaded.to_frame().drop(columns=drawn),
                                  fitted.to_frame().drop(columns=drawn), rtol=1e-10)
    stored = pq.read_table(FORMAT_2).to_pandas()
    np.testing.assert_array_equal(loaded.to_frame()["ci_lower"], stored["ci_lower"])
    for aggregation in didmem.results.AGGREGATIONS:
        pd.testing.assert_frame_equal(
            loaded.aggregate(aggregation).to_frame().drop(columns=drawn),
            fitted.aggregate(aggregation).to_frame().drop(columns=drawn), rtol=1e-10)
    # the line it stored, up to its critical values (the draws')
    assert "critical values 3.009-3.089" in loaded.settings.inference_line
    before_values = loaded.settings.inference_line.rsplit("critical values", 1)[0]
    assert before_values == fitted.settings.inference_line.rsplit("critical values", 1)[0]
    assert loaded.settings.cohort_shares == {}  # not kept before format 3
    assert loaded.summary().splitlines()[0] == fitted.summary().splitlines()[0]


def test_format_1_files_with_covariance_lists_still_load(tmp_path):
    """Files written before the binary covariances (results format 1) read as before."""
    import json

    import pyarrow.parquet as pq

    table = pq.read_table(FORMAT_2)
    meta = json.loads(table.schema.metadata[b"didmem"])
    meta["format_version"] = 1
    saved = didmem.load_result(FORMAT_2)
    for doc in meta["aggregations"].values():
        if doc["covariance"] is not None:
            doc["covariance"] = saved.aggregate(doc["kind"]).covariance.tolist()
    old = tmp_path / "old.parquet"
    pq.write_table(table.replace_schema_metadata(
        {**table.schema.metadata, b"didmem": json.dumps(meta).encode()}), old)
    loaded = didmem.load_result(old)
    np.testing.assert_array_equal(loaded.aggregate("dynamic").covariance,
                                  saved.aggregate("dynamic").covariance)
    pd.testing.assert_frame_equal(loaded.aggregate("group").to_frame(),
                                  saved.aggregate("group").to_frame())


def test_compute_saved_in_two_threads_equals_in_turn():
    """The file's quantities computed two at a time are the numbers computed in turn, and
    the process's BLAS threads are as they were afterwards."""
    from threadpoolctl import threadpool_info

    from didmem.results.saving import SAVED_AGGREGATIONS, compute_saved

    df, _ = didmem.datasets.simulate_panel(n_cohorts=5, units_per_cohort=25, n_never_treated=60,
                                           seed=8)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    fits = [didmem.DiDEstimator(n_bootstrap=199, seed=2).fit(panel) for _ in range(2)]
    before = [(i["user_api"], i["num_threads"]) for i in threadpool_info()]
    compute_saved(fits[0], threads=2)
    compute_saved(fits[1], threads=1)
    assert [(i["user_api"], i["num_threads"]) for i in threadpool_info()] == before
    for kind in SAVED_AGGREGATIONS:
        pd.testing.assert_frame_equal(fits[0].aggregate(kind).to_frame(),
                                      fits[1].aggregate(kind).to_frame(), check_exact=True)
    assert fits[0].pretest == fits[1].pretest
    assert fits[0].pretrend_test().statistic == fits[1].pretrend_test().statistic
    assert fits[0].summary() == fits[1].summary()


def test_compute_saved_leaves_failures_to_the_caller(tmp_path):
    """An aggregation that cannot be formed (here: no cell after the treatment period, so
    no persistent memorisation) is no error of compute_saved: the file is written without
    it, and asking for it raises as before, on the fit and on the file."""
    from didmem.results.saving import compute_saved

    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20, n_never_treated=40,
                                           n_times=5, seed=1)
    last = df["time"].max()
    df.loc[np.isfinite(df["cohort"]) & (df["cohort"] > 0), "cohort"] = last
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    res = didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(panel)
    compute_saved(res)
    with pytest.raises(didmem.DidmemError, match="persistent"):
        res.aggregate("persistent")
    loaded = didmem.load_result(res.save(tmp_path / "res.parquet"))
    assert loaded.aggregate("instantaneous").estimates.size == 1
    with pytest.raises(didmem.DidmemError):
        loaded.aggregate("persistent")


@pytest.mark.parametrize("result, threads, message", [
    ("res.parquet", None, "compute_saved needs a fitted result"),
    (None, None, "compute_saved needs a fitted result"),
    ("fit", 0, "'threads' parameter of compute_saved"),
    ("fit", 1.5, "'threads' parameter of compute_saved"),
    ("fit", True, "'threads' parameter of compute_saved"),
])
def test_compute_saved_refuses_malformed_arguments(res, result, threads, message):
    from didmem.results.saving import compute_saved

    with pytest.raises(didmem.ParameterError, match=message):
        compute_saved(res if result == "fit" else result, threads=threads)
