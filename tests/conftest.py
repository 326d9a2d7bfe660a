"""Shared fixtures: R reference data from tests/data/reference and small simulated panels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import didmem

REFERENCE_DIR = Path(__file__).resolve().parent / "data" / "reference"


def reference_file(name: str) -> Path:
    """Path of a reference file of ``tests/data/reference`` (see its README for provenance).

    The files are part of the repository, so a missing one is an error, never a skip.
    """
    path = REFERENCE_DIR / name
    if not path.is_file():
        raise FileNotFoundError(
            f"reference file {name!r} is missing from {REFERENCE_DIR}; it is tracked in git "
            "(tests/data/reference), so the checkout is incomplete"
        )
    return path


def pytest_collection_modifyitems(items):
    """Record each test's markers in the JUnit report, for CI's check of skips
    (``.ci/check_skips.py`` fails when a test marked ``reference`` is skipped)."""
    for item in items:
        names = sorted({mark.name for mark in item.iter_markers()})
        item.user_properties.append(("markers", ",".join(names)))


@pytest.fixture(scope="session")
def mpdta() -> pd.DataFrame:
    return pd.read_csv(reference_file("mpdta.csv"))


@pytest.fixture(scope="session")
def mpdta_panel(mpdta) -> didmem.Panel:
    return didmem.Panel(mpdta, unit="countyreal", time="year", cohort="first.treat",
                        outcome="lemp", never_treated=0)


@pytest.fixture(scope="session")
def small_panel() -> didmem.Panel:
    """Four cohorts of 30 units, 60 never-treated units, six periods, known profile."""
    df, _ = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=30, n_never_treated=60,
                                           n_times=6, seed=3)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


def staggered_frame(seed: int = 0, n_units: int = 80, n_times: int = 5, weights=False,
                    clusters=None) -> pd.DataFrame:
    """An irregular small panel: unequal cohorts, unequal weights, optional clusters."""
    rng = np.random.default_rng(seed)
    times = np.array([1.0, 2.0, 4.0, 5.0, 7.0, 8.0, 10.0][:n_times])
    choices = np.concatenate([times[1:-1], [np.inf, np.inf]])
    cohort = rng.choice(choices, size=n_units)
    y = (rng.normal(size=(n_units, 1)) + np.log1p(times)[None, :]
         + 0.5 * rng.normal(size=(n_units, n_times))
         + np.where(times[None, :] >= cohort[:, None], 0.7, 0.0))
    frame = pd.DataFrame({
        "unit": np.repeat(np.arange(n_units), n_times),
        "time": np.tile(times, n_units),
        "cohort": np.repeat(cohort, n_times),
        "y": y.ravel(),
    })
    if weights:
        frame["w"] = np.repeat(rng.uniform(0.5, 2.0, n_units), n_times)
    if clusters:
        frame["cl"] = np.repeat(rng.integers(0, clusters, n_units), n_times)
    return frame
