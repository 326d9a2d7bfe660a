"""Every public entry point refuses malformed arguments with a DidmemError naming them.

A property test over the declarations themselves: for each function or class that declares
its constraints (:func:`didmem._validation.validate_params`, ``_constraints``), values drawn
from a pool of odd ones (wrong types, NaN, negative, empty, ...) that break the declared
constraint must be refused with a :class:`~didmem.DidmemError` whose message names the
argument, never with another library's exception. Entry points that take objects rather than
declared values are listed by hand below.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import didmem
from didmem._validation import constraints_of
from didmem.errors import DidmemError

ODD_VALUES = [None, "a", "", "0.8", -1, -5, 0, 1, 2.5, -0.5, 1.5, 10**30, float("nan"),
              float("inf"), -float("inf"), [], {}, [1], [1, 1], {0: 0.0}, (), True, False,
              object(), np.float64("nan"), np.int64(-3)]


@pytest.fixture(scope="module")
def panel():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=8, n_never_treated=10,
                                           n_times=5, seed=0)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


@pytest.fixture(scope="module")
def event_study(panel):
    return didmem.DiDEstimator(base_period="universal", n_bootstrap=0).fit(panel) \
        .aggregate("dynamic")


@pytest.fixture(scope="module")
def plan():
    return didmem.plan_design(didmem.Assumptions(n_cohorts=2, n_checkpoints=4),
                              units_per_cohort=[10, 20], effect=0.5, random_state=0)


_FITTED = {}


def _fitted(panel):
    """The panel's fit, once (the property test draws hundreds of calls)."""
    if id(panel) not in _FITTED:
        _FITTED[id(panel)] = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    return _FITTED[id(panel)]


def _calls(panel, event_study, plan):
    """``owner -> call(name, value)`` for each entry point with declared constraints."""
    assumptions = didmem.Assumptions(n_cohorts=2, n_checkpoints=4)
    calls = {
        didmem.sensitivity: lambda n, v: didmem.sensitivity(event_study, **{n: v}),
        didmem.plan_design: lambda n, v: didmem.plan_design(
            assumptions, **{"units_per_cohort": 10, "effect": 0.5, n: v}),
        didmem.Assumptions: lambda n, v: didmem.Assumptions(
            **{"n_cohorts": 2, "n_checkpoints": 4, n: v}),
        didmem.DesignPlan.recommend: lambda n, v: plan.recommend(**{n: v}),
        didmem.datasets.simulate_panel: lambda n, v: didmem.datasets.simulate_panel(
            **{"n_cohorts": 1, "units_per_cohort": 2, "n_never_treated": 2, n: v}),
        didmem.GroupTimeResult.aggregate: lambda n, v: _fitted(panel).aggregate(
            **{"kind": "dynamic", n: v}),
    }
    for cls in (didmem.DiDEstimator, didmem.DifferenceEstimator, didmem.TWFEEstimator):
        calls[cls] = (lambda c: lambda n, v: c(**{n: v}).fit(panel))(cls)
    return calls


def _declared(panel, event_study, plan):
    return [(owner, name, call) for owner, call in _calls(panel, event_study, plan).items()
            for name in constraints_of(owner)]


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(data=st.data())
def test_declared_constraints_are_enforced_with_a_named_error(panel, event_study, plan, data):
    owner, name, call = data.draw(st.sampled_from(_declared(panel, event_study, plan)))
    value = data.draw(st.sampled_from(ODD_VALUES))
    constraint = constraints_of(owner)[name]
    assume(not constraint(value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DidmemError, match=f"'{name}'"):
            call(name, value)


def test_every_declared_argument_is_reached(panel, event_study, plan):
    """The pool of odd values breaks every declared constraint at least once, so the property
    test above exercises every argument (a check that cannot be vacuous)."""
    for owner, name, _ in _declared(panel, event_study, plan):
        constraint = constraints_of(owner)[name]
        assert any(not constraint(v) for v in ODD_VALUES), (owner, name)


@pytest.mark.parametrize("case, name", [
    ("plot_sensitivity", "sensitivity"),
    ("plot_plan", "plan"),
    ("sensitivity_data", "AggregateResult"),
    ("plan_source", "source"),
    ("saved_pilot", "pass the pilot's panel"),
])
def test_objects_of_the_wrong_kind_are_named(panel, event_study, plan, tmp_path, case, name):
    pytest.importorskip("matplotlib")
    from didmem import plotting

    cases = {
        "plot_sensitivity": lambda: plotting.plot_sensitivity(event_study),
        "plot_plan": lambda: plotting.plot_plan(event_study),
        "sensitivity_data": lambda: didmem.sensitivity(pd.DataFrame()),
        "plan_source": lambda: didmem.plan_design(pd.DataFrame(), units_per_cohort=10),
        "saved_pilot": lambda: didmem.plan_design(
            didmem.load_result(didmem.DiDEstimator(n_bootstrap=0).fit(panel)
                               .save(tmp_path / "r.parquet")), units_per_cohort=10),
    }
    with pytest.raises(DidmemError, match=name):
        cases[case]()


@pytest.mark.parametrize("case, name", [
    ({"weights": []}, "weights column"),
    ({"cluster": {}}, "cluster column"),
    ({"never_treated": []}, "'never_treated' parameter of Panel"),
    ({"never_treated": "never"}, "'never_treated' parameter of Panel"),
    ({"never_treated": True}, "'never_treated' parameter of Panel"),
])
def test_panel_roles_of_the_wrong_kind_are_named(case, name):
    """Before, an unhashable column name reached pandas ("unhashable type: 'list'") and a
    never_treated of another shape numpy's broadcasting error."""
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=4, n_never_treated=4,
                                           n_times=4, seed=0)
    with pytest.raises(DidmemError, match=name):
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y", **case)


@pytest.mark.parametrize("path", [None, -1, 2.5, ["r.parquet"]])
def test_results_files_name_a_path_or_kind_of_the_wrong_type(panel, plan, path):
    with pytest.raises(DidmemError, match="'path' parameter of load_result"):
        didmem.load_result(path)
    fitted = _fitted(panel)
    for save in (fitted.save, plan.save):
        with pytest.raises(DidmemError, match="'path' parameter of save"):
            save(path)


@pytest.mark.parametrize("value", [[], {}, ["dynamic"], None])
def test_aggregation_kinds_and_profile_columns_of_the_wrong_type(panel, tmp_path, value):
    """Before, a list reached a dict lookup or pandas ("unhashable type: 'list'")."""
    fitted = _fitted(panel)
    saved = didmem.load_result(fitted.save(tmp_path / "r.parquet"))
    with pytest.raises(DidmemError, match="aggregation"):
        saved.aggregate(value)
    with pytest.raises(DidmemError, match="Unknown column"):
        fitted.profile(value)
