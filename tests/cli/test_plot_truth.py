"""``didmem plot --truth FILE`` marks the truth on the standalone figures as the report does, and
``--figure truth`` draws the estimates against it (issue 50, item 5)."""

import numpy as np
import pytest

import didmem
from didmem.cli import main

pytest.importorskip("matplotlib")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("truth")
    df, truth = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=15,
                                               n_never_treated=30, seed=3)
    res = didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y"))
    truth.to_parquet(d / "truth.parquet")
    return res.save(d / "r.parquet"), d / "truth.parquet", truth, res


@pytest.fixture
def drawn(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figures = []
    save = Figure.savefig

    def keep(self, *args, **kwargs):
        figures.append(self)
        return save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return figures


@pytest.mark.parametrize("figure", ["instantaneous", "persistent", "residual"])
def test_the_truth_is_marked_as_in_the_report(files, drawn, tmp_path, figure):
    from didmem.report._truth import cells_with_truth, cohort_weights, true_aggregate

    path, truth_path, truth, res = files
    assert main(["plot", str(path), "--figure", figure, "--truth", str(truth_path),
                 "--out", str(tmp_path / "f.png")]) == 0
    ax = drawn[-1].axes[0]
    marks = [line for line in ax.lines if line.get_label() == "truth"]
    assert len(marks) == 1
    agg = res.aggregate(figure)
    want = true_aggregate(cells_with_truth(res, truth), figure, agg.key_name,
                          cohort_weights(res)).reindex(agg.to_frame()[agg.key_name].to_numpy())
    np.testing.assert_allclose(marks[0].get_ydata(), want.to_numpy(float), rtol=1e-12)
    assert main(["plot", str(path), "--figure", figure, "--out", str(tmp_path / "g.png")]) == 0
    assert not [line for line in drawn[-1].axes[0].lines if line.get_label() == "truth"]


def test_figure_truth_draws_estimates_against_the_truth(files, drawn, tmp_path):
    path, truth_path, _, res = files
    assert main(["plot", str(path), "--figure", "truth", "--truth", str(truth_path),
                 "--out", str(tmp_path / "t.png")]) == 0
    ax = drawn[-1].axes[0]
    n_post = int(res.to_frame()["post"].sum())
    assert f"{n_post} post-treatment cells" in ax.get_title()


@pytest.mark.parametrize("args, says", [
    (["--figure", "truth"], "--figure truth draws the estimates against the truth: give --truth"),
    (["--figure", "profile", "--truth", "T"], "--truth is drawn on --figure instantaneous"),
    (["--figure", "instantaneous", "--truth", "missing.csv"], "--truth"),
])
def test_truth_refusals_are_one_line(files, tmp_path, capsys, args, says):
    path, truth_path, _, _ = files
    args = [str(truth_path) if a == "T" else str(tmp_path / a) if a.endswith(".csv") else a
            for a in args]
    assert main(["plot", str(path), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err
