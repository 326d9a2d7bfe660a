"""The long commands say what they do and how far they are (issue 50, item 5): a first line on
standard output before the work, the progress line on standard error with ``--progress`` (by
default only on a terminal), and ``didmem power`` never overwrites an earlier run's outputs
unless asked (``--overwrite``)."""

from __future__ import annotations

import pytest

import didmem
from didmem.cli import main

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=12,
                                           n_never_treated=30, seed=0)
    path = tmp_path_factory.mktemp("pilot") / "pilot.csv"
    df.to_csv(path, index=False)
    return path


def _power(pilot, out, *extra):
    return ["power", "--pilot", str(pilot), "--outcome", "y", "--units", "10,20",
            "--simulations", "3", "--n-bootstrap", "49", "--out", str(out), *extra]


def test_power_says_what_it_does_and_shows_progress_when_asked(pilot, tmp_path, capsys):
    assert main(_power(pilot, tmp_path / "a", "--progress")) == 0
    captured = capsys.readouterr()
    first = captured.out.splitlines()[0]
    assert first == ("didmem power: 2 design(s), 3 simulated studies each resampled from the "
                     "pilot (6 fits; --progress shows how far) ...")
    assert "power_analysis (simulated, 2 designs)" in captured.err
    assert "6/6 fits | done in" in captured.err
    assert main(_power(pilot, tmp_path / "b")) == 0  # not a terminal, not asked: quiet
    assert capsys.readouterr().err == ""


def test_power_refuses_to_overwrite_an_earlier_run_in_one_line(pilot, tmp_path, capsys):
    import matplotlib

    matplotlib.use("Agg")
    out = tmp_path / "p"
    assert main(_power(pilot, out)) == 0
    before = (out / "power.csv").read_bytes()
    capsys.readouterr()
    assert main(_power(pilot, out, "--units", "30")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds power.csv and power.png of an earlier run" in err
    assert "--overwrite" in err
    assert (out / "power.csv").read_bytes() == before  # untouched
    assert main(_power(pilot, out, "--units", "30", "--overwrite")) == 0
    assert (out / "power.csv").read_bytes() != before


def test_lab_progress_refused_with_replicate_in_one_line(tmp_path, capsys):
    assert main(["lab", "--out", str(tmp_path), "--replicate", "2", "--progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--progress and --no-progress apply to one lab run" in err


@pytest.mark.parametrize("command", ["power", "lab", "demo", "sensitivity"])
def test_long_commands_take_progress_flags(command):
    from didmem.cli import build_parser

    base = {"power": ["--cohorts", "3"], "lab": ["--out", "d"], "demo": [],
            "sensitivity": ["r.parquet", "--m", "1"]}[command]
    parser = build_parser([command])
    assert parser.parse_args([command, *base]).progress is None  # a terminal decides
    assert parser.parse_args([command, *base, "--progress"]).progress is True
    assert parser.parse_args([command, *base, "--no-progress"]).progress is False


def test_a_power_just_below_the_target_is_not_shown_as_reaching_it():
    import pandas as pd

    from didmem.errors import ParameterError
    from didmem.power import PowerAnalysis

    table = pd.DataFrame({"units_per_cohort": [10, 20], "n_validation": [20, 20],
                          "checkpoint_every": [1, 1], "tokens": [1.0, 2.0],
                          "instances": [50, 80], "power": [0.5, 0.79996]})
    analysis = PowerAnalysis(table=table, target="instantaneous", method="simulated",
                             effect_source="pilot", mde_power=0.8, alpha=0.05)
    with pytest.raises(ParameterError, match=r"the highest is 0\.79996 at units_per_cohort=20"):
        analysis.recommend(0.8)
