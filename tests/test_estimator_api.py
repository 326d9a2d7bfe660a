"""The one estimator contract, checked on every estimator class that didmem exports.

Constructors take keyword arguments only and store them; ``fit(data)`` is the one way to
estimate (``data`` an instance of the class's ``input_type``), validates every parameter
with one message shape, keeps no fitted state and returns a frozen result on the
(cohort, time) grid; ``with_params`` returns a new estimator and leaves the old one as it was.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem import ParameterError, Panel, SubsetModels, TrainedModel
from didmem._validation import constraints_of, defaults_of
from didmem.estimators import BaseEstimator

ESTIMATORS = sorted(
    (obj for obj in (getattr(didmem.estimators, name) for name in didmem.estimators.__all__)
     if isinstance(obj, type) and issubclass(obj, BaseEstimator) and obj is not BaseEstimator),
    key=lambda cls: cls.__name__)

#: Parameters that keep each fit small (no bootstrap, a dense solve on a tiny model).
QUICK = {
    "DiDEstimator": dict(outcome="y", n_bootstrap=0),
    "DifferenceEstimator": dict(outcome="y", n_bootstrap=0),
    "TWFEEstimator": dict(outcome="y"),
    "ExtractableEstimator": dict(outcome="extractable"),
    "MembershipInferenceEstimator": dict(score="y"),
    "ArchitecturalEstimator": dict(),
    "InfluenceEstimator": dict(solver="direct", damping=1.0),
    "RunsEstimator": dict(outcome="y", n_bootstrap=0),
    "RandomTimingEstimator": dict(outcome="y", n_draws=0),
}


def _panel() -> Panel:
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=20, n_never_treated=40,
                                           n_times=5, seed=1)
    df["extractable"] = (df["y"] > df["y"].median()).astype(int)
    return Panel(df, unit="unit", time="time", cohort="cohort", outcome=["y", "extractable"])


def _subset_models() -> SubsetModels:
    rng = np.random.default_rng(0)
    models, units, times = range(6), range(8), (1.0, 2.0)
    member = {(m, u): (m + u) % 2 for m in models for u in units}
    scores = pd.DataFrame([(m, u, t, rng.normal() + member[m, u]) for m in models
                           for u in units for t in times], columns=["model", "unit", "time", "y"])
    membership = pd.DataFrame([(m, u, float(1 + u % 2), bool(member[m, u])) for m in models
                               for u in units], columns=["model", "unit", "cohort", "member"])
    return SubsetModels(scores, membership)


def _trained_model() -> TrainedModel:
    pytest.importorskip("torch")
    from ._tiny_lm import TinyLM, corpus

    seqs = corpus(6, 5)
    return TrainedModel(TinyLM(hidden=3), seqs, seqs[:2], cohorts=[1.0, 2.0], time=2.0)


def _runs_panel() -> Panel:
    df, _ = didmem.datasets.simulate_runs(n_runs=2, n_cohorts=3, units_per_cohort=20,
                                          n_never_treated=40, n_times=5, seed=1)
    return Panel(df, unit="unit", time="time", cohort="cohort", outcome="y", run="run")


DATA = {Panel: _panel, SubsetModels: _subset_models, TrainedModel: _trained_model}
#: estimators that take a panel of several runs
RUNS_DATA = {"RunsEstimator": _runs_panel}


def _data(cls):
    return RUNS_DATA.get(cls.__name__, DATA[cls.input_type])()


def test_every_exported_estimator_is_checked_here():
    exported = {name for name in didmem.__all__ if name.endswith("Estimator")}
    assert {cls.__name__ for cls in ESTIMATORS} == exported
    assert set(QUICK) == exported
    assert {cls.input_type for cls in ESTIMATORS} <= set(DATA)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_fit_takes_one_argument_and_the_constructor_keywords_only(cls):
    assert list(inspect.signature(cls.fit).parameters) == ["self", "data"]
    init = inspect.signature(cls.__init__).parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for n, p in init.items() if n != "self")
    assert set(constraints_of(cls)) == set(defaults_of(cls))  # every parameter declared
    assert cls().get_params() == defaults_of(cls)
    with pytest.raises(TypeError):
        cls(0.1)
    est = cls()
    assert est.set_params() is est  # scikit-learn's set_params (issue 50); values checked at fit


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_with_params_returns_a_new_estimator(cls):
    est = cls(alpha=0.1)
    new = est.with_params(alpha=0.2)
    assert type(new) is cls and new is not est
    assert est.alpha == 0.1 and new.alpha == 0.2
    assert {k: v for k, v in new.get_params().items() if k != "alpha"} == \
        {k: v for k, v in est.get_params().items() if k != "alpha"}
    assert "alpha=0.1" in repr(est)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_fit_refuses_any_other_input_naming_the_one_it_takes(cls):
    others = [pd.DataFrame({"y": [1.0]}), None]
    if cls.input_type is not Panel:
        others.append(_panel())
    for other in others:
        with pytest.raises(ParameterError, match=rf"{cls.__name__}\.fit needs a "
                                                 rf"didmem\.{cls.input_type.__name__}; got "):
            cls().fit(other)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_constructor_stores_anything_and_fit_refuses_each_bad_parameter(cls):
    data = _data(cls)
    for name in constraints_of(cls):
        est = cls(**{name: object()})  # stored, not checked
        with pytest.raises(ParameterError, match=rf"^The '{name}' parameter of {cls.__name__} "
                                                 r"must be .*\. Got <object object"):
            est.fit(data)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_fit_keeps_no_state_and_returns_a_frozen_result_on_the_grid(cls):
    data = _data(cls)
    est = cls(**QUICK[cls.__name__])
    before = repr(vars(est))
    result = est.fit(data)
    again = est.fit(data)
    assert repr(vars(est)) == before
    assert result.estimator == cls.__name__
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.alpha = 0.5
    frame = result.to_frame()
    assert {"cohort", "time", "estimate", "std_error"} <= set(frame.columns) and len(frame)
    pd.testing.assert_frame_equal(frame, again.to_frame(), check_exact=False, rtol=1e-10)
