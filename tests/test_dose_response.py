"""Dose-response of repeated exposure under random assignment of counts (Hubble)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem.datasets import simulate_doses


def test_estimates_are_welch_differences_of_means():
    df, _ = simulate_doses(doses=(0, 1, 4), units_per_dose=30, n_times=4, seed=2)
    res = didmem.dose_response(df, base=0.0, n_bootstrap=0)
    wide = df.pivot(index="unit", columns="time", values="y")
    change = wide.sub(wide[0.0], axis=0).drop(columns=0.0)
    dose = df.groupby("unit")["dose"].first()
    row = res.to_frame().set_index(["dose", "time"]).loc[(4.0, 3.0)]
    a, b = change.loc[dose == 4.0, 3.0], change.loc[dose == 0.0, 3.0]
    assert row["estimate"] == pytest.approx(a.mean() - b.mean(), abs=1e-12)
    assert row["std_error"] == pytest.approx(np.sqrt(a.var() / a.size + b.var() / b.size),
                                             rel=1e-12)
    assert row["ci_upper"] - row["estimate"] == pytest.approx(1.959963984540054
                                                              * row["std_error"])
    assert res.band == "pointwise" and (row["n_units"], row["n_control"]) == (30, 30)
    levels = didmem.dose_response(df, n_bootstrap=0).to_frame()
    assert set(levels["time"]) == {0.0, 1.0, 2.0, 3.0}  # in levels every time is a row


def test_recovers_a_log_linear_dose_response():
    df, truth = simulate_doses(units_per_dose=400, slope=0.1, seed=5)
    res = didmem.dose_response(df, base=0.0, seed=1)
    frame = res.to_frame().merge(truth, on=["dose", "time"], validate="one_to_one")
    assert res.band == "simultaneous" and res.critical_value > 1.96
    assert ((frame["ci_lower"] <= frame["theta"]) & (frame["theta"] <= frame["ci_upper"])).all()
    last = res.at()  # the last checkpoint, by dose
    slope = np.polyfit(np.log2(1 + last.index.to_numpy()), last["estimate"], 1)[0]
    # seed 5: 0.105 against the true 0.1 (its spread over panels: about 0.004)
    assert slope == pytest.approx(0.1, abs=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("dgp", ["loglinear", "saturating"])
def test_band_covers_by_monte_carlo(dgp):
    """200 replications: the simultaneous 95% band over 7 doses x 5 checkpoints covers the
    whole dose-response in 0.95 of them, within 3 Monte Carlo standard errors (0.046)."""
    reps, hits = 200, 0
    for r in range(reps):
        df, truth = simulate_doses(units_per_dose=40, dgp=dgp, seed=1000 + r)
        frame = didmem.dose_response(df, base=0.0, n_bootstrap=299,
                                     seed=r).to_frame().merge(truth)
        hits += bool(((frame["ci_lower"] <= frame["theta"])
                      & (frame["theta"] <= frame["ci_upper"])).all())
    coverage = hits / reps
    assert abs(coverage - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / reps), coverage


def test_saves_loads_and_summarises(tmp_path):
    df, _ = simulate_doses(doses=(0, 1, 2), units_per_dose=20, seed=0)
    res = didmem.dose_response(df, base=0.0, seed=0)
    path = res.save(tmp_path / "dose.parquet")
    back = didmem.load_result(path)
    assert isinstance(back, didmem.DoseResponseResult)
    pd.testing.assert_frame_equal(back.to_frame(), res.to_frame())
    assert back.summary() == res.summary()
    assert "simultaneous band" in res.summary() and "changes since checkpoint 0" in res.summary()
    with pytest.raises(didmem.ParameterError, match="no rows at time 99"):
        res.at(99)
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    from didmem.results.plotting import plot_dose_response

    ax = plot_dose_response(back)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2"]
    with pytest.raises(didmem.ParameterError, match="'result' parameter of plot_dose_response"):
        plot_dose_response(res.to_frame())


def test_odd_input_is_refused_with_names():
    df, _ = simulate_doses(doses=(0, 1, 2), units_per_dose=5, seed=0)
    varying = df.copy()
    varying.loc[(varying["unit"] == 3) & (varying["time"] == 2), "dose"] = 7
    with pytest.raises(didmem.PanelError, match="'dose' changes over time for 1 units, e.g. unit 3"):
        didmem.dose_response(varying)
    with pytest.raises(didmem.PanelError, match="non-negative whole numbers.*unit 0 with -1.0"):
        didmem.dose_response(df.assign(dose=np.where(df["unit"] == 0, -1.0, df["dose"])))
    with pytest.raises(didmem.ParameterError, match=r"needs units with dose 0.*\[1.0, 2.0\]"):
        didmem.dose_response(df[df["dose"] > 0])
    with pytest.raises(didmem.ParameterError, match="base=17 is not one of the times"):
        didmem.dose_response(df, base=17)
    with pytest.raises(didmem.PanelError, match="1 missing outcomes in 'y' .1 units, e.g. unit 0"):
        didmem.dose_response(df.drop(index=0))
    with pytest.raises(didmem.PanelError, match=r"missing columns \['count'\]"):
        didmem.dose_response(df, dose="count")
    with pytest.raises(didmem.ParameterError, match="'alpha' parameter of dose_response"):
        didmem.dose_response(df, alpha=1.5)
