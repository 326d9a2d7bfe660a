"""``set_params`` on every estimator (issue 50, item 5): scikit-learn's semantics (sets, returns
the estimator, ``get_params`` reads the new values back), unknown names refused at once, values
validated at ``fit`` with the shared message, and a refit uses the new values."""

import pytest

import didmem
import didmem.estimators as estimators
from didmem.errors import ParameterError
from didmem.estimators.base import BaseEstimator


CLASSES = [getattr(estimators, n) for n in estimators.__all__
           if isinstance(getattr(estimators, n), type)
           and issubclass(getattr(estimators, n), BaseEstimator)
           and getattr(estimators, n) is not BaseEstimator]


def test_the_estimators_are_found():
    names = {c.__name__ for c in CLASSES}
    assert {"DiDEstimator", "DifferenceEstimator", "MembershipInferenceEstimator"} <= names
    assert estimators  # the package is imported, so every estimator class is defined


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_set_params_sets_and_returns_the_estimator(cls):
    est = cls()
    params = est.get_params()
    name = next(iter(params))
    assert est.set_params(**{name: params[name]}) is est
    assert est.get_params() == params
    with pytest.raises(ParameterError, match=rf"{cls.__name__}.set_params got unknown "
                                             r"parameter\(s\) \['no_such'\]"):
        est.set_params(no_such=1)
    assert est.get_params() == params  # a refused call changes nothing


def test_values_are_validated_at_fit_and_used_by_the_refit():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=10, n_never_treated=20,
                                           seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    est = didmem.DiDEstimator(n_bootstrap=0)
    est.set_params(control_group="never")  # stored as given
    with pytest.raises(ParameterError, match="The 'control_group' parameter of DiDEstimator "
                                             "must be one of"):
        est.fit(panel)
    res = est.set_params(control_group="not_yet_treated", alpha=0.1).fit(panel)
    assert res.params["control_group"] == "not_yet_treated" and res.alpha == 0.1
