"""The small-sample (Welch) correction on panels with holes counts the units that enter a
cell: those observed at its time or its base period (issue 40's one wrong number: a cell
whose 40 never-treated units include 3 observed at its two periods counted 40)."""

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.inference.prepared import did_cells, level_cells, prepare_panel
from didmem.inference.prepared import HoleRows
from didmem.inference.holes.influence import HolesInfluence, hole_cells
from didmem.inference.small_sample import block_welch


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
    parts, n = inf.observation_groups()
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


def test_welch_dependence_is_the_correlation_of_the_parts_on_their_shared_units():
    """Issue 50: the parts of a side that share units (those observed at both periods) are
    paired with those units' count and the squared correlation, on them, of the parts'
    variables: ``psi = u_t + u_b`` (B), ``u_t`` (the level at t), ``u_b`` (at b), each unit's
    terms of the cell's influence function at ``t`` and at ``b`` (checked against the dense
    features, cell by cell, on a panel with 45% of rows missing)."""
    rng = np.random.default_rng(8)
    rows = []
    for u in range(120):
        cohort, level = [3.0, 5.0, np.inf][u % 3], 2.0 * rng.normal()
        for t in range(1, 7):
            if rng.random() < 0.55:
                rows.append((u, t, cohort, level + rng.normal()))
    df = pd.DataFrame(rows, columns=["unit", "time", "cohort", "y"])
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    design = prepare_panel(panel, None, need_never_treated=False, anticipation=0,
                            lower_is_better=False, owner="test")
    inf, cells = _holes_influence(design, not_yet=True)
    pairs, shared, r2 = inf.welch_dependence()
    np.testing.assert_array_equal(pairs, [[0, 1], [0, 2], [1, 2], [3, 4], [3, 5], [4, 5]])
    n_t = design.times.size
    feats = np.zeros((design.n_units, 2 * n_t))
    feats[design.holes.unit, design.holes.time] = design.holes.y
    feats[design.holes.unit, n_t + design.holes.time] = 1.0
    seen = feats[:, n_t:] > 0
    block = np.repeat(np.arange(design.starts.size - 1), np.diff(design.starts))
    checked = 0
    for c in np.flatnonzero((cells.ref == 0) & (cells.b >= 0) & (cells.b != cells.t)):
        t, b = cells.t[c], cells.b[c]
        treated = block == cells.k[c]
        control = (block >= cells.cs[c]) & ~treated
        for side, who, coef in ((0, treated, inf.tau[c]), (3, control, inf.kappa[c])):
            mine = who & seen[:, t] & seen[:, b]
            assert shared[side, c] == shared[side + 1, c] == shared[side + 2, c] == mine.sum()
            if mine.sum() < 3:
                continue
            u_t = coef[0] * feats[mine, t] + coef[2]
            u_b = coef[1] * feats[mine, b] + coef[3]
            r = np.corrcoef(np.stack([u_t + u_b, u_t, u_b]))
            np.testing.assert_allclose(r2[side:side + 3, c], [r[0, 1] ** 2, r[0, 2] ** 2,
                                                              r[1, 2] ** 2], rtol=1e-7)
            checked += 1
    assert checked >= 20


def test_shared_units_lower_the_degrees_of_freedom_of_a_sum_of_welch_parts():
    """Issue 50: ``block_welch`` with a dependence adds ``2 a_k a_l r2 m / (nu_k nu_l)`` per
    pair to Satterthwaite's denominator (two parts of 4 and 6 units, 3 shared, r2 = 0.5)."""
    parts = np.array([[0.3], [0.5]])
    counts = np.array([4, 6])
    a = parts[:, 0] * counts / (counts - 1)
    v, dof = block_welch(parts, counts, (np.array([[0, 1]]), np.array([[3]]), np.array([[0.5]])))
    base = a[0] ** 2 / 3 + a[1] ** 2 / 5
    assert v[0] == pytest.approx(a.sum())
    assert dof[0] == pytest.approx(a.sum() ** 2 / (base + 2 * a[0] * a[1] * 0.5 * 3 / 15))
    assert dof[0] < block_welch(parts, counts)[1][0]
    # no shared unit, or no correlation: the independent parts' degrees of freedom
    for m, r in ((0, 0.5), (3, 0.0)):
        same = block_welch(parts, counts, (np.array([[0, 1]]), np.array([[m]]), np.array([[r]])))
        assert same[1][0] == pytest.approx(block_welch(parts, counts)[1][0])


def _holes_influence(design, not_yet=False):
    """The holes route's influence of a prepared design (the rows of ``design.holes``, or
    every cell of a balanced design's outcome matrix)."""
    rows = design.holes
    if rows is None:  # a balanced design, read as a panel with holes and no hole
        n, n_t = design.y.shape
        rows = HoleRows(unit=np.repeat(np.arange(n), n_t), time=np.tile(np.arange(n_t), n),
                        y=np.ascontiguousarray(design.y.ravel()),
                        unit_start=np.arange(n + 1) * n_t)
    cells = did_cells(design, base_period="varying", not_yet=not_yet, anticipation=0)
    _, coefficients, _ = hole_cells(rows, design.w, design.starts, cells, design.times.size)
    return HolesInfluence.build(rows, design.w, design.starts, cells, design.times.size,
                                coefficients), cells


@pytest.mark.parametrize("not_yet", [False, True])
def test_without_holes_the_degrees_of_freedom_are_the_balanced_panels(not_yet):
    """Issue 50: read through the holes route, a panel with no missing row gets the
    balanced panel's Welch variance and degrees of freedom in every cell."""
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=6,
                                           n_never_treated=9, seed=4)
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    control = "not_yet_treated" if not_yet else "never_treated"
    res = didmem.DiDEstimator(n_bootstrap=0, control_group=control).fit(panel)
    design = prepare_panel(panel, None, need_never_treated=not not_yet, anticipation=0,
                            lower_is_better=False, owner="test")
    inf, cells = _holes_influence(design, not_yet)
    var, dof = block_welch(*inf.welch_groups(), inf.welch_dependence())
    live = cells.ref == 0
    np.testing.assert_allclose(var[live], res.inference.correction.variance[live], rtol=1e-9)
    np.testing.assert_allclose(dof[live], res.inference.correction.df[live], rtol=1e-9)


def _one_cohort_with_holes():
    """Cohort 3: units 0-5 observed at 1 and 2, units 6-7 only at 2, unit 8 only at 1 (and
    all at 3); 12 never-treated units observed throughout."""
    rng = np.random.default_rng(11)
    rows = []
    for u in range(21):
        level = 3.0 * rng.normal()  # instance difficulty: large next to the changes
        for t in (1, 2, 3):
            if u < 9 and ((u in (6, 7) and t == 1) or (u == 8 and t == 2)):
                continue
            rows.append((u, t, 3.0 if u < 9 else np.inf, level + 0.5 * rng.normal()))
    return pd.DataFrame(rows, columns=["unit", "time", "cohort", "y"])


def test_a_cells_welch_parts_by_hand():
    """Issue 50: the cell (3, 2) (base 1) by hand. The cohort's mean at 2 has units 0-7,
    at 1 units 0-5 and 8. The variance of the difference of means is that of
    ``sum_B (y_2 / 8 - y_1 / 7) + sum_{6,7} y_2 / 8 - y_81 / 7``: the six complete units'
    ``z`` about their own mean (5 degrees of freedom), and the level variances at 2 and at
    1 estimated from all 8 and 7 units observed there (7 and 6 degrees of freedom), not
    from the two units and the one unit that carry them."""
    df = _one_cohort_with_holes()
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    res = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    frame = res.to_frame()
    c = int(np.flatnonzero((frame["time"] == 2).to_numpy())[0])
    assert frame.loc[c, "base_time"] == 1
    wide = df.pivot(index="unit", columns="time", values="y")
    y2, y1 = wide.loc[:8, 2].to_numpy(), wide.loc[:8, 1].to_numpy()
    both = np.arange(9) < 6
    n_t, n_b = 8, 7
    z = y2[both] / n_t - y1[both] / n_b
    a_both = ((z - z.mean()) ** 2).sum() * 6 / 5
    s2 = np.nanvar(y2, ddof=1)  # units 0-7
    s1 = np.nanvar(y1, ddof=1)  # units 0-5 and 8
    a_t, a_b = 2 * s2 / n_t**2, 1 * s1 / n_b**2
    d0 = (wide.loc[9:, 2] - wide.loc[9:, 1]).to_numpy()
    a_ctrl = d0.var(ddof=1) / d0.size
    corr = res.inference.correction
    parts = np.array([a_both, a_t, a_b, a_ctrl])
    assert corr.variance[c] == pytest.approx(parts.sum(), rel=1e-9)
    nu = np.array([5, n_t - 1, n_b - 1, d0.size - 1])
    # the three parts share the six complete units: the level variances at 2 and 1 are
    # estimated on them too, and so is z's. Two sample variances on m shared units with
    # correlation r covary by 2 r**2 m a_k a_l / (nu_k nu_l) (normal theory)
    r = np.corrcoef(np.stack([z, y2[both], y1[both]]))
    cross = 2 * 6 * (parts[0] * parts[1] * r[0, 1] ** 2 / (nu[0] * nu[1])
                     + parts[0] * parts[2] * r[0, 2] ** 2 / (nu[0] * nu[2])
                     + parts[1] * parts[2] * r[1, 2] ** 2 / (nu[1] * nu[2]))
    independent = parts.sum() ** 2 / (parts**2 / nu).sum()
    dof = parts.sum() ** 2 / ((parts**2 / nu).sum() + cross)
    assert corr.df[c] == pytest.approx(dof, rel=1e-9)
    assert dof < 0.95 * independent  # the levels (difficulty 3 sd) correlate strongly
    # before issue 50: unit 8's part had one unit (no degrees of freedom) and units 6-7's
    # part n / (n - 1) = 2 with one degree of freedom
    assert corr.df[c] > 6


def test_welch_parts_are_unbiased_for_the_variance_of_the_difference_of_means():
    """Issue 50: unweighted, the corrected parts of one side add up to an unbiased variance
    of ``m_t - m_b`` whatever the observation pattern: checked exactly, as a quadratic form,
    for i.i.d. rows with covariance ``S`` (expectation ``tr(Q S)``, a property of the
    coefficients that holds for every draw)."""
    df = _one_cohort_with_holes()
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
                         balance="keep")
    design = prepare_panel(panel, None, need_never_treated=True, anticipation=0,
                           lower_is_better=False, owner="test")
    inf, cells = _holes_influence(design)
    c = int(np.flatnonzero((design.times[cells.t] == 2) & (cells.ref == 0))[0])
    # the treated part as a function of the cohort's 9 x 2 outcomes (times 2 and 1):
    # a quadratic form x' Q x in x = (y_2 of units 0-8, y_1 of units 0-8); recover Q by
    # polarisation from the implementation, replacing the rows' outcomes
    rows = design.holes
    cohort_rows = np.flatnonzero(rows.unit < 9)
    sel = [(rows.unit[r], rows.time[r]) for r in cohort_rows]
    t_idx = {int(np.flatnonzero(design.times == 2)[0]): 0,
             int(np.flatnonzero(design.times == 1)[0]): 1}
    keys = [(int(u), t_idx[int(t)]) for u, t in sel if int(t) in t_idx]

    def treated_part(x):
        y = rows.y.copy()
        for (u, j), v in zip(keys, x):
            r = cohort_rows[[k for k, (uu, tt) in enumerate(sel)
                             if uu == u and t_idx.get(int(tt)) == j][0]]
            y[r] = v
        new = HoleRows(unit=rows.unit, time=rows.time, y=y, unit_start=rows.unit_start)
        _, coefficients, _ = hole_cells(new, design.w, design.starts, cells,
                                        design.times.size)
        other = HolesInfluence.build(new, design.w, design.starts, cells,
                                     design.times.size, coefficients)
        parts, n = other.welch_groups()
        return block_welch(parts[:3, [c]], n[:3, [c]])[0][0]

    m = len(keys)
    basis = np.eye(m)
    q = np.empty((m, m))
    f0 = treated_part(np.zeros(m))
    single = [treated_part(basis[i]) for i in range(m)]
    for i in range(m):
        for j in range(m):
            q[i, j] = (treated_part(basis[i] + basis[j]) - single[i] - single[j] + f0) / 2
    # the estimator's weights a: m_2 - m_1
    a = np.array([1 / 8 if j == 0 else -1 / 7 for _, j in keys])
    for s_tt, s_bb, s_tb in ((1.0, 1.0, 0.0), (1.0, 2.0, 0.9), (4.0, 1.0, 1.9)):
        cov = np.zeros((m, m))
        for i, (u, j) in enumerate(keys):
            for k, (v, l) in enumerate(keys):
                if u == v:
                    cov[i, k] = (s_tt, s_bb)[j] if j == l else s_tb
        # E[x' Q x] for x with mean mu (any common mean per time: Q annihilates it)
        assert np.trace(q @ cov) == pytest.approx(a @ cov @ a, rel=1e-8)
