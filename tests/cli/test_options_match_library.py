"""Every command-line option that configures a library function or class has that function's
default and choices: the command line derives them from the declarations, never retypes them
(issue 24: ``didmem sensitivity`` defaulted to another restriction than ``didmem.sensitivity``).
"""

from __future__ import annotations

import argparse

import pytest

import didmem
from didmem._validation import OneOf, choices_of, constraints_of, defaults_of
from didmem.cli import build_parser
from didmem.cli._options import CLI_SEED
from didmem.study.estimate import EstimateSettings

OWNERS = {
    "sensitivity": [didmem.sensitivity],
    "power": [didmem.power_analysis, didmem.Assumptions, didmem.PowerAnalysis.recommend,
             didmem.DiDEstimator],
    "estimate": [didmem.DiDEstimator, didmem.Panel, EstimateSettings,
                 didmem.RandomTimingEstimator],
}


def _subparser(name):
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _matched(command):
    """``(flag, action, owner, parameter)`` for each option configuring a declared parameter."""
    out = []
    for action in _subparser(command)._actions:
        if not action.option_strings or action.dest == "help":
            continue
        for owner in OWNERS[command]:
            if action.dest in defaults_of(owner):
                out.append((action.option_strings[0], action, owner, action.dest))
                break
    return out


@pytest.mark.parametrize("command", sorted(OWNERS))
def test_defaults_and_choices_are_the_librarys(command):
    matched = _matched(command)
    assert len(matched) >= 3, matched  # the mapping above finds the options it should
    for flag, action, owner, name in matched:
        if action.required:
            continue
        default, library = action.default, defaults_of(owner)[name]
        if flag == "--seed":  # fixed on purpose, so that a command repeated gives the same
            assert default == CLI_SEED, (command, flag)  # output (an estimator draws afresh)
            continue
        if isinstance(default, str) and not isinstance(library, str):  # "1,2": a list
            values = [type(library)(v) for v in default.split(",")]
            default = values[0] if len(values) == 1 else values
        # None: the option is left out of the call when not given, so the library's applies
        assert default is None or default == library, (command, flag)
        constraint = constraints_of(owner).get(name)
        if isinstance(constraint, OneOf) and action.choices is not None:
            library = [v for v in constraint.values if v is not None]
            if (command, flag) == ("estimate", "--estimator"):  # then the command line's
                library += ["membership"]  # own (not a study's)
            if (command, flag) == ("estimate", "--control"):  # and random timing's own
                library += [v for v in choices_of(didmem.RandomTimingEstimator,
                                                  "control_group") if v not in library]
            assert list(action.choices) == library, (command, flag)


def test_sensitivity_default_restriction_is_the_librarys():
    args = build_parser().parse_args(["sensitivity", "r.parquet", "--m", "1"])
    assert args.restriction == defaults_of(didmem.sensitivity)["restriction"] == "smoothness"


def test_base_period_choices_come_from_the_estimator():
    action = next(a for a in _subparser("estimate")._actions if a.dest == "base_period")
    assert list(action.choices) == [v for v in constraints_of(didmem.DiDEstimator)
                                    ["base_period"].values]
