"""Odd option values on the command line (issue 50's fifth-wave probe): the one-line error
names the option or says which to use."""

import subprocess
import sys

import didmem


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "didmem.cli", *map(str, args)],
                          capture_output=True, text=True)


def _error(proc, command):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"didmem {command}: error: "), proc.stderr
    return lines[0]


def test_power_names_the_option_whose_integers_it_cannot_read(tmp_path):
    # before: "expected comma-separated integers, got 'ten'", naming no option (a
    # ParameterError raised after parsing); now argparse's error for the option
    for option in ("--units", "--checkpoint-every", "--validation"):
        proc = _cli("power", "--cohorts", "3", "--checkpoints", "6", "--effect", "0.2",
                    "--outcome-sd", "1", option, "ten", "--out", tmp_path / "p")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last == (f"didmem power: error: argument {option}: expected comma-separated "
                        "integers, got 'ten'"), proc.stderr
    assert not (tmp_path / "p").exists()


def test_compare_of_two_files_of_one_name_asks_for_labels(tmp_path):
    # before: "--labels needs two different names ...; got None" when no --labels was given
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=10, n_never_treated=10,
                                           n_times=4, seed=0)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    df.to_parquet(tmp_path / "a" / "panel.parquet", index=False)
    df.to_parquet(tmp_path / "b" / "panel.parquet", index=False)
    a, b = tmp_path / "a" / "panel.parquet", tmp_path / "b" / "panel.parquet"
    line = _error(_cli("compare", a, b, "--outcome", "y"), "compare")
    assert "same name ('panel')" in line and "--labels A,B" in line
