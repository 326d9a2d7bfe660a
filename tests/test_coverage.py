"""Monte Carlo coverage of the simultaneous band (slow: run with ``pytest -m slow``).

The figures are reproduced, with more replications, by ``benchmarks/band_coverage.py`` and
reported in ``docs/inference.rst``.
"""

import pytest

from didmem.montecarlo import band_coverage

pytestmark = pytest.mark.slow


def test_band_covers_whole_profile_95_percent_with_200_units_per_cohort():
    out = band_coverage(reps=300, units_per_cohort=200, seed=2024)
    assert out["cells"] == 20
    # 95% +- 3% (Monte Carlo sd at 300 replications: 1.3 points)
    assert 0.92 <= out["simultaneous_coverage"] <= 0.98, out
    assert 0.93 <= out["pointwise_coverage"] <= 0.97, out
    assert 1.96 < out["mean_critical_value"] < 3.2, out


def test_not_yet_treated_band_also_covers():
    out = band_coverage(reps=600, units_per_cohort=200, control_group="not_yet_treated", seed=7)
    assert 0.92 <= out["simultaneous_coverage"] <= 0.98, out
