"""A membership-inference result is a result of its own (issue 50, item 5): its summary gives
the AUC with its interval; it is saved and read back; it is reported and drawn; the command line
fits it (``didmem estimate --estimator membership``); and every result kind that reaches the
report renders or is refused in one line that says what to do."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.cli import main
from didmem.errors import ParameterError
from didmem.report import render_report, write_report
from didmem.results.membership import MembershipResult

pytest.importorskip("pyarrow")
pytest.importorskip("matplotlib")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def _frame(seed=0):
    df, truth = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=12,
                                               n_never_treated=20, seed=seed)
    return df, truth


def _panel(df):
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


@pytest.fixture(scope="module")
def fitted():
    df, truth = _frame()
    return didmem.MembershipInferenceEstimator(score="y").fit(_panel(df)), truth


def test_summary_gives_the_auc_with_its_interval(fitted):
    res, _ = fitted
    assert isinstance(res, MembershipResult)
    last = res.auc.dropna(subset=["auc"]).iloc[-1]
    text = res.summary()
    assert f"membership AUC at checkpoint {last['time']:g}: {last['auc']:.3f}" in text
    assert f"[{last['ci_lower']:.3f}, {last['ci_upper']:.3f}]" in text
    assert "before training (c < g" in text  # the pre-treatment AUC: a shift, not memorisation


def test_saved_and_read_back_equal(fitted, tmp_path):
    res, _ = fitted
    path = res.save(tmp_path / "mia.parquet")
    back = didmem.load_result(path)
    assert isinstance(back, MembershipResult)
    pd.testing.assert_frame_equal(back.to_frame(), res.to_frame(), check_exact=False,
                                  rtol=1e-12)
    pd.testing.assert_frame_equal(back.auc, res.auc, check_exact=False, rtol=1e-12)
    pd.testing.assert_frame_equal(back.cell_auc, res.cell_auc, check_exact=False, rtol=1e-12)
    assert back.params == res.params and back.outcome == res.outcome
    assert back.summary().splitlines()[:5] == res.summary().splitlines()[:5]


def test_aggregate_is_refused_with_what_to_do(fitted):
    res, _ = fitted
    with pytest.raises(ParameterError, match="no 'instantaneous' aggregation.*result.auc"):
        res.aggregate("instantaneous")


def test_report_has_the_auc_section_and_the_truth(fitted, tmp_path):
    res, truth = fitted
    path = write_report({"attack": res}, tmp_path / "r.html", truth=truth)
    page = path.read_text()
    last = res.auc.dropna(subset=["auc"]).iloc[-1]
    assert f"AUC <b>{last['auc']:.3f}</b>" in page
    assert "Membership AUC per checkpoint" in page and "data:image/png;base64" in page
    assert "Estimates and truth" in page


def test_report_renders_other_cell_results_and_mixes_them_with_did(tmp_path):
    df, _ = _frame(1)
    panel = _panel(df)
    did = didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(panel)
    cells = did.to_frame()  # another estimator's cells on the same grid, pointwise only
    twfe = didmem.results.CellResult.from_cells(
        cohort=cells["cohort"], time=cells["time"], estimate=cells["estimate"] + 0.1,
        std_error=cells["std_error"], n_units=cells["n_treated"], estimator="TWFEEstimator",
        params={}, outcome="y", assumption="parallel trends and homogeneous effects")
    page = render_report({"twfe": twfe, "did": did})
    assert "<h2>twfe</h2>" in page and "<h2>did</h2>" in page
    assert "pointwise intervals only" in page


@pytest.mark.parametrize("kind", ["dose", "power", "sensitivity", "other"])
def test_report_refuses_what_it_cannot_take_in_one_line(kind, fitted):
    if kind == "power":
        obj = didmem.power_analysis(didmem.Assumptions(n_cohorts=3, n_checkpoints=5),
                                    units_per_cohort=[10], effect=0.5, seed=0)
        match = "PowerAnalysis: a power analysis is not a fitted result"
    elif kind == "dose":
        from didmem.results.dose import DoseResponseResult

        obj = DoseResponseResult(table=pd.DataFrame({"dose": [1], "time": [1.0]}),
                                 outcome="y", base=None, alpha=0.05, critical_value=2.0,
                                 band="pointwise", n_bootstrap=0)
        match = "DoseResponseResult: a dose-response"
    elif kind == "sensitivity":
        class SensitivityResult:  # told by its class name, as the report tells it
            pass

        obj = SensitivityResult()
        match = "sensitivity=\\{'m'"
    else:
        obj = object()
        match = "'x' is a object"
    with pytest.raises(ParameterError, match=match) as info:
        render_report({"x": obj})
    assert "\n" not in str(info.value)


@pytest.fixture(scope="module")
def csv_panel(tmp_path_factory):
    df, _ = _frame(2)
    path = tmp_path_factory.mktemp("mia") / "panel.csv"
    df.to_csv(path, index=False)
    return path


def test_cli_estimates_reports_and_draws_membership(csv_panel, tmp_path, capsys):
    out = tmp_path / "mia.parquet"
    assert main(["estimate", str(csv_panel), "--outcome", "y", "--estimator", "membership",
                 "--members", "all", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "membership AUC at checkpoint" in printed and "(members: all)" in printed
    back = didmem.load_result(out)
    assert isinstance(back, MembershipResult) and back.params["members"] == "all"
    assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    assert "Membership AUC per checkpoint" in (tmp_path / "r.html").read_text()
    for figure in ("auc", "profile"):
        png = tmp_path / f"{figure}.png"
        assert main(["plot", str(out), "--figure", figure, "--out", str(png)]) == 0
        assert png.stat().st_size > 0


@pytest.mark.parametrize("extra, says", [
    (["--control", "not_yet_treated"], "--control do not apply to --estimator membership"),
    (["--exposure", "2"], "--exposure do not apply to --estimator membership"),
    (["--r-inference"], "--r-inference do not apply"),
    (["--members", "some"], "The option --members must be one of"),
])
def test_cli_refuses_did_options_with_membership_in_one_line(csv_panel, tmp_path, capsys,
                                                             extra, says):
    code = main(["estimate", str(csv_panel), "--outcome", "y", "--estimator", "membership",
                 "--out", str(tmp_path / "m.parquet"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and says in err and err.count("\n") == 1


def test_cli_members_needs_membership_and_figures_fit_the_file(csv_panel, tmp_path, capsys):
    code = main(["estimate", str(csv_panel), "--outcome", "y", "--members", "all",
                 "--out", str(tmp_path / "m.parquet")])
    err = capsys.readouterr().err
    assert code == 2 and "--members applies to --estimator membership only" in err
    out = tmp_path / "mia.parquet"
    assert main(["estimate", str(csv_panel), "--outcome", "y", "--estimator", "membership",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["plot", str(out), "--figure", "instantaneous"]) == 2
    err = capsys.readouterr().err
    assert "membership-inference result" in err and "--figure auc" in err
    assert err.count("\n") == 1
    did = tmp_path / "did.parquet"
    assert main(["estimate", str(csv_panel), "--outcome", "y", "--n-bootstrap", "0",
                 "--out", str(did)]) == 0
    capsys.readouterr()
    assert main(["plot", str(did), "--figure", "auc"]) == 2
    assert "--figure auc draws a membership-inference results file" in capsys.readouterr().err


def test_membership_auc_figure_draws_the_interval(fitted):
    import matplotlib

    matplotlib.use("Agg")
    res, _ = fitted
    ax = res.plot("auc")
    line = ax.lines[0]
    rated = res.auc.dropna(subset=["auc"])
    np.testing.assert_allclose(line.get_ydata(), rated["auc"].to_numpy())
    with pytest.raises(ParameterError, match="must be a didmem.MembershipResult"):
        didmem.results.plotting.plot_membership_auc(didmem.DiDEstimator)
