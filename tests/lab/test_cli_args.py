"""The argparse options that ``didmem lab`` mounts."""

import argparse

import pytest

from didmem.lab.cli_args import add_arguments, config_changes, main_from_args


def _parse(*argv):
    return add_arguments(argparse.ArgumentParser()).parse_args(list(argv))


def test_defaults_change_nothing():
    args = _parse("--out", "d")
    assert args.out == "d" and not args.quick and args.seed == 0 and not args.overwrite
    assert config_changes(args) == {}


def test_options_map_to_config_fields():
    args = _parse("--out", "d", "--quick", "--seed", "3", "--exact-cohorts", "12,24",
                  "--subset-models", "4", "--validation-shift", "0.3", "--text-file", "a.txt",
                  "--text-file", "b.txt", "--threads", "2")
    assert args.quick and args.seed == 3
    assert config_changes(args) == {
        "exact_cohorts": (12, 24), "n_subset_models": 4, "validation_shift": 0.3,
        "text_files": ("a.txt", "b.txt"), "threads": 2}
    assert config_changes(_parse("--out", "d", "--exact-cohorts", "none")) == {
        "exact_cohorts": ()}


def test_bad_cohort_list():
    with pytest.raises(SystemExit):
        _parse("--out", "d", "--exact-cohorts", "x,y")


def test_main_from_args_prints_summary(quick_run, capsys):
    args = _parse("--out", str(quick_run.out_dir), "--quick")
    assert main_from_args(args) == 0
    out = capsys.readouterr().out
    assert "tau(g,g)" in out and "already complete" in out
