"""The report tells the finding: in words, with the truth beside it, every cell readable."""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2

import didmem
from didmem.inference.pretrend.statistics import PretrendTest, wald_power

pytest.importorskip("matplotlib")
from didmem.report import render_report, write_report  # noqa: E402
from didmem.report._pretest import detectable_drift  # noqa: E402


@pytest.fixture(scope="module")
def simulated():
    df, truth = didmem.datasets.simulate_panel(n_cohorts=5, units_per_cohort=60,
                                               n_never_treated=150, time_step=20, seed=3)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    return didmem.DiDEstimator(n_bootstrap=199, seed=0).fit(panel), truth


def _section(text, start, end):
    return text.split(start, 1)[1].split(end, 1)[0]


def test_finding_says_how_many_cohorts_how_large_and_comes_first(simulated):
    res, _ = simulated
    text = render_report({"sim": res})
    inst = res.aggregate("instantaneous").to_frame()
    found = int((inst["significant"] & (inst["estimate"] > 0)).sum())
    finding = _section(text, "<h3>Finding</h3>", "</div>")
    assert (f"Instantaneous memorisation is significant in {found} of {len(inst)} cohorts"
            in finding)
    overall = res.aggregate("instantaneous").overall.estimate
    assert f"On average it is {didmem.report._html.fmt(overall)} units of y" in finding
    res_agg = res.aggregate("residual").to_frame()
    kept = int((res_agg["significant"] & (res_agg["estimate"] > 0)).sum())
    assert f"it is significant in {kept} of {len(res_agg)} cohorts" in finding
    test = res.pretrend_test()
    assert f"p = {test.pvalue:.3g}" in finding and f"Its power is {test.power:.2f}" in finding
    assert "cannot be ruled out" in finding
    # the order a reader needs: finding, key figure, tables, cells, settings last
    order = [text.index(s) for s in ("<h3>Finding</h3>", "memorisation profile heatmap",
                                     "<h3>Instantaneous memorisation", "<h3>Every cell</h3>",
                                     "<h3>Settings</h3>")]
    assert order == sorted(order)
    assert "<pre>" not in text  # no summary block repeating the settings
    assert "cband</td><td>None" not in text and "simultaneous (default)" in text


def test_persistence_in_training_steps_and_checkpoints(simulated):
    res, _ = simulated
    per = res.aggregate("persistent").to_frame()
    sig = (per["significant"] & (per["estimate"] > 0)).to_numpy()
    finding = _section(render_report(res, figures=[]), "<h3>Finding</h3>", "</div>")
    assert (f"Persistent memorisation is significant at {int(sig.sum())} of {len(per)} later "
            "event times") in finding
    if sig.any():
        e = per["event_time"][sig].iloc[-1]
        assert f"at {e:.0f} training steps ({int(e / 20)} checkpoint" in finding


@pytest.mark.parametrize("n_obs", [None, 400])
def test_detectable_drift_has_the_stated_power(n_obs):
    # a test with three restrictions, identity covariance, stated power at drift d: the
    # drift the report names must have 80% power by wald_power's own computation
    shape = np.array([1.0, 2.0, 3.0])
    d = 0.3
    power = wald_power(d * shape, np.eye(3), n_obs=n_obs)
    test = PretrendTest("event", 1.0, 0.5, df=3.0,
                        df_denominator=None if n_obs is None else float(n_obs - 3),
                        n_restrictions=3, power=power, drift=d)
    d80 = detectable_drift(test)
    assert d80 > d
    assert wald_power(d80 * shape, np.eye(3), n_obs=n_obs) == pytest.approx(0.8, abs=1e-6)
    # no stated power above the size: nothing to say
    assert detectable_drift(PretrendTest("event", 1.0, 0.5, df=3.0, power=0.05,
                                         drift=d)) is None
    assert chi2.isf(0.05, 3) > 0


def test_truth_beside_the_estimates(simulated):
    res, truth = simulated
    text = render_report({"sim": res}, truth=truth)
    frame = res.to_frame().merge(truth[["cohort", "time", "tau"]], on=["cohort", "time"])
    post = frame[frame["post"]]
    rmse = float(np.sqrt(np.mean((post["estimate"] - post["tau"]) ** 2)))
    covered = int(((post["ci_lower"] <= post["tau"]) & (post["tau"] <= post["ci_upper"])).sum())
    assert (f"RMSE {rmse:.3g} and mean error {(post['estimate'] - post['tau']).mean():+.3g} over "
            f"{len(post)} post-treatment cells; the band covers the truth in {covered} of "
            f"{len(post)}") in text
    inst = _section(text, "<h3>Instantaneous memorisation", "</table>")
    assert "<th>true_tau</th>" in inst
    true_inst = frame[frame["event_time"] == 0].set_index("cohort")["tau"]
    for value in true_inst:
        assert f"<td>{value:.4g}</td>" in inst
    assert "estimate against truth" in text  # the overlay figure
    # persistent truth: the treated-size weighted mean over cohorts at each event time
    per = _section(text, "<h3>Persistent memorisation", "</table>")
    e = frame[frame["event_time"] > 0]
    first = e[e["event_time"] == e["event_time"].min()]
    expected = np.average(first["tau"], weights=first["n_treated"])
    assert f"<td>{expected:.4g}</td>" in per


def test_truth_of_another_outcome_or_grid_is_refused(simulated, tmp_path):
    res, truth = simulated
    other = truth.assign(metric="token_accuracy")
    with pytest.raises(didmem.ParameterError, match="truth has no metric 'y'"):
        render_report(res, truth=other)
    shifted = truth.assign(cohort=truth["cohort"] + 1000)
    path = tmp_path / "report.html"
    with pytest.raises(didmem.ParameterError, match="shares no \\(cohort, time\\) cell"):
        write_report(res, path, truth=shifted)
    assert not path.exists()  # nothing half-written


def _cells_data(text):
    blob = re.search(r"<script type='application/json' id='r0-data'>(.*?)</script>", text, re.S)
    return json.loads(blob.group(1).replace("<\\/", "</"))


def test_every_cell_is_in_the_page_and_the_heatmap_map_is_right(simulated):
    from PIL import Image
    from matplotlib import colormaps

    res, truth = simulated
    text = render_report(res, truth=truth)
    data = _cells_data(text)
    frame = res.to_frame()
    assert len(data["rows"]) == len(frame) and "true_tau" in data["cols"]
    cols = data["cols"]
    got = pd.DataFrame(data["rows"], columns=cols)
    np.testing.assert_allclose(got["estimate"], frame["estimate"], rtol=1e-5)
    # the tooltip's geometry: the centre of each significant post-treatment cell, found through
    # the stored axes box, has that cell's colour in the embedded PNG
    src = re.search(r"<div class='heat' id='r0-heat'><img [^>]*src='data:image/png;base64,"
                    r"([^']+)'", text).group(1)
    image = np.asarray(Image.open(io.BytesIO(base64.b64decode(src))).convert("RGB"), float)
    h, w, _ = image.shape
    x0, top, x1, bottom = data["box"]
    n_rows, n_cols = data["shape"]
    shown = frame[frame["significant"] & frame["post"]]
    lim = np.abs(shown["estimate"]).max()
    cmap = colormaps["RdBu_r"]
    assert len(shown) >= 3
    for row in shown.itertuples():
        i, j = data["cohorts"].index(row.cohort), data["times"].index(row.time)
        x = (x0 + (j + 0.5) / n_cols * (x1 - x0)) * w
        y = (top + (i + 0.5) / n_rows * (bottom - top)) * h
        want = np.array(cmap((row.estimate + lim) / (2 * lim))[:3]) * 255
        np.testing.assert_allclose(image[int(y), int(x)], want, atol=12)


# more pre-treatment cells than units: R's Wald test cannot be computed, and says so
@pytest.mark.filterwarnings("ignore:Pre-test not computed:didmem.errors.InferenceWarning")
def test_paper_scale_page_stays_one_modest_file():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=40, units_per_cohort=5,
                                           n_never_treated=40, seed=0)
    res = didmem.DiDEstimator(n_bootstrap=0).fit(
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y"))
    text = render_report(res, figures=["profile"])
    assert len(_cells_data(text)["rows"]) == len(res.to_frame()) > 1000
    assert len(text) < 1_500_000
    assert not re.search(r"(src|href)=['\"](https?:)?//", text)
    assert "R did's Wald pre-test is not available" in text
