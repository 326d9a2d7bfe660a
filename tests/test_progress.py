"""Progress lines (didmem._progress): shown on a terminal or when asked, never otherwise."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem import _progress

DATA = Path(__file__).resolve().parent / "data"


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _mpdta():
    case = next(c for c in json.loads((DATA / "honestdid_rm.json").read_text())["cases"]
                if c["name"] == "mpdta")
    e = case["event_times"]
    return (pd.Series(case["beta"], index=e),
            pd.DataFrame(case["sigma"], index=e, columns=e))


def test_quiet_unless_a_terminal_or_asked(capsys):
    with _progress.progress(3, "work") as bar:  # pytest's stderr is not a terminal
        bar.step()
    with _progress.progress(3, "work", enabled=False) as bar:
        bar.step()
    assert capsys.readouterr().err == ""


def test_asked_writes_what_it_does_and_the_count(capsys):
    with _progress.progress(2, "planning", enabled=True, unit="designs") as bar:
        bar.say("design 1 of 2")
        bar.step()
        bar.step()
    err = capsys.readouterr().err
    assert err.startswith("planning | 0/2 designs")
    assert err.rstrip().endswith("2/2 designs | done in 0.0 s")


def test_terminal_redraws_in_place_after_the_delay(monkeypatch):
    stream = _Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr(_progress, "DELAY", 0.0)
    monkeypatch.setattr(_progress, "REDRAW_EVERY", 0.0)
    with _progress.progress(2, "scoring", unit="items") as bar:
        bar.say("checkpoint 1000")
        bar.step()
        bar.step()
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")  # one line, redrawn with \r
    assert "scoring: checkpoint 1000 | 1/2 items" in text
    assert "2/2 items | done in" in text


def test_terminal_stays_clean_for_a_quick_call(monkeypatch):
    stream = _Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr(_progress, "DELAY", 60.0)
    with _progress.progress(2, "quick") as bar:
        bar.step(2)
    assert stream.getvalue() == ""


def test_nested_call_stays_quiet_unless_asked(monkeypatch):
    stream = _Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr(_progress, "DELAY", 0.0)
    with _progress.progress(1, "outer"):
        assert isinstance(_progress.progress(1, "inner"), _progress._Quiet)
        inner = _progress.progress(1, "inner", enabled=True)
        assert isinstance(inner, _progress.Progress)
        inner.close()
    assert not _progress._active[0]


def test_sensitivity_variant_says_what_it_computes(capsys):
    s = didmem.sensitivity(_mpdta(), restriction="relative_magnitudes", m=[0.5, 1.0],
                           bias="negative", grid_points=100, progress=True)
    err = capsys.readouterr().err
    assert "sensitivity (relative magnitudes, bias negative)" in err
    assert "3/3 steps | done in" in err
    assert len(s.to_frame()) == 3
    didmem.sensitivity(_mpdta(), restriction="smoothness", m=[0.0], grid_points=100)
    assert capsys.readouterr().err == ""


def test_progress_parameter_is_checked():
    with pytest.raises(didmem.errors.ParameterError, match="'progress' parameter"):
        didmem.sensitivity(_mpdta(), m=[1.0], progress="yes")


def test_plan_design_progress(capsys):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=6, n_never_treated=8,
                                           n_times=4, seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    analysis = didmem.power_analysis(panel, units_per_cohort=[4, 6], n_simulations=3,
                              seed=0, progress=True)
    err = capsys.readouterr().err
    assert "power_analysis (simulated" in err
    assert "6/6 fits | done in" in err
    assert np.all(np.isfinite(analysis.to_frame()["power"]))


def test_fisher_test_counts_its_permutations_on_a_terminal(monkeypatch):
    stream = _Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr(_progress, "DELAY", 0.0)
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=8, n_never_treated=8,
                                           n_times=5, seed=0)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    didmem.RandomTimingEstimator(n_fisher=9, seed=0).fit(panel)
    text = stream.getvalue()
    assert "Fisher randomisation test" in text and "9/9 permutations" in text
