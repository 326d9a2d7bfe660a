"""The bootstrap's multipliers drawn ahead in a helper thread (issue 29): the same numbers as
drawn in turn, a stopped helper on every way out, the generator's errors passed on."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import didmem
from didmem.errors import ParameterError
from didmem.inference import bootstrap
from didmem.inference.bootstrap import MultiplierChunks, draw_multipliers

from .conftest import staggered_frame


def _helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "didmem-multipliers"]


@pytest.mark.parametrize("kind", ["rademacher", "mammen", "normal"])
@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_chunks_are_the_draws_in_turn(kind, ahead):
    rng = np.random.default_rng(7)
    expected = [draw_multipliers(rng, m, 130, kind) for m in (4, 4, 4, 4, 1)]
    with MultiplierChunks(np.random.default_rng(7), 17, 130, kind, chunk=4,
                          ahead=ahead) as chunks:
        got = list(chunks)
    assert [row0 for row0, _ in got] == [0, 4, 8, 12, 16]
    for (_, weights), want in zip(got, expected):
        np.testing.assert_array_equal(weights, want)
    assert not _helpers()


def test_close_stops_a_helper_blocked_on_a_full_queue():
    chunks = MultiplierChunks(np.random.default_rng(1), 1000, 50, "normal", chunk=10, ahead=2)
    assert _helpers()
    chunks.close()
    assert not _helpers()
    chunks.close()  # twice is harmless


def test_the_generators_error_reaches_the_consumer():
    class Broken:
        def standard_normal(self, size):
            raise MemoryError("no room for the multipliers")

    chunks = MultiplierChunks(Broken(), 20, 5, "normal", chunk=5, ahead=2)
    with pytest.raises(MemoryError, match="no room"):
        list(chunks)
    chunks.close()
    assert not _helpers()


@pytest.mark.parametrize("kwargs, name", [({"n_draws": -1}, "n_draws"),
                                          ({"n_weights": 0}, "n_weights"),
                                          ({"chunk": 0}, "chunk"), ({"ahead": -2}, "ahead"),
                                          ({"n_draws": 2.5}, "n_draws")])
def test_malformed_sizes_are_refused_by_name(kwargs, name):
    args = {"n_draws": 10, "n_weights": 5, "chunk": 2, "ahead": 2, **kwargs}
    with pytest.raises(ParameterError, match=f"'{name}' parameter of MultiplierChunks"):
        MultiplierChunks(np.random.default_rng(0), args["n_draws"], args["n_weights"], "normal",
                         chunk=args["chunk"], ahead=args["ahead"])
    assert not _helpers()


def test_unknown_kind_is_refused_before_any_draw():
    with pytest.raises(ParameterError, match="multiplier"):
        MultiplierChunks(np.random.default_rng(0), 10, 5, "uniform", chunk=2, ahead=2)
    assert not _helpers()


@pytest.mark.parametrize("small_sample", [True, False])
@pytest.mark.parametrize("multiplier", [None, "rademacher", "mammen", "normal"])
def test_fit_draws_equal_the_draws_in_turn(monkeypatch, small_sample, multiplier):
    """A fit's draws with the multipliers drawn ahead (seed, or a Generator: drawn in the
    bootstrap only) equal those drawn in turn, element for element: the same chunks and the
    same arithmetic, only the drawing moved to another thread."""
    panel = didmem.Panel(staggered_frame(seed=3), unit="unit", time="time", cohort="cohort",
                         outcome="y")
    monkeypatch.setattr(bootstrap, "_CHUNK_ELEMENTS", 500)  # several chunks

    def fit(seed):
        return didmem.DiDEstimator(n_bootstrap=99, seed=seed,
                                   small_sample=small_sample, multiplier=multiplier).fit(panel)

    ahead = fit(5)
    generator = fit(np.random.default_rng(5))
    monkeypatch.setattr(bootstrap, "PREFETCH_CHUNKS", 0)
    in_turn = fit(5)
    assert ahead.inference.bootstrap.n_draws == 99
    np.testing.assert_array_equal(ahead.inference.bootstrap.cells,
                                  in_turn.inference.bootstrap.cells)
    np.testing.assert_array_equal(generator.inference.bootstrap.cells,
                                  in_turn.inference.bootstrap.cells)
    assert ahead.critical_value == in_turn.critical_value
    assert not _helpers()


@pytest.fixture
def failing_panel(monkeypatch):
    """A panel whose fit fails in the cell statistics (the balanced route's estimates from
    its blocks' moments), after the multipliers have started."""
    def broken(*args, **kwargs):
        raise RuntimeError("cell statistics failed")

    monkeypatch.setattr("didmem.inference.grouped.cell_estimates", broken)
    return didmem.Panel(staggered_frame(seed=3), unit="unit", time="time", cohort="cohort",
                        outcome="y")


def test_a_fit_that_fails_after_the_draws_started_stops_its_helper(monkeypatch, failing_panel):
    monkeypatch.setattr(bootstrap, "_CHUNK_ELEMENTS", 200)
    with pytest.raises(RuntimeError, match="cell statistics failed"):  # drawn unit by unit
        didmem.DiDEstimator(n_bootstrap=999, seed=1, multiplier="rademacher").fit(failing_panel)
    assert not _helpers()


def test_a_callers_generator_is_not_drawn_from_by_a_failed_fit(failing_panel):
    rng = np.random.default_rng(4)
    with pytest.raises(RuntimeError, match="cell statistics failed"):
        didmem.DiDEstimator(n_bootstrap=99, seed=rng).fit(failing_panel)
    assert rng.random() == np.random.default_rng(4).random()


def _covariate_panel():
    df = staggered_frame(seed=4)
    units = df["unit"].unique()
    x = np.random.default_rng(0).normal(size=units.size)
    df["x"] = df["unit"].map(dict(zip(units, x)))  # a time-invariant covariate
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                        covariates=["x"])


def _exposure_panel():
    df, _ = didmem.datasets.simulate_exposures(n_first=3, units_per_cohort=30,
                                               n_never_treated=40, seed=1)
    return didmem.Panel(df, unit="unit", time="time", cohort=["cohort", "cohort_2"],
                        outcome="y")


@pytest.mark.parametrize("route", ["covariates", "exposure", "exposure_not_yet"])
def test_other_routes_draw_the_same_numbers_ahead(monkeypatch, route):
    """The covariate route (stored influence functions) and the repeated-exposure routes draw
    their multipliers through the same chunks: ahead or in turn, the same draws."""
    monkeypatch.setattr(bootstrap, "_CHUNK_ELEMENTS", 600)  # several chunks
    if route == "covariates":
        panel, options = _covariate_panel(), {"est_method": "reg"}
    else:
        panel = _exposure_panel()
        options = {"exposure": 2}
        if route == "exposure_not_yet":
            options["control_group"] = "not_yet_treated"

    def draws():
        res = didmem.DiDEstimator(n_bootstrap=77, seed=3, **options).fit(panel)
        return res.inference.bootstrap.cells

    ahead = draws()
    monkeypatch.setattr(bootstrap, "PREFETCH_CHUNKS", 0)
    np.testing.assert_array_equal(ahead, draws())
    assert not _helpers()
