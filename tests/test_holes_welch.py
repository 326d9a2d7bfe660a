"""The small-sample (Welch) correction on panels with holes counts the units that enter a
cell: those observed at its time or its base period (issue 40's one wrong number: a cell
whose 40 never-treated units include 3 observed at its two periods counted 40)."""

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.inference._prepared import did_cells, level_cells, prepare_panel
from didmem.inference.holes import HolesInfluence, hole_cells


def _probe_frame(seed=0):
    """One cohort (first treated at 3) of 15 units observed throughout; 40 never-treated
    units, of which 3 are observed throughout and 37 only at the last period (4)."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(15):
        for t in (1, 2, 3, 4):
            rows.append((u, t, 3.0, rng.normal() + 0.5 * (t >= 3)))
    for u in range(15, 55):
        for t in ((1, 2, 3, 4) if u < 18 else (4,)):
            rows.append((u, t, np.inf, 2.0 * rng.normal()))
    return pd.DataFrame(rows, columns=["unit", "time", "cohort", "y"])


def test_the_probes_cell_counts_its_three_controls_not_forty():
    df = _probe_frame()
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    res = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    frame = res.to_frame()
    c = int(np.flatnonzero((frame["time"] == 2).to_numpy())[0])  # (3, 2), base period 1
    assert frame.loc[c, "base_time"] == 1 and frame.loc[c, "n_control"] == 40

    # by hand: the cohort's and the 3 complete controls' changes from 1 to 2
    wide = df.pivot(index="unit", columns="time", values="y")
    d1 = (wide.loc[:14, 2] - wide.loc[:14, 1]).to_numpy()
    d0 = (wide.loc[15:17, 2] - wide.loc[15:17, 1]).to_numpy()
    a = ((d1 - d1.mean()) ** 2).sum() / d1.size**2  # plug-in variance of the cohort's mean
    b = ((d0 - d0.mean()) ** 2).sum() / d0.size**2
    assert res.analytic_std_errors[c] == pytest.approx(np.sqrt(a + b), rel=1e-10)
    va, vb = a * 15 / 14, b * 3 / 2  # Welch: n / (n - 1) with the contributing units
    df_welch = (va + vb) ** 2 / (va**2 / 14 + vb**2 / 2)
    corr = res.inference.correction
    assert corr.variance[c] == pytest.approx(va + vb, rel=1e-10)
    assert corr.df[c] == pytest.approx(df_welch, rel=1e-10)
    assert res.std_errors[c] == pytest.approx(np.sqrt(va + vb), rel=1e-10)
    # counting all 40 never-treated units understates the variance and overstates the df
    wrong = a * 15 / 14 + b * 40 / 39
    assert corr.variance[c] > wrong * 1.2 and corr.df[c] < 4
    # the cell at the last period (base period 2) has all 40 controls: 3 at 2, 40 at 4
    last = int(np.flatnonzero((frame["time"] == 4).to_numpy())[0])
    assert res.inference.influence.contributing_units()[:, last].tolist() == [15, 40]


@pytest.mark.parametrize("estimator", ["did", "difference"])
@pytest.mark.parametrize("control_group", ["never_treated", "not_yet_treated"])
def test_contributing_units_are_those_with_a_nonzero_influence_function(estimator,
                                                                         control_group):
    """On a panel with random holes, each cell's counts are its cohort's and its controls'
    units whose influence function is not zero (the dense oracle's)."""
    rng = np.random.default_rng(7)
    rows = []
    for u in range(120):
        cohort = [3.0, 4.0, 5.0, np.inf][u % 4]
        for t in range(1, 7):
            if rng.random() < 0.6 or t == 6:
                rows.append((u, t, cohort, rng.normal()))
    df = pd.DataFrame(rows, columns=["unit", "time", "cohort", "y"])
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    not_yet = control_group == "not_yet_treated"
    design = prepare_panel(panel, None, need_never_treated=not not_yet, anticipation=0,
                            lower_is_better=False, owner="test")
    if estimator == "did":
        cells = did_cells(design, base_period="varying", not_yet=not_yet, anticipation=0)
    else:
        cells = level_cells(design, not_yet=not_yet, anticipation=0)
    _, coefficients, _ = hole_cells(design.holes, design.w, design.starts, cells,
                                    design.times.size)
    inf = HolesInfluence.build(design.holes, design.w, design.starts, cells,
                               design.times.size, coefficients)
    psi = inf.dense()
    block = np.repeat(np.arange(design.starts.size - 1), np.diff(design.starts))
    live = cells.ref == 0
    nonzero = psi != 0
    n_treated = np.array([nonzero[block == cells.k[c], c].sum() for c in range(cells.size)])
    n_control = nonzero.sum(axis=0) - n_treated
    counts = inf.contributing_units()
    np.testing.assert_array_equal(counts[0][live], n_treated[live])
    np.testing.assert_array_equal(counts[1][live], n_control[live])
    # fewer than the blocks' units somewhere: the correction used to count those
    assert (counts[1][live] < np.diff(design.starts)[-1]).any()


def test_observation_groups_split_each_cells_variance():
    """The six groups of a cell on a panel with holes (cohort and controls, each observed
    at both periods, at the time only, at the base only) add up to its variance, and each
    group's count is its units with a non-zero influence function of that pattern."""
    rng = np.random.default_rng(3)
    rows = []
    for u in range(90):
        cohort = [3.0, 5.0, np.inf][u % 3]
        for t in range(1, 7):
            if rng.random() < 0.55:
                rows.append((u, t, cohort, rng.normal()))
    df = pd.DataFrame(rows, columns=["unit", "time", "cohort", "y"])
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    design = prepare_panel(panel, None, need_never_treated=False, anticipation=0,
                            lower_is_better=False, owner="test")
    cells = did_cells(design, base_period="varying", not_yet=True, anticipation=0)
    _, coefficients, _ = hole_cells(design.holes, design.w, design.starts, cells,
                                    design.times.size)
    inf = HolesInfluence.build(design.holes, design.w, design.starts, cells,
                               design.times.size, coefficients)
    parts, n = inf.welch_groups()
    live = cells.ref == 0
    np.testing.assert_allclose(parts.sum(axis=0)[live], inf.variance()[live], rtol=1e-9)
    psi = inf.dense()
    block = np.repeat(np.arange(design.starts.size - 1), np.diff(design.starts))
    seen = np.zeros((design.n_units, design.times.size), dtype=bool)
    seen[design.holes.unit, design.holes.time] = True
    for c in np.flatnonzero(live)[::3]:
        t, b = cells.t[c], cells.b[c]
        treated = block == cells.k[c]
        control = (block >= cells.cs[c]) & ~treated
        for side, who in ((0, treated), (3, control)):
            for g, pattern in enumerate((seen[:, t] & seen[:, b], seen[:, t] & ~seen[:, b],
                                         ~seen[:, t] & seen[:, b])):
                mine = who & pattern
                assert n[side + g, c] == mine.sum()
                assert parts[side + g, c] == pytest.approx((psi[mine, c] ** 2).sum(),
                                                           rel=1e-9, abs=1e-15)
