"""The HTML report: self-contained, and not blank in a real browser (headless Chromium)."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import didmem

pytest.importorskip("matplotlib")
from didmem.report import render_report, write_report  # noqa: E402


@pytest.fixture(scope="module")
def results():
    out = {}
    for seed in (0, 1):
        df, _ = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=30,
                                               n_never_treated=80, seed=seed)
        panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
        out[f"model {seed}"] = didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(panel)
    return out


def test_report_is_self_contained(results):
    text = render_report(results, title="Two models")
    assert text.startswith("<!DOCTYPE html>") and "Two models" in text
    # every figure inline, nothing fetched from anywhere
    # five per result, the correlation, the difference of the two (didmem.compare_profiles)
    assert len(re.findall(r"src='data:image/png;base64,", text)) == 2 * 5 + 1 + 1
    assert not re.search(r"(src|href)=['\"](https?:)?//", text)
    for part in ("Pre-test", "Settings", "Instantaneous memorisation", "Persistent memorisation",
                 "Residual memorisation", "Correlation of profiles", "never_treated",
                 "Differences of profiles"):
        assert part in text


def test_unknown_figure_is_refused(results):
    with pytest.raises(didmem.ParameterError, match="Unknown figure"):
        render_report(results, figures=["profile", "pie"])


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_report_renders_in_headless_chromium(results, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no headless browser (Debian: apt-get install chromium)")
    from PIL import Image

    page = write_report(results, tmp_path / "report.html")
    shot = tmp_path / "report.png"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--window-size=1200,1800",
                           f"--screenshot={shot}", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.exists(), proc.stderr[-2000:]
    image = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert image.shape == (1800, 1200)
    # not blank: dark text and mid-grey figure pixels over a good share of the page
    assert image.std() > 20
    assert (image < 128).mean() > 0.01
    # the figures appear: rows of the lower half have colour variation too
    assert image[900:].std() > 20


def test_pretest_section_counts_band_and_warns_on_many_cells(results):
    text = render_report(results["model 0"], figures=[])
    pre = results["model 0"].to_frame().query("not post")
    assert f"of {len(pre)} pre-treatment cells are significant" in text
    assert "rejects too often" not in text  # few pre-treatment cells: no caveat
    df, _ = didmem.datasets.simulate_panel(n_cohorts=16, units_per_cohort=20, n_never_treated=60,
                                           seed=0)
    many = didmem.DiDEstimator(n_bootstrap=49, seed=0).fit(
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y"))
    assert many.pretest.df >= 100
    assert "rejects too often" in render_report(many, figures=[])


_PROBE = """<script>
window.addEventListener('load', function () {
  var heat = document.getElementById('r0-heat'), img = heat.querySelector('img');
  var d = JSON.parse(document.getElementById('r0-data').textContent);
  var b = img.getBoundingClientRect(), box = d.box, i = %d, j = %d;
  var x = b.left + (box[0] + (j + 0.5) / d.shape[1] * (box[2] - box[0])) * b.width;
  var y = b.top + (box[1] + (i + 0.5) / d.shape[0] * (box[3] - box[1])) * b.height;
  img.dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: y, bubbles: true}));
  var tip = heat.querySelector('.tip').textContent;
  var input = document.querySelector('#r0-cells input');
  input.value = 'cohort=%s significant=true';
  input.dispatchEvent(new Event('input'));
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = tip + '\\n#' + document.querySelector('#r0-cells .count').textContent;
  document.body.appendChild(out);
});
</script></body>"""


def test_tooltip_and_filter_work_in_headless_chromium(results, tmp_path):
    """A real browser: the pointer over a cell shows that cell; the filter counts right."""
    browser = _browser()
    if browser is None:
        pytest.skip("no headless browser (Debian: apt-get install chromium)")
    res = results["model 0"]
    frame = res.to_frame()
    cell = frame[frame["post"]].iloc[1]
    cohorts, times = np.sort(frame["cohort"].unique()), np.sort(frame["time"].unique())
    i, j = int(np.searchsorted(cohorts, cell["cohort"])), int(np.searchsorted(times, cell["time"]))
    text = render_report({"m": res}).replace(
        "</body>", _PROBE % (i, j, f"{cell['cohort']:g}"), 1)
    page = tmp_path / "probe.html"
    page.write_text(text)
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--window-size=1200,1800", "--dump-dom", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    probe = re.search(r"<pre id=\"probe\">(.*?)</pre>", proc.stdout, re.S)
    assert probe, proc.stderr[-2000:]
    tip, count = probe.group(1).split("\n#")
    assert f"cohort: {cell['cohort']:g}\ntime: {cell['time']:g}\n" in tip
    assert abs(cell["estimate"]) > 1e-3  # shown to 4 significant digits, not in e-notation
    assert f"estimate: {float(f'{cell.estimate:.4g}'):g}\n" in tip
    n_sig = int((frame["significant"] & (frame["cohort"] == cell["cohort"])).sum())
    assert count == f"{n_sig} of {len(frame)} cells"


def test_the_report_offers_every_single_result_figure():
    """The report's figure names are plotting.PLOTS' names (one list of figures)."""
    from didmem import plotting
    from didmem.report import FIGURES

    assert set(FIGURES) == set(plotting.PLOTS)
