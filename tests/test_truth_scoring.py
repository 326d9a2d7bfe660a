"""Truth scoring written once (issue 36 item 5) and the repeated-exposure truth (issue 40 item 4).

The demo, the report, ``compare`` and the lab's replications score estimates against a known
truth through :mod:`didmem.results._truth`. The oracles below are the four formulas they used
before (didmem at commit b0828df: ``cli/demo.py``, ``report/_truth.py:error_summary``,
``results/comparison.py:_scores``, ``lab/replication.py:_run_scores``), restated in plain
numpy: the shared scoring gives their numbers.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.datasets import simulate_exposures, simulate_panel
from didmem.errors import ParameterError
from didmem.lab.replication import _run_scores
from didmem.report._truth import cells_with_truth, error_summary
from didmem.results._truth import score_cells, truth_table


@pytest.fixture(scope="module")
def fitted():
    data, truth = simulate_panel(n_cohorts=3, units_per_cohort=25, n_never_treated=40,
                                 n_times=6, cohort_scale=[0.5, 1.0, 2.0], seed=11)
    panel = didmem.Panel(data, unit="unit", time="time", cohort="cohort", outcome="y")
    result = didmem.DiDEstimator(n_bootstrap=99, seed=1).fit(panel)
    return result, truth


# ---------------------------------------------------------------- the formulas of b0828df
def _old_compare_scores(est, ref, lo, hi):
    ok = np.isfinite(est) & np.isfinite(ref)
    est, ref, lo, hi = est[ok], ref[ok], lo[ok], hi[ok]
    err = est - ref
    has_ci = np.isfinite(lo) & np.isfinite(hi)
    return {"n_cells": int(ok.sum()), "bias": float(err.mean()),
            "rmse": float(np.sqrt(np.mean(err ** 2))),
            "corr": float(np.corrcoef(est, ref)[0, 1]),
            "coverage": float(np.mean((lo[has_ci] <= ref[has_ci]) & (ref[has_ci] <= hi[has_ci])))}


def _old_error_summary(cells):
    post = cells[cells["post"] & cells["tau"].notna() & cells["estimate"].notna()]
    err = post["estimate"] - post["tau"]
    covered = (post["ci_lower"] <= post["tau"]) & (post["tau"] <= post["ci_upper"])
    return len(post), float(np.sqrt(np.mean(err ** 2))), float(err.mean()), int(covered.sum())


def _old_demo(result, truth):
    frame = result.to_frame().merge(truth, on=["cohort", "time"], how="left")
    post = frame[frame["post"]]
    rmse = float(np.sqrt(np.mean((post["estimate"] - post["tau"]) ** 2)))
    covered = (post["ci_lower"] <= post["tau"]) & (post["tau"] <= post["ci_upper"])
    return len(post), rmse, int(covered.sum())


def _old_run_scores(part):
    est, tau = part["estimate"].to_numpy(float), part["tau"].to_numpy(float)
    lo, hi = part["ci_lower"].to_numpy(float), part["ci_upper"].to_numpy(float)
    err = est - tau
    has_ci = np.isfinite(lo) & np.isfinite(hi)
    inside = (lo <= tau) & (tau <= hi)
    return {"n_cells": len(err), "mean_error": float(err.mean()),
            "sq_error": float(np.mean(err ** 2)),
            "corr": float(np.corrcoef(est, tau)[0, 1]),
            "coverage": float(inside[has_ci].mean()),
            "covers_all": float(inside.all())}


def test_the_four_users_give_the_numbers_of_before(fitted):
    result, truth = fitted
    truth_cells = truth[["cohort", "time", "tau"]]
    # compare
    table = didmem.compare({"did": result}, truth=truth_cells).iloc[0]
    long = didmem.aligned_cells({"did": result}, truth_cells)
    old = _old_compare_scores(*(long[c].to_numpy(float)
                                for c in ("estimate", "tau", "ci_lower", "ci_upper")))
    for key, value in old.items():
        assert table[key] == pytest.approx(value, rel=1e-12), key
    # the report
    cells = cells_with_truth(result, truth_cells)
    score = error_summary(cells)
    n, rmse, bias, covered = _old_error_summary(cells)
    assert (score.n_cells, score.covered) == (n, covered) and n == 12
    assert score.rmse == pytest.approx(rmse, rel=1e-12)
    assert score.bias == pytest.approx(bias, rel=1e-12)
    # the demo (its cells are the report's; it scores the post-treatment ones)
    demo = score_cells(cells[cells["post"]])
    n, rmse, covered = _old_demo(result, truth_cells)
    assert (demo.n_cells, demo.covered) == (n, covered)
    assert demo.rmse == pytest.approx(rmse, rel=1e-12)
    # the lab's replications
    new, old = _run_scores(long), _old_run_scores(long)
    assert new.keys() == old.keys()
    for key, value in old.items():
        assert new[key] == pytest.approx(value, rel=1e-12), key
    assert all(np.isfinite(v) for v in old.values())  # every score compared is a number


def test_scores_leave_out_cells_without_estimate_or_truth():
    cells = pd.DataFrame({"estimate": [1.0, np.nan, 3.0, 2.0], "tau": [1.5, 2.0, np.nan, 2.0],
                          "ci_lower": [0.0, 0.0, 0.0, np.nan],
                          "ci_upper": [1.2, 9.0, 9.0, np.nan]})
    score = score_cells(cells)
    assert score.n_cells == 2 and score.bias == pytest.approx(-0.25)
    assert score.rmse == pytest.approx(np.sqrt(0.125))
    assert score.covered == 0 and score.coverage == 0.0  # the one cell with an interval misses
    assert np.isnan(score.covers_all)  # a cell lacks an interval


# ------------------------------------------------------------ repeated exposure (issue 40)
@pytest.fixture(scope="module")
def exposures():
    data, truth = simulate_exposures(n_first=3, units_per_cohort=40, n_never_treated=60,
                                     gaps=(2,), seed=5)
    panel = didmem.Panel(data, unit="unit", time="time", cohort=["cohort", "cohort_2"],
                         outcome="y")
    first = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    second = didmem.DiDEstimator(n_bootstrap=0, exposure=2).fit(panel)
    return first, second, truth


def test_compare_matches_each_result_to_its_exposure(exposures):
    first, second, truth = exposures
    long = didmem.aligned_cells({"first": first, "second": second}, truth)
    for name, result, k in (("first", first, 1), ("second", second, 2)):
        part = long[long["estimator"] == name]
        expected = truth[truth["exposure"] == k].set_index(["cohort", "time"])["tau"]
        np.testing.assert_array_equal(
            part["tau"], expected.reindex(pd.MultiIndex.from_frame(part[["cohort", "time"]])))
        assert len(part) == int(result.to_frame()["post"].sum())
    table = didmem.compare({"first": first, "second": second}, truth)
    assert table["n_cells"].tolist() == [len(long[long["estimator"] == n])
                                         for n in ("first", "second")]


def test_report_and_saved_result_use_the_truth_of_their_exposure(exposures, tmp_path):
    pytest.importorskip("matplotlib")
    from didmem.report import write_report

    _, second, truth = exposures
    saved = didmem.load_result(second.save(tmp_path / "second.parquet"))
    for result in (second, saved):
        cells = cells_with_truth(result, truth)
        expected = truth_table(truth, exposure=2).set_index(["cohort", "time"])["tau"]
        np.testing.assert_array_equal(
            cells["tau"], expected.reindex(pd.MultiIndex.from_frame(cells[["cohort", "time"]])))
    path = write_report({"second exposure": saved}, tmp_path / "report.html", truth=truth)
    assert "the band covers the truth in" in path.read_text(encoding="utf-8")


def test_truth_refusals(exposures):
    _, second, truth = exposures
    with pytest.raises(ParameterError, match="no 'exposure' column.*exposure 2"):
        cells_with_truth(second, truth[truth["exposure"] == 1].drop(columns="exposure"))
    with pytest.raises(ParameterError, match=r"no row of exposure 3; it has exposures \[1, 2\]"):
        truth_table(truth, exposure=3)
    with pytest.raises(ParameterError, match="more than one row for .* cells, e.g. cohort"):
        truth_table(truth.drop(columns="exposure"))
    words = truth.assign(cohort=truth["cohort"].map(lambda g: f"step {g:g}"))
    with pytest.raises(ParameterError, match="column 'cohort' that are not numbers "
                                             r"\(e.g. 'step 1'"):
        cells_with_truth(second, words)


def test_cli_refuses_a_truth_file_with_string_cohorts(fitted, tmp_path):
    result, truth = fitted
    results = result.save(tmp_path / "r.parquet")
    bad = tmp_path / "truth.csv"
    truth.assign(cohort=[f"g{g:g}" for g in truth["cohort"]]).to_csv(bad, index=False)
    proc = subprocess.run([sys.executable, "-m", "didmem.cli", "report", str(results),
                           "--truth", str(bad), "--out", str(tmp_path / "r.html")],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert f"The truth file {str(bad)!r} (--truth) has values in column 'cohort'" in proc.stderr
    assert not (tmp_path / "r.html").exists()


def test_lab_summary_shows_every_exposure(exposures, tmp_path):
    """A lab run with repeats lists the instantaneous truth of each exposure (issue 40
    item 4); a run with one exposure reads as before. The run's tables are stand-ins (no
    torch here): the truth of simulate_exposures in the lab's layout."""
    from didmem.lab.pipeline import LabResult

    _, _, truth = exposures
    lab_truth = truth.assign(metric="mean_token_loglik", sd=0.5, n_units=40)
    run = LabResult(out_dir=tmp_path, config=None, panel=pd.DataFrame(), truth=lab_truth,
                    exact=pd.DataFrame())
    text = run.summary()
    first, second = text.index("exposure 1"), text.index("exposure 2: the second exposure")
    assert first < second
    for k, start, end in ((1, first, second), (2, second, len(text))):
        inst = lab_truth[(lab_truth["exposure"] == k) & (lab_truth["time"] == lab_truth["cohort"])]
        block = text[start:end]
        assert [f"{g:>6} {t:>10.4f}" in block for g, t in zip(inst["cohort"], inst["tau"])] \
            == [True] * len(inst) and len(inst) >= 3
    np.testing.assert_array_equal(run.instantaneous(exposure=2)["tau"], inst["tau"])
    with pytest.raises(ParameterError, match=r"has the exposures \[1, 2\]; got exposure=3"):
        run.instantaneous(exposure=3)
    single = LabResult(out_dir=tmp_path, config=None, panel=pd.DataFrame(),
                       truth=lab_truth[lab_truth["exposure"] == 1].drop(columns="exposure"),
                       exact=pd.DataFrame())
    assert "exposure" not in single.summary() and "cohort   tau(g,g)" in single.summary()


def test_not_yet_treated_results_meet_the_truth_of_their_estimand(fitted, tmp_path):
    """Where the truth has ``tau_nyt`` (the lab's: the direct effect against not-yet-treated
    controls), a result with those controls is scored against it, fitted or saved; a result
    with never-treated controls against ``tau``."""
    result, truth = fitted
    panel_truth = truth.assign(tau_nyt=truth["tau"] + 1.0)
    data, _ = simulate_panel(n_cohorts=3, units_per_cohort=25, n_never_treated=40, n_times=6,
                             cohort_scale=[0.5, 1.0, 2.0], seed=11)
    panel = didmem.Panel(data, unit="unit", time="time", cohort="cohort", outcome="y")
    nyt = didmem.DiDEstimator(n_bootstrap=0, control_group="not_yet_treated").fit(panel)
    saved = didmem.load_result(nyt.save(tmp_path / "nyt.parquet"))
    for res, column in ((result, "tau"), (nyt, "tau_nyt"), (saved, "tau_nyt")):
        cells = cells_with_truth(res, panel_truth)
        expected = panel_truth.set_index(["cohort", "time"])[column]
        np.testing.assert_array_equal(
            cells["tau"], expected.reindex(pd.MultiIndex.from_frame(cells[["cohort", "time"]])))
    long = didmem.aligned_cells({"never": result, "nyt": nyt}, panel_truth)
    gap = (long[long["estimator"] == "nyt"]["tau"].to_numpy()
           - long[long["estimator"] == "never"]["tau"].to_numpy())
    np.testing.assert_allclose(gap, 1.0, rtol=0, atol=1e-12)


def test_didmem_report_reads_a_truth_of_every_exposure(exposures, tmp_path):
    """``didmem report --truth`` takes a truth file with an ``exposure`` column (the lab's
    layout) and sets each result beside the truth of its own exposure."""
    pytest.importorskip("matplotlib")
    from didmem.cli import main

    first, second, truth = exposures
    files = [first.save(tmp_path / "first.parquet"), second.save(tmp_path / "second.parquet")]
    truth_path = tmp_path / "truth.parquet"
    truth.to_parquet(truth_path)
    out = tmp_path / "report.html"
    assert main(["report", *map(str, files), "--truth", str(truth_path), "--out",
                 str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    for result in (first, second):
        assert error_summary(cells_with_truth(result, truth)).describe()[1:] in text


def test_demo_scores_with_the_shared_truth(tmp_path, monkeypatch, capsys):
    """``didmem demo``'s truth lines on a stand-in lab run (its test proper needs torch): the
    truth of the demo's metric (the table holds another metric too), the numbers of the
    formulas of b0828df."""
    pytest.importorskip("matplotlib")
    import argparse

    import didmem.lab
    from didmem.cli import demo
    from didmem.lab.config import quick_config
    from didmem.lab.pipeline import LabResult

    config = quick_config(seed=0)
    data, truth = simulate_panel(n_cohorts=3, units_per_cohort=20, n_never_treated=30,
                                 n_times=5, time_step=config.checkpoint_every, seed=1)
    data = data.rename(columns={"y": "mean_token_loglik"})
    truth = truth.assign(metric="mean_token_loglik")
    lab_truth = pd.concat([truth, truth.assign(metric="other", tau=9 * truth["tau"])])
    lab = LabResult(out_dir=tmp_path / "lab", config=config, panel=data, truth=lab_truth,
                    exact=pd.DataFrame())
    monkeypatch.setattr(didmem.lab, "run", lambda *args, **kwargs: lab)
    assert demo.run(argparse.Namespace(out=str(tmp_path), seed=0, n_bootstrap=99, quick=True,
                                       overwrite=False, progress=None)) == 0
    printed = capsys.readouterr().out
    result = didmem.load_result(tmp_path / "results.parquet")
    n, rmse, covered = _old_demo(result, truth[["cohort", "time", "tau"]])
    assert (f"truth vs estimate: RMSE {rmse:.4f} over {n} post-treatment cells; the band "
            f"covers the exact truth in {covered} of them") in printed
    inst = pd.read_csv(tmp_path / "instantaneous.csv")
    expected = truth[truth["time"] == truth["cohort"]].set_index("cohort")["tau"]
    np.testing.assert_array_equal(inst["true_tau"], expected.reindex(inst["cohort"]))


def test_saving_records_an_aggregation_band_fallback_without_warning(tmp_path, monkeypatch):
    """Saving computes every aggregation the user did not ask for. Where the sup-t value of
    one falls below the normal quantile (R ``aggte``'s pointwise fallback, which depends on the
    draws and so on the machine), saving raised that InferenceWarning, an error under the
    suite's filter (issue 50: red in a fresh clone). The fallback is recorded in the saved
    aggregation's band instead; the sup-t value is forced low here so that it always happens."""
    from didmem.inference import bands

    data, _ = simulate_panel(n_cohorts=3, units_per_cohort=25, n_never_treated=40,
                             n_times=6, seed=11)
    panel = didmem.Panel(data, unit="unit", time="time", cohort="cohort", outcome="y")
    target = didmem.DiDEstimator(n_bootstrap=99, seed=1).fit(panel)
    monkeypatch.setattr(bands, "sup_t_critical_value", lambda *a, **k: 0.5)
    saved = didmem.load_result(target.save(tmp_path / "r.parquet"))
    assert {saved.aggregate(n).band for n in ("group", "dynamic", "calendar")} == {"pointwise"}
