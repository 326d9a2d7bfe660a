"""``didmem lab``'s options are generated from LabConfig's fields (didmem/cli/_fields.py)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from didmem.cli import _fields
from didmem.cli.lab import FLAGS, add_arguments, config_changes
from didmem.lab import LabConfig, quick_config
from didmem.lab.config import PLACEMENTS


def _options():
    parser = add_arguments(argparse.ArgumentParser())
    return parser, {a.dest: a for a in parser._actions}


def _argv(config: LabConfig) -> list[str]:
    """Command-line arguments that give every field of ``config``."""
    _, options = _options()
    argv = ["--out", "d"]
    for field in dataclasses.fields(LabConfig):
        value, flag = getattr(config, field.name), options[field.name].option_strings[0]
        if value is None:
            continue
        if field.name == "exact_cohorts" and value == ():
            argv += [flag, "none"]
        elif field.name == "text_files":
            for path in value:
                argv += [flag, path]
        elif options[field.name].nargs == 0:  # a flag (--vary-init, --track)
            argv += [flag] if value else []
        else:
            argv += [flag, ",".join(map(str, value)) if isinstance(value, tuple) else str(value)]
    return argv


def test_every_field_has_an_option_with_the_flag_users_have():
    _, options = _options()
    for field in dataclasses.fields(LabConfig):
        assert field.name in options, field.name
    assert {name: options[name].option_strings for name in FLAGS} == {
        "n_subset_models": ["--subset-models"], "n_domains": ["--domains"],
        "text_files": ["--text-file"]}
    for name, flag in (("validation_mix", "--validation-mix"), ("threads", "--threads"),
                       ("exact_cohorts", "--exact-cohorts"), ("n_words", "--n-words"),
                       ("validation_shift", "--validation-shift"), ("seed", "--seed")):
        assert options[name].option_strings == [flag]


def test_help_comes_from_the_docstring():
    _, options = _options()
    described = _fields.docstring_parameters(LabConfig)
    assert set(described) == {f.name for f in dataclasses.fields(LabConfig)}
    for field in dataclasses.fields(LabConfig):
        assert options[field.name].help.startswith(described[field.name].replace("%", "%%"))
    assert options["n_validation"].help.startswith(
        "Validation instances, never trained on (the never-treated units).")
    # the same description for each name of a combined entry; literals unwrapped
    assert options["n_heads"].help.startswith("Shape of the GPTNeoXForCausalLM.")
    assert "max_position_embeddings of the model; seq_len may not" in options["max_positions"].help


def test_defaults_shown_from_the_dataclass_and_the_quick_scale():
    _, options = _options()
    assert options["n_words"].help.endswith("(default: 192; --quick: 96)")
    assert options["learning_rate"].help.endswith("(default: 0.02)")
    assert options["seed"].default == 0 and options["n_words"].default is None


def test_types_and_choices_come_from_the_constraints():
    parser, options = _options()
    assert options["placement"].choices == list(PLACEMENTS)
    assert options["n_words"].type is int and options["learning_rate"].type is float
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "d", "--n-words", "1.5"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "d", "--placement", "middle"])


@pytest.mark.parametrize("config", [
    quick_config(seed=3, placement="last_batch", n_analysed=16, exact_cohorts=(24, 36),
                 metrics=("sequence_loglik",), n_subset_models=2, learning_rate=0.01),
    LabConfig(n_domains=3, validation_mix=0.5, exact_cohorts="auto", threads=2),
    quick_config(text_files=("a.txt", "b.txt"), exact_cohorts=()),
    quick_config(runs=3, vary_init=True),
    quick_config(track=True),
])
def test_every_field_given_on_the_command_line_reaches_the_config(config):
    args = add_arguments(argparse.ArgumentParser()).parse_args(_argv(config))
    assert LabConfig(seed=args.seed, **config_changes(args)) == config


def test_docstring_parameters_of_a_small_class():
    class Settings:
        """Settings.

        Parameters
        ----------
        a, b : int
            Two numbers, see :attr:`Settings.c`
            and ``c``.
        c : str

        Returns
        -------
        nothing : None
            Not a parameter.
        """

    assert _fields.docstring_parameters(Settings) == {
        "a": "Two numbers, see c and c.", "b": "Two numbers, see c and c.", "c": ""}


def test_an_undocumented_field_is_refused():
    @dataclasses.dataclass
    class Settings:
        """Settings.

        Parameters
        ----------
        a : int
            A number.
        """

        a: int = 1
        b: int = 2

    with pytest.raises(ValueError, match="does not describe its field 'b'"):
        _fields.add_dataclass_options(argparse.ArgumentParser(), Settings)


def test_workers_reach_the_lab(tmp_path, capsys):
    from didmem.cli import main

    assert main(["lab", "--quick", "--runs", "2", "--workers", "0",
                 "--out", str(tmp_path / "x")]) == 2
    assert "The option --workers must be an integer in [1, inf]" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
