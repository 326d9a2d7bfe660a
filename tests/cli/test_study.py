"""``didmem run``'s [estimate] and [report] keys are derived from what they fill."""

from __future__ import annotations

import inspect

import pytest

from didmem.study.estimate import (ESTIMATORS, EstimateSettings, estimate_keys, report_keys,
                                   report_options)
from didmem.errors import ParameterError
from didmem.estimators import DiDEstimator, DifferenceEstimator
from didmem.report import render_report

WHERE = "config c.toml: [estimate]"


def _keywords(func):
    return {n for n, p in inspect.signature(func).parameters.items() if p.kind is p.KEYWORD_ONLY}


def test_estimate_keys_are_the_settings_fields_and_the_estimator_keywords():
    own = {"outcomes", "estimator", "covariates", "lower_is_better", "balance"}
    assert estimate_keys("did") == own | _keywords(DiDEstimator) - {"outcome"}
    assert estimate_keys("difference") == own | _keywords(DifferenceEstimator) - {"outcome"}
    assert {"small_sample", "cband", "anticipation", "est_method"} <= estimate_keys("did")
    assert report_keys() == _keywords(render_report) - {"figure_options", "truth"}


def test_every_estimator_keyword_reaches_the_estimator():
    settings = EstimateSettings.from_table(
        {"outcomes": ["y"], "lower_is_better": ["y"], "small_sample": False, "alpha": 0.1,
         "n_bootstrap": 50, "cband": False, "est_method": "reg"}, WHERE)
    est = settings.estimator_for("y")
    assert isinstance(est, DiDEstimator)
    params = est.get_params()
    for key, value in {"small_sample": False, "alpha": 0.1, "n_bootstrap": 50, "cband": False,
                       "est_method": "reg", "lower_is_better": True, "seed": 0}.items():
        assert params[key] == value, key
    assert settings.estimator_for("z").lower_is_better is False
    plain = EstimateSettings.from_table({"estimator": "difference"}, WHERE)
    assert isinstance(plain.estimator_for("y"), DifferenceEstimator)
    assert EstimateSettings.from_table(None, WHERE).estimator == "did"


@pytest.mark.parametrize("table, message", [
    ({"draws": 3}, "[estimate] unknown key 'draws' (did you mean 'n_draws'?); allowed: alpha, "
                    "anticipation, balance, base_period"),
    ({"estimator": "twfe"}, "[estimate] estimator must be 'did' or 'difference' or 'random-timing'; got 'twfe'."),
    ({"estimator": "difference", "est_method": "dr"},
     "[estimate] est_method goes with estimator = 'did'."),
    ({"estimator": "difference", "covariates": ["x"], "base_period": "universal"},
     "[estimate] base_period and covariates go with estimator = 'did'."),
    ({"alpha": 2.0}, "[estimate] The 'alpha' parameter of DiDEstimator must be"),
    ({"outcomes": "y"}, "[estimate] outcomes must be a list of strings; got 'y'."),
    ({"outcomes": []}, "[estimate] outcomes is empty; leave it out to estimate every"),
    ({"outcomes": ["y", "z", "y"]}, "[estimate] outcomes lists 'y' more than once."),
])
def test_estimate_mistakes_are_one_line(table, message):
    with pytest.raises(ParameterError) as info:
        EstimateSettings.from_table(table, WHERE)
    assert message in str(info.value) and str(info.value).startswith(WHERE)


def test_report_options():
    where = "config c.toml: [report]"
    assert report_options({"title": "T", "notes": "n", "figures": ["profile"]}, where) == {
        "title": "T", "notes": "n", "figures": ["profile"]}
    for table, message in [({"colour": 1}, "unknown key 'colour'; allowed: figures, notes, sensitivity, title"),
                           ({"figure_options": {}}, "unknown key 'figure_options'"),
                           ({"title": 3}, "title must be a string; got 3."),
                           ({"figures": "profile"}, "figures must be a list of strings")]:
        with pytest.raises(ParameterError, match=message):
            report_options(table, where)


def test_estimators_named_on_the_command_line_and_in_files_are_the_same():
    import argparse

    from didmem.cli import estimate

    parser = argparse.ArgumentParser()
    estimate.add_arguments(parser)
    option = next(a for a in parser._actions if a.dest == "estimator")
    # a study's estimators (random timing among them, its own result kind), then the command
    # line's own whose result is no profile a study reports: membership inference
    assert "random-timing" in ESTIMATORS
    assert option.choices == [*ESTIMATORS, "membership"]
    assert option.default == "did"
