"""A hint names a remedy that can work for the panel at hand (issue 40, item 5: repeated
cross-sections were told to pass balance='drop_incomplete_units', which their Panel refuses)."""

from __future__ import annotations

import numpy as np
import pytest

import didmem
from didmem.errors import PanelError, ParameterError


def _frames():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=30, n_never_treated=40,
                                           seed=3)
    holed = df[np.random.default_rng(0).random(len(df)) >= 0.1]
    return df, holed


def _cross_sections(df):
    return didmem.Panel(df, unit=None, time="time", cohort="cohort", outcome="y")


def test_dense_matrix_of_cross_sections_does_not_offer_dropping_units():
    df, _ = _frames()
    panel = _cross_sections(df)
    with pytest.raises(PanelError) as err:
        panel.outcome_matrix()
    message = str(err.value)
    assert "repeated cross-sections" in message and "have no units to drop" in message
    assert "build the Panel with balance='drop_incomplete_units'" not in message
    # the remedy it names works: the same rows as a panel with units
    rebuilt = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                           balance="drop_incomplete_units")
    assert rebuilt.outcome_matrix().shape[0] == df["unit"].nunique()


def test_dense_matrix_of_a_panel_with_holes_offers_dropping_units():
    _, holed = _frames()
    panel = didmem.Panel(holed, unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    with pytest.raises(PanelError, match="build the Panel with balance='drop_incomplete_units'"):
        panel.outcome_matrix()


@pytest.mark.parametrize("as_result", [False, True])
def test_plan_design_with_a_cross_sections_pilot_names_what_works(as_result):
    df, _ = _frames()
    pilot = _cross_sections(df)
    if as_result:
        pilot = didmem.DiDEstimator(n_bootstrap=99, seed=0).fit(pilot)
    with pytest.raises(ParameterError) as err:
        didmem.power_analysis(pilot, units_per_cohort=[10], n_simulations=10)
    message = str(err.value)
    assert "unit=..." in message
    if not as_result:
        assert "balance='drop_incomplete_units'" not in message
        assert "repeated cross-sections, which have no paths" in message
