"""Cross-check with ``differences`` (Bernardo Dionisi), the package the paper's analysis used.

Lesci et al. (2024) fit ``differences.ATTgt(...).fit(est_method="dr",
control_group="never_treated")`` on a panel in their layout (``seq_idx``, ``step``, metric
columns) with cohorts from their own rule. On such a panel,
``FrameBackend(layout="paper", cohort_rule="paper")`` + :class:`didmem.DiDEstimator` must give
the same ATT(g,t) for every cohort and checkpoint (pre-periods included, varying base
period), the same analytic standard errors, and the same cohort, event-time, calendar-time
and simple aggregations. Without covariates ``"dr"`` reduces to a difference of mean
changes, so the numbers agree to rounding (1e-8).

``differences`` is GPL-3: it is installed by CI for this test only (``.ci/run``), never by an
extra of didmem; without it the tests skip.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.backends import FrameBackend

pytestmark = pytest.mark.reference
differences = pytest.importorskip("differences", reason="differences (GPL-3) is CI-only")

ATOL = 1e-8
STEPS = (0, 1000, 2000, 3000)
# didmem's aggregation -> differences' aggregation and the column of didmem's key.
AGGREGATIONS = {"simple": ("simple", None), "group": ("cohort", "cohort"),
                "dynamic": ("event", "event_time"), "calendar": ("time", "time")}


def paper_cohort(seq_idx: int) -> float:
    """The paper's rule, written out with ``math.ceil`` (independent of didmem's code)."""
    if seq_idx <= 0:
        return np.nan
    batch = math.ceil(seq_idx / 1024)
    return float(math.ceil(batch / 1000) * 1000)


def paper_panel(seed: int) -> pd.DataFrame:
    """A panel in the paper's layout: surprisal of training and validation sequences.

    Training sequences in three macro-batches (cohorts 1000, 2000, 3000 by the paper's rule),
    plus the boundary indices where the rules differ (0, 1,024,000, 2,048,000) and 25
    validation sequences (negative ``seq_idx``). The effect of training varies by cohort and
    event time; each sequence has its own level and trend.
    """
    rng = np.random.default_rng(seed)
    train = np.r_[rng.choice(np.arange(1, 3 * 1024 * 1000), 75, replace=False),
                  0, 1, 1023, 1024, 1_023_999, 1_024_000, 1_024_001, 2_048_000]
    seqs = np.r_[np.unique(train), -1 - np.arange(25)]
    rows = []
    for s in seqs:
        level, trend, g = rng.normal(9, 1), rng.normal(-0.3, 0.2), paper_cohort(int(s))
        for step in STEPS:
            effect = -0.6 - 0.2 * (step - g) / 1000 if np.isfinite(g) and step >= g else 0.0
            rows.append((int(s), step, level + trend * step / 1000 + effect + rng.normal(0, .3)))
    return pd.DataFrame(rows, columns=["seq_idx", "step", "sup_seq"])


def quietly(fn, *args, **kwargs):
    """Call into ``differences`` without its pandas deprecation warnings (not ours to fix)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        return fn(*args, **kwargs)


def fit_differences(frame: pd.DataFrame):
    data = frame.assign(cohort=[paper_cohort(int(s)) for s in frame["seq_idx"]])
    att = quietly(differences.ATTgt, data=data.set_index(["seq_idx", "step"]),
                  cohort_column="cohort")
    quietly(att.fit, "sup_seq", est_method="dr", control_group="never_treated",
            progress_bar=False)
    return att


def column(table: pd.DataFrame, name: str) -> pd.Series:
    """The column of ``differences``' three-level header whose last level is ``name``."""
    (key,) = [c for c in table.columns if c[-1] == name]
    return table[key]


def fit_didmem(frame: pd.DataFrame):
    backend = FrameBackend(frame, layout="paper", cohort_rule="paper")
    scored = backend.score()
    panel = didmem.Panel(scored, unit="unit", time="time", cohort="cohort", outcome="sup_seq")
    return scored, didmem.DiDEstimator(small_sample=False,
                                       est_method="dr", control_group="never_treated",
                                       n_bootstrap=0).fit(panel)


@pytest.mark.parametrize("seed", [0, 1])
def test_att_gt_matches_differences(seed):
    frame = paper_panel(seed)
    scored, result = fit_didmem(frame)
    # FrameBackend's paper rule is the rule written out above, boundaries included
    by_unit = scored.drop_duplicates("unit").set_index("unit")["cohort"]
    expected = pd.Series({u: paper_cohort(int(u)) for u in by_unit.index}).replace(np.nan, np.inf)
    pd.testing.assert_series_equal(by_unit, expected, check_names=False, check_index_type=False)
    assert by_unit[1_024_000] == 1000 and by_unit[0] == np.inf and by_unit[1_024_001] == 2000

    theirs = quietly(fit_differences(frame).results)
    theirs = pd.DataFrame({"estimate": column(theirs, "ATT"),
                           "std_error": column(theirs, "std_error")})
    theirs.index = pd.MultiIndex.from_arrays(
        [theirs.index.get_level_values("cohort").astype(float),
         theirs.index.get_level_values("time").astype(float)], names=["cohort", "time"])
    ours = result.to_frame().set_index(["cohort", "time"])[["estimate", "std_error"]]
    assert len(ours) == len(theirs) == 9
    ours = ours.loc[theirs.index]
    np.testing.assert_allclose(ours["estimate"], theirs["estimate"], rtol=0, atol=ATOL)
    np.testing.assert_allclose(ours["std_error"], theirs["std_error"], rtol=1e-6, atol=ATOL)


@pytest.mark.parametrize("ours_kind", list(AGGREGATIONS))
def test_aggregations_match_differences(ours_kind):
    frame = paper_panel(2)
    _, result = fit_didmem(frame)
    att = fit_differences(frame)
    theirs_kind, key = AGGREGATIONS[ours_kind]
    theirs = quietly(att.aggregate, theirs_kind)
    ours = result.aggregate(ours_kind).to_frame()
    if key is not None:
        ours = ours.set_index(key)
        assert np.array_equal(ours.index.to_numpy(float), theirs.index.to_numpy(float))
    np.testing.assert_allclose(ours["estimate"], column(theirs, "ATT"), rtol=0, atol=ATOL)
    np.testing.assert_allclose(ours["std_error"], column(theirs, "std_error"),
                               rtol=1e-6, atol=ATOL)


def test_the_rules_differ_at_the_boundary():
    """With didmem's rule the boundary sequence joins cohort 2000, so the cells move."""
    frame = paper_panel(0)
    paper = FrameBackend(frame, layout="paper", cohort_rule="paper").score()
    ours = FrameBackend(frame, layout="paper").score()
    g_paper = paper.drop_duplicates("unit").set_index("unit")["cohort"]
    g_ours = ours.drop_duplicates("unit").set_index("unit")["cohort"]
    differ = g_paper.index[g_paper.to_numpy() != g_ours.to_numpy()]
    assert sorted(differ) == [0, 1_024_000, 2_048_000]
    assert g_ours[0] == 1000 and g_ours[1_024_000] == 2000 and g_ours[2_048_000] == 3000
