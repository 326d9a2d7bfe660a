"""Invariances of the estimators (hypothesis property tests)."""

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import didmem

from .conftest import staggered_frame

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
seeds = st.integers(0, 10_000)
controls = st.sampled_from(["never_treated", "not_yet_treated"])
bases = st.sampled_from(["varying", "universal"])


def fit(frame, estimator="did", **kw):
    panel = didmem.Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")
    cls = didmem.DiDEstimator if estimator == "did" else didmem.DifferenceEstimator
    if estimator != "did":
        kw.pop("base_period", None)
    with warnings.catch_warnings():  # some seeds draw a cohort of under 5 units (e.g. 1025)
        warnings.simplefilter("ignore", didmem.errors.SmallCohortWarning)
        return cls(n_bootstrap=0, **kw).fit(panel)


def close(a, b, scale=1.0):
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11 * scale)


@SETTINGS
@given(seed=seeds, shift=st.floats(-1e3, 1e3), control=controls, base=bases,
       estimator=st.sampled_from(["did", "difference"]))
def test_adding_a_constant_changes_nothing(seed, shift, control, base, estimator):
    frame = staggered_frame(seed=seed)
    a = fit(frame, estimator, control_group=control, base_period=base)
    b = fit(frame.assign(y=frame["y"] + shift), estimator, control_group=control, base_period=base)
    close(b.estimates, a.estimates, 1 + abs(shift))
    close(b.std_errors, a.std_errors, 1 + abs(shift))


@SETTINGS
@given(seed=seeds, factor=st.floats(-50, 50).filter(lambda f: abs(f) > 1e-3), control=controls)
def test_scaling_scales_estimates_and_standard_errors(seed, factor, control):
    frame = staggered_frame(seed=seed)
    a = fit(frame, control_group=control)
    b = fit(frame.assign(y=frame["y"] * factor), control_group=control)
    close(b.estimates, factor * a.estimates, abs(factor))
    close(b.std_errors, abs(factor) * a.std_errors, abs(factor))
    agg_a, agg_b = a.aggregate("dynamic"), b.aggregate("dynamic")
    close(agg_b.overall.std_error, abs(factor) * agg_a.overall.std_error, abs(factor))


@SETTINGS
@given(seed=seeds, perm_seed=seeds, control=controls, base=bases)
def test_permuting_and_relabelling_units_changes_nothing(seed, perm_seed, control, base):
    frame = staggered_frame(seed=seed)
    rng = np.random.default_rng(perm_seed)
    labels = rng.permutation(frame["unit"].max() + 1)
    shuffled = frame.assign(unit=labels[frame["unit"]]).sample(frac=1.0, random_state=perm_seed)
    a = fit(frame, control_group=control, base_period=base)
    b = fit(shuffled, control_group=control, base_period=base)
    close(b.estimates, a.estimates)
    close(b.std_errors, a.std_errors)
    assert a.pretest.statistic == b.pretest.statistic or np.isclose(
        a.pretest.statistic, b.pretest.statistic, rtol=1e-8)


@SETTINGS
@given(seed=seeds, control=controls, base=bases)
def test_did_ignores_unit_and_time_effects(seed, control, base):
    """Difference-in-differences removes any unit-specific and time-specific constants."""
    frame = staggered_frame(seed=seed)
    rng = np.random.default_rng(seed + 1)
    unit_fx = rng.normal(scale=10, size=frame["unit"].max() + 1)
    time_fx = {t: rng.normal(scale=10) for t in frame["time"].unique()}
    moved = frame.assign(y=frame["y"] + unit_fx[frame["unit"]] + frame["time"].map(time_fx))
    a = fit(frame, control_group=control, base_period=base)
    b = fit(moved, control_group=control, base_period=base)
    close(b.estimates, a.estimates, 30)
    close(b.std_errors, a.std_errors, 30)
