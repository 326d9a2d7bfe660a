"""Shared quick-scale lab runs (trained once per test session)."""

import pytest


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory):
    """The quick-scale run with default settings, in its own directory."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from didmem.lab import run

    return run(tmp_path_factory.mktemp("lab") / "run", quick=True, seed=0)


@pytest.fixture(scope="session")
def quick_run_again(tmp_path_factory, quick_run):
    """The same settings again, in another directory."""
    from didmem.lab import run

    return run(tmp_path_factory.mktemp("lab") / "again", quick=True, seed=0)


@pytest.fixture(scope="session")
def subset_run(tmp_path_factory):
    """A small run with subset models, duplicates and a shifted validation split."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from didmem.lab import run

    return run(tmp_path_factory.mktemp("lab") / "subsets", quick=True, seed=1,
               n_steps=24, exact_cohorts=(), n_subset_models=2, duplicate_fraction=0.2,
               validation_shift=0.5, n_validation=32)
