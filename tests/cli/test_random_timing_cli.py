"""``didmem estimate --estimator random-timing``: its options reach the estimator, on a panel
file and on a folder; ``--fisher`` is refused by name where it cannot run."""

import numpy as np
import pytest

import didmem
from didmem.cli import build_parser, main
from didmem.results.random_timing import RandomTimingResult

from ..test_panel_scan import COLUMNS, _write


@pytest.fixture(scope="module")
def frame():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=15, n_never_treated=20,
                                           n_times=6, seed=47)
    return df


def _run(source, out, *extra):
    return main(["estimate", str(source), "--outcome", "y", "--out", str(out),
                 "--estimator", "random-timing", *extra])


def test_panel_file_with_fisher_and_beta(tmp_path, frame, capsys):
    one = tmp_path / "one.parquet"
    frame.to_parquet(one)
    out = tmp_path / "rt.parquet"
    assert _run(one, out, "--fisher", "19", "--beta", "1", "--randomised", "all",
                "--control", "last_treated", "--n-bootstrap", "0") == 0
    printed = capsys.readouterr().out
    assert "Roth & Sant'Anna's estimator under random timing (beta = 1" in printed
    assert "every instance's cohort" in printed and "design-based" in printed
    assert "Fisher randomisation test (19 permutations" in printed
    res = didmem.load_result(out)
    assert isinstance(res, RandomTimingResult)
    assert (res.params["beta"], res.params["n_fisher"], res.randomised,
            res.params["control_group"]) == (1.0, 19, "all", "last_treated")
    ref = didmem.RandomTimingEstimator(beta=1, control_group="last_treated", n_draws=0,
                                       outcome="y").fit(didmem.Panel(frame, **COLUMNS))
    np.testing.assert_allclose(res.to_frame()["estimate"], ref.to_frame()["estimate"],
                               rtol=1e-12, atol=1e-14)


def test_defaults_are_the_estimators(tmp_path, frame, capsys):
    one = tmp_path / "one.parquet"
    frame.to_parquet(one)
    assert _run(one, tmp_path / "rt.parquet") == 0
    res = didmem.load_result(tmp_path / "rt.parquet")
    assert (res.params["beta"], res.params["n_fisher"], res.randomised,
            res.params["control_group"]) == (None, 0, "training", "not_yet_treated")
    assert "plug-in efficient beta" in capsys.readouterr().out


def test_folder_fits_from_moments_and_refuses_fisher_by_name(tmp_path, frame, capsys):
    folder = _write(tmp_path / "data", frame, n_files=3)
    one = tmp_path / "one.parquet"
    frame.to_parquet(one)
    assert _run(folder, tmp_path / "a.parquet", "--n-bootstrap", "0") == 0
    assert "fitted from its moments" in capsys.readouterr().out
    assert _run(one, tmp_path / "b.parquet", "--n-bootstrap", "0") == 0
    got = didmem.load_result(tmp_path / "a.parquet").aggregate("simple").to_frame()
    ref = didmem.load_result(tmp_path / "b.parquet").aggregate("simple").to_frame()
    for column in ("estimate", "std_error", "std_error_neyman"):
        np.testing.assert_allclose(got[column], ref[column], rtol=1e-9, atol=1e-12)
    capsys.readouterr()
    assert _run(folder, tmp_path / "c.parquet", "--fisher", "10") == 2
    err = capsys.readouterr().err
    assert "--fisher" in err and "folder" in err
    assert not (tmp_path / "c.parquet").exists()


@pytest.mark.parametrize("estimator", ["did", "difference", "membership"])
@pytest.mark.parametrize("flag", [("--fisher", "10"), ("--beta", "0"), ("--randomised", "all")])
def test_random_timing_options_refused_with_other_estimators(tmp_path, frame, capsys,
                                                              estimator, flag):
    one = tmp_path / "one.parquet"
    frame.to_parquet(one)
    code = main(["estimate", str(one), "--outcome", "y", "--out", str(tmp_path / "r.parquet"),
                 "--estimator", estimator, *flag])
    assert code == 2
    assert flag[0] in capsys.readouterr().err
    assert not (tmp_path / "r.parquet").exists()


def test_beta_parses_efficient_and_numbers_and_refuses_words(capsys):
    parser = build_parser()
    base = ["estimate", "p.parquet", "--outcome", "y", "--out", "r.parquet"]
    assert parser.parse_args(base + ["--beta", "efficient"]).beta is None
    assert parser.parse_args(base + ["--beta", "0"]).beta == 0.0
    with pytest.raises(SystemExit):
        parser.parse_args(base + ["--beta", "best"])
    assert "expected 'efficient' or a number" in capsys.readouterr().err


def test_did_only_flags_refused_with_random_timing(tmp_path, frame, capsys):
    one = tmp_path / "one.parquet"
    frame.to_parquet(one)
    assert _run(one, tmp_path / "r.parquet", "--base-period", "universal") == 2
    assert "--base-period do not apply to --estimator random-timing" in capsys.readouterr().err


def test_power_plans_random_timing_from_a_pilot(tmp_path, frame, capsys):
    import pandas as pd

    pilot = tmp_path / "pilot.parquet"
    frame.to_parquet(pilot)
    out = tmp_path / "plan"
    assert main(["power", "--pilot", str(pilot), "--outcome", "y", "--estimator",
                 "random-timing", "--target", "overall", "--units", "5,20", "--simulations",
                 "20", "--effect", "0.3", "--out", str(out)]) == 0
    assert "RandomTimingEstimator: overall memorisation" in capsys.readouterr().out
    table = pd.read_csv(out / "power.csv")
    assert table["units_per_cohort"].tolist() == [5, 20]
    assert table["power"].between(0, 1).all()


@pytest.mark.parametrize("argv,message", [
    (["--cohorts", "3", "--checkpoints", "5", "--effect", "0.3", "--target", "overall"],
     "plans from a pilot"),
    (["--pilot", "PILOT", "--outcome", "y"], "plans --target overall"),
])
def test_power_refuses_what_random_timing_does_not_plan(tmp_path, frame, capsys, argv,
                                                        message):
    pilot = tmp_path / "pilot.parquet"
    frame.to_parquet(pilot)
    argv = [str(pilot) if a == "PILOT" else a for a in argv]
    assert main(["power", *argv, "--estimator", "random-timing",
                 "--out", str(tmp_path / "plan")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "plan" / "power.csv").exists()
