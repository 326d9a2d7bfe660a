"""One fit driver: every group-time estimator takes a panel, a scanned parquet folder, pattern
counts and per-cohort moments through its one ``fit``, and the lazy forms equal the in-memory
fit (1e-9) for every such estimator."""

import numpy as np
import pandas as pd
import pytest

import didmem
import didmem.estimators
from didmem.errors import ParameterError
from didmem.estimators._grouptime import GroupTimeEstimator
from didmem.estimators._moments_route import panel_moments
from didmem.estimators.base import BaseEstimator

from .test_panel_scan import COLUMNS, _write

GROUP_TIME = sorted({getattr(didmem.estimators, name) for name in didmem.estimators.__all__
                     if isinstance(getattr(didmem.estimators, name), type)
                     and issubclass(getattr(didmem.estimators, name), GroupTimeEstimator)},
                    key=lambda cls: cls.__name__)


def _close(a, b, what):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                               rtol=1e-9, atol=1e-12, err_msg=what)


def _same_fit(res, ref, *, with_band: bool):
    a, b = res.to_frame(), ref.to_frame()
    assert a[["cohort", "time"]].equals(b[["cohort", "time"]])
    cols = ["estimate", "std_error"] + (["ci_lower", "ci_upper"] if with_band else [])
    for col in cols:
        _close(a[col], b[col], col)
    for kind in ("simple", "group", "dynamic", "calendar"):
        x, y = res.aggregate(kind), ref.aggregate(kind)
        _close([x.overall.estimate, x.overall.std_error],
               [y.overall.estimate, y.overall.std_error], kind)
        _close(x.to_frame()["std_error"], y.to_frame()["std_error"], kind)


@pytest.fixture(scope="module")
def simulated():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=4, units_per_cohort=15, n_never_treated=30,
                                           n_times=6, seed=46)
    return df


def test_the_group_time_estimators_are_found():
    assert {cls.__name__ for cls in GROUP_TIME} >= {"DiDEstimator", "DifferenceEstimator"}


@pytest.mark.parametrize("cls", GROUP_TIME, ids=lambda cls: cls.__name__)
def test_no_group_time_estimator_overrides_fit(cls):
    assert cls.fit is BaseEstimator.fit


@pytest.mark.parametrize("cls", GROUP_TIME, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("control_group", ["never_treated", "not_yet_treated"])
def test_folder_and_moments_equal_the_in_memory_fit(tmp_path, simulated, cls, control_group):
    folder = _write(tmp_path / "data", simulated, n_files=5)
    panel = didmem.Panel(simulated, **COLUMNS)
    est = cls(n_bootstrap=0, control_group=control_group)
    ref = est.fit(panel)
    _same_fit(est.fit(didmem.Panel.scan(folder, **COLUMNS)), ref, with_band=True)
    _same_fit(est.fit(didmem.Panel.scan(folder, **COLUMNS, memory_bytes=2000)), ref,
              with_band=True)  # several work items, added up
    from_moments = est.fit(panel_moments(panel))
    _same_fit(from_moments, ref, with_band=True)
    assert from_moments.estimator == ref.estimator == cls.__name__


@pytest.mark.parametrize("cls", GROUP_TIME, ids=lambda cls: cls.__name__)
def test_folder_with_gaussian_draws(tmp_path, simulated, cls):
    folder = _write(tmp_path / "data", simulated, n_files=3)
    est = cls(n_bootstrap=200, seed=1)  # small_sample: Gaussian multipliers, from moments
    res = est.fit(didmem.Panel.scan(folder, **COLUMNS))
    ref = est.fit(didmem.Panel(simulated, **COLUMNS))
    assert res.band == ref.band == "simultaneous"
    assert res.inference.bootstrap.n_draws == 200
    _same_fit(res, ref, with_band=False)  # Welch standard errors: analytic


@pytest.mark.parametrize("cls", GROUP_TIME, ids=lambda cls: cls.__name__)
def test_lazy_forms_refuse_rademacher_before_reading(tmp_path, simulated, cls):
    folder = _write(tmp_path / "data", simulated, n_files=2)
    data = didmem.Panel.scan(folder, **COLUMNS)
    data.items = None  # reading the folder would fail: the refusal comes first
    with pytest.raises(ParameterError, match="Gaussian multipliers only"):
        cls(n_bootstrap=10, small_sample=False).fit(data)


def test_pattern_counts_equal_their_panel():
    from didmem.panel.patterns import PatternPanel

    times = np.array([1.0, 2.0, 3.0])
    patterns = np.array([[0, 0, 0], [0, 1, 1], [0, 0, 1], [1, 1, 1], [0, 1, 0]], dtype=np.int8)
    cohorts = np.array([np.inf, 2.0, 2.0, 3.0, np.inf])
    counts = np.array([30, 12, 5, 9, 7])
    data = PatternPanel(times=times, cohorts=cohorts, patterns=patterns, counts=counts)
    rows = np.repeat(np.arange(counts.size), counts)  # one unit per count
    long = pd.DataFrame({"unit": np.repeat(np.arange(rows.size), times.size),
                         "time": np.tile(times, rows.size),
                         "cohort": np.repeat(cohorts[rows], times.size),
                         "memorised": patterns[rows].ravel().astype(float)})
    panel = didmem.Panel(long, unit="unit", time="time", cohort="cohort", outcome="memorised")
    for cls in GROUP_TIME:
        est = cls(n_bootstrap=0)
        _same_fit(est.fit(data), est.fit(panel), with_band=True)


def test_a_wrong_input_names_the_forms():
    with pytest.raises(ParameterError, match=r"needs a didmem\.Panel; got DataFrame.*"
                                             r"Panel\.scan"):
        didmem.DifferenceEstimator().fit(pd.DataFrame({"a": [1]}))


def test_the_summary_says_where_the_data_came_from(tmp_path, simulated):
    """Issue 50: the summary never said that the fit came from a folder, moments or Ray. The
    driver records the source on the moments' design; the summary, the settings (and so the
    results file and the report) say it. A panel in memory says nothing extra."""
    folder = _write(tmp_path / "data", simulated, n_files=3)
    est = didmem.DiDEstimator(n_bootstrap=0)
    panel = didmem.Panel(simulated, **COLUMNS)
    assert "source:" not in est.fit(panel).summary()
    from_folder = est.fit(didmem.Panel.scan(folder, **COLUMNS))
    assert f"source: the parquet folder {str(folder)!r}, read here" in from_folder.summary()
    on_ray = est.fit(didmem.Panel.scan(folder, **COLUMNS,
                                       map_items=lambda f, items: [f(i) for i in items]))
    assert "read as tasks on Ray" in on_ray.summary()
    assert est.fit(panel_moments(panel)).settings.source == "per-cohort moments given to the fit"
    saved = didmem.load_result(from_folder.save(tmp_path / "r.parquet"))
    assert saved.settings.source == from_folder.settings.source
