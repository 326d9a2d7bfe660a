"""didmem.power_analysis: shapes, cost, monotonicity, recommend(), routes agreeing, bad input."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.stats import norm

import didmem
from didmem import DiDEstimator
from didmem.errors import ParameterError
from didmem.power import Assumptions, power_analysis
from didmem.power._analytic import analytic_power, sup_t_critical


def _panel(units=16, n_never=60, n_cohorts=3, n_times=5, seed=0, effect=0.5):
    df, _ = didmem.datasets.simulate_panel(n_cohorts=n_cohorts, units_per_cohort=units,
                                           n_never_treated=n_never, n_times=n_times,
                                           instantaneous=effect, noise_sd=1.0, seed=seed)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


FAST = didmem.DiDEstimator(n_bootstrap=199)


def test_plan_from_pilot_has_the_contract_columns_and_one_row_per_design():
    analysis = power_analysis(_panel(), units_per_cohort=[10, 20], n_validation=[40, 80],
                       n_simulations=10, seed=0, estimator=FAST, tokens_per_second=1e5)
    t = analysis.to_frame()
    assert len(t) == 4
    for col in ("units_per_cohort", "power", "mde", "tokens", "n_validation", "checkpoints",
                "gpu_hours", "method", "power_mc_error"):
        assert col in t.columns
    assert (t["method"] == "simulated").all() and analysis.effect_source == "pilot"
    assert t["power"].between(0, 1).all() and (t["mde"] > 0).all()
    assert np.allclose(t["gpu_hours"], t["tokens"] / 1e5 / 3600)


def test_tokens_follow_the_cost_formula_and_thinning_keeps_every_kth_checkpoint():
    a = Assumptions(n_cohorts=95, n_checkpoints=96)
    t = power_analysis(a, units_per_cohort=100, n_validation=2000, effect=0.1,
                    checkpoint_every=[1, 2, 4], seed=0).to_frame()
    # the figure: (95 x 100 + 2,000) x 96 x 2,049, about 2.3e9 tokens
    assert t["tokens"][0] == (95 * 100 + 2000) * 96 * 2049
    assert t["checkpoints"].tolist() == [96, 48, 24]
    assert t["n_cohorts"].tolist() == [95, 47, 23]  # cohorts after the last kept one drop
    assert np.all(t["tokens"] == (t["n_cohorts"] * 100 + 2000) * t["checkpoints"] * 2049)


def test_analytic_matches_the_two_period_closed_form():
    # one cohort, two checkpoints: Var = 2 s^2 (1 - rho) (1/n1 + 1/n0), one key, crit = z
    # R's rule (small_sample=False): normal critical value and normal power
    a = Assumptions(n_cohorts=1, n_checkpoints=2, outcome_sd=2.0, unit_share=0.75)
    t = power_analysis(a, units_per_cohort=50, n_validation=200, effect=0.3,
                    estimator=DiDEstimator(small_sample=False), seed=0).to_frame()
    se = np.sqrt(2 * 4.0 * 0.25 * (1 / 50 + 1 / 200))
    z = norm.ppf(0.975)
    assert t["critical_value"][0] == pytest.approx(z)
    assert t["power"][0] == pytest.approx(norm.cdf(0.3 / se - z) + norm.cdf(-0.3 / se - z),
                                          abs=1e-12)
    assert t["mde"][0] == pytest.approx((z + norm.ppf(0.8)) * se, rel=1e-3)


def test_analytic_small_sample_is_welch_t_in_the_two_period_case():
    # the default band: Welch-Satterthwaite df, t quantile, noncentral t power
    a = Assumptions(n_cohorts=1, n_checkpoints=2, outcome_sd=2.0, unit_share=0.75)
    t = power_analysis(a, units_per_cohort=10, n_validation=200, effect=0.8,
                    seed=0).to_frame()
    part = 2 * 4.0 * 0.25
    treated, control = part / 10, part / 200
    df = (treated + control) ** 2 / (treated**2 / 9 + control**2 / 199)
    se = np.sqrt(treated + control)
    crit = stats.t.ppf(0.975, df)
    assert t["critical_value"][0] == pytest.approx(crit, rel=1e-9)
    power = stats.nct.sf(crit, df, 0.8 / se) + stats.nct.cdf(-crit, df, 0.8 / se)
    assert t["power"][0] == pytest.approx(power, abs=1e-10)
    normal = power_analysis(a, units_per_cohort=10, n_validation=200, effect=0.8,
                         estimator=DiDEstimator(small_sample=False), seed=0).to_frame()
    assert t["power"][0] < normal["power"][0]  # the t band is wider


def test_sup_t_critical_value_of_independent_keys():
    rng = np.random.default_rng(0)
    k = 10
    expected = norm.ppf(1 - (1 - 0.95 ** (1 / k)) / 2)  # max of 10 independent |N(0,1)|
    assert sup_t_critical(np.eye(k) * 3.0, 0.05, rng, 200000) == pytest.approx(expected, abs=0.02)
    perfectly = np.ones((k, k))  # one key repeated: the pointwise value
    assert sup_t_critical(perfectly, 0.05, rng) == pytest.approx(norm.ppf(0.975), abs=0.02)
    assert analytic_power(np.zeros(3), np.ones(3), norm.ppf(0.975)) == pytest.approx(0.05)


@pytest.mark.parametrize("target", ["instantaneous", "persistent", "overall"])
def test_analytic_power_increases_and_mde_decreases_with_units(target):
    a = Assumptions(n_cohorts=6, n_checkpoints=9, unit_share=0.3, ar1=0.5)
    t = power_analysis(a, units_per_cohort=[5, 10, 20, 50, 100], n_validation=200, effect=0.3,
                    target=target, seed=0).to_frame()
    assert np.all(np.diff(t["power"]) > 0)
    assert np.all(np.diff(t["mde"]) < 0)


def test_simulated_power_increases_with_units():
    analysis = power_analysis(_panel(), units_per_cohort=[4, 16, 64], n_validation=120, effect=0.6,
                       n_simulations=40, seed=1, estimator=FAST)
    power = analysis.to_frame()["power"].to_numpy()
    assert power[0] < power[1] < power[2]


def test_recommend_returns_the_cheapest_design_reaching_the_power():
    a = Assumptions(n_cohorts=4, n_checkpoints=6, unit_share=0.5)
    analysis = power_analysis(a, units_per_cohort=[10, 20, 50, 100, 200], n_validation=400,
                       effect=0.5, seed=0)
    t = analysis.to_frame()
    best = analysis.recommend(0.8)
    reaching = t[t["power"] >= 0.8]
    assert best["units_per_cohort"] == reaching["units_per_cohort"].min()
    assert best["power"] >= 0.8
    assert analysis.recommend(0.2)["units_per_cohort"] <= best["units_per_cohort"]
    with pytest.raises(ParameterError, match="No design of the analysis reaches power 1"):
        analysis.recommend(0.9999999)
    with pytest.raises(ParameterError, match="'power' parameter of PowerAnalysis.recommend"):
        analysis.recommend(1.5)


def test_analytic_and_simulated_agree_on_a_tiny_case():
    # a large pilot (estimated covariance close to the truth), 60 instances per cohort
    pilot = _panel(units=150, n_never=300, n_cohorts=2, n_times=4, seed=3)
    kw = dict(units_per_cohort=60, n_validation=120, effect=0.45, seed=0)
    ana = power_analysis(pilot, method="analytic", **kw).to_frame()
    sim = power_analysis(pilot, n_simulations=150, estimator=didmem.DiDEstimator(n_bootstrap=499),
                      **kw).to_frame()
    assert ana["method"][0] == "analytic" and sim["method"][0] == "simulated"
    assert abs(ana["power"][0] - sim["power"][0]) < 0.1 + 3 * sim["power_mc_error"][0]
    assert sim["mde"][0] == pytest.approx(ana["mde"][0], rel=0.15)


def test_result_pilot_uses_the_results_settings_and_lower_is_better():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=16, n_never_treated=60,
                                           n_times=5, instantaneous=0.5, seed=2)
    df["loss"] = -df["y"]
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="loss")
    res = didmem.DiDEstimator(n_bootstrap=99, lower_is_better=True, seed=0).fit(panel)
    a = power_analysis(res, units_per_cohort=[20], n_simulations=8, seed=0).to_frame()
    est = didmem.DiDEstimator(n_bootstrap=99, lower_is_better=True)
    b = power_analysis(panel, units_per_cohort=[20], n_simulations=8, seed=0,
                    estimator=est).to_frame()
    # the pilot's own effect is memorisation (positive) on both routes
    assert a["effect"][0] > 0 and a["effect"][0] == pytest.approx(b["effect"][0])
    assert a["n_validation"][0] == 60


def test_checkpoint_thinning_on_a_pilot():
    t = power_analysis(_panel(n_times=7, n_cohorts=5), units_per_cohort=10, checkpoint_every=[1, 2],
                    n_simulations=5, seed=0, estimator=FAST).to_frame()
    assert t["checkpoints"].tolist() == [7, 4]
    assert t["n_cohorts"].tolist() == [5, 3]


@pytest.mark.parametrize("kwargs, message", [
    (dict(target="residual"), "'target' parameter of power_analysis must be one of"),
    (dict(units_per_cohort=[]), "'units_per_cohort' parameter of power_analysis must be an "
     "integer >= 2 or a non-empty sequence"),
    (dict(units_per_cohort=[10, 1]), r"'units_per_cohort' parameter .* Got \[10, 1\]"),
    (dict(units_per_cohort=[10.5]), "'units_per_cohort' parameter .* must be an integer"),
    (dict(n_simulations=1), "'n_simulations' parameter of power_analysis must be an integer"),
    (dict(method="exact"), "'method' parameter of power_analysis must be one of"),
    (dict(pool="none"), "'pool' parameter of power_analysis"),
    (dict(effect=float("nan")), "'effect' parameter of power_analysis must be a number"),
    (dict(tokens_per_second=0), "'tokens_per_second' parameter of power_analysis"),
    (dict(tokens_per_instance=-5), "'tokens_per_instance' parameter of power_analysis"),
    (dict(tokens_per_instance=2.5), "'tokens_per_instance' parameter of power_analysis"),
    (dict(estimator=didmem.TWFEEstimator()), "'estimator' parameter of power_analysis must be an "
     "instance of DiDEstimator"),
    (dict(alpha=1.5), r"'alpha' parameter of power_analysis must be a number in \[1e-12, 1\)"),
    (dict(method="analytic", estimator=didmem.DiDEstimator(control_group="not_yet_treated")),
     "method='analytic' assumes never-treated controls"),
])
def test_bad_arguments_are_refused_by_name(kwargs, message):
    args = dict(units_per_cohort=[10], n_simulations=5, seed=0)
    args.update(kwargs)
    with pytest.raises(ParameterError, match=message):
        power_analysis(_panel(), **args)


def test_bad_sources_and_assumptions_are_refused():
    with pytest.raises(ParameterError, match="'source' parameter of power_analysis must be a pilot "
                                             ".* got DataFrame"):
        power_analysis(pd.DataFrame(), units_per_cohort=10)
    with pytest.raises(ParameterError, match="needs effect="):
        power_analysis(Assumptions(n_cohorts=2, n_checkpoints=3), units_per_cohort=10)
    with pytest.raises(ParameterError, match="only method='analytic'"):
        power_analysis(Assumptions(n_cohorts=2, n_checkpoints=3), units_per_cohort=10, effect=1.0,
                    method="simulated")
    with pytest.raises(ParameterError, match="'n_checkpoints' parameter of Assumptions must be "
                                             "at least n_cohorts \\+ 1 = 4"):
        Assumptions(n_cohorts=3, n_checkpoints=3)
    with pytest.raises(ParameterError, match="'ar1' parameter of Assumptions"):
        Assumptions(n_cohorts=3, n_checkpoints=5, ar1=1.0)
    with pytest.raises(ParameterError, match="'unit_share' parameter"):
        Assumptions(n_cohorts=3, n_checkpoints=5, unit_share=-0.1)
    with pytest.raises(ParameterError, match="at least 2 never-treated units"):
        power_analysis(_panel(n_never=1), units_per_cohort=10, n_simulations=5)


def test_plot_plan_and_the_cli(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from didmem.cli import main
    from didmem.results.plotting import plot_power_analysis

    a = Assumptions(n_cohorts=4, n_checkpoints=6, unit_share=0.5)
    analysis = power_analysis(a, units_per_cohort=[10, 50, 200], n_validation=[100, 400], effect=0.5,
                       seed=0)
    ax = plot_power_analysis(analysis)
    assert len(ax.lines) >= 3 and "recommended" in ax.get_title()
    code = main(["power", "--cohorts", "4", "--checkpoints", "6", "--effect", "0.5",
                 "--unit-share", "0.5", "--units", "10,50,200", "--validation", "400",
                 "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "recommended" in out
    assert (tmp_path / "power.png").stat().st_size > 0
    table = pd.read_csv(tmp_path / "power.csv")
    assert table["units_per_cohort"].tolist() == [10, 50, 200]
    assert main(["power", "--cohorts", "4", "--out", str(tmp_path)]) == 2
    assert "Give --pilot FILE, or the assumptions" in capsys.readouterr().err
    assert main(["power", "--pilot", str(tmp_path / "missing.csv"), "--outcome", "y"]) == 2


@pytest.mark.slow
def test_planned_power_agrees_with_monte_carlo_power_within_007():
    """The docs' claim on two data-generating processes, with modest replications.

    Monte Carlo power of the default-setting estimator (499 draws here) on 60 fresh panels
    against the simulated plan from one 16-per-cohort pilot (pool="all", 60 studies); the
    tolerance adds twice the combined MC error (about 0.05) to 0.07.
    """
    import warnings

    from didmem.errors import DidmemWarning

    def sim_ar1(units, n_never, seed):
        rng = np.random.default_rng(seed)
        n, t = 3 * units + n_never, 6
        eps = np.empty((n, t))
        eps[:, 0] = rng.standard_normal(n)
        for j in range(1, t):
            eps[:, j] = 0.6 * eps[:, j - 1] + 0.8 * rng.standard_normal(n)
        cohort = np.concatenate([np.repeat([1.0, 2.0, 3.0], units), np.full(n_never, np.inf)])
        times = np.arange(t, dtype=float)
        y = 0.5 * rng.standard_normal(n)[:, None] + eps + 0.4 * (times >= cohort[:, None])
        df = pd.DataFrame({"unit": np.repeat(np.arange(n), t), "time": np.tile(times, n),
                           "cohort": np.repeat(cohort, t), "y": y.ravel()})
        return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")

    dgps = {"iid": lambda u, seed: _panel(units=u, n_never=100, n_cohorts=3, n_times=5,
                                          seed=seed, effect=0.5),
            "ar1": lambda u, seed: sim_ar1(u, 100, seed)}
    est = didmem.DiDEstimator(n_bootstrap=499)
    for name, make in dgps.items():
        effect = 0.5 if name == "iid" else 0.4
        analysis = power_analysis(make(16, 999), units_per_cohort=[10, 30], effect=effect,
                           n_simulations=60, seed=0, estimator=est).to_frame()
        for i, u in enumerate([10, 30]):
            shares = []
            for r in range(60):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DidmemWarning)
                    res = est.with_params(seed=r).fit(make(u, 10_000 + r))
                    shares.append(res.aggregate("instantaneous").to_frame()["significant"].mean())
            mc, mc_err = np.mean(shares), np.std(shares, ddof=1) / np.sqrt(len(shares))
            err = np.hypot(mc_err, analysis["power_mc_error"][i])
            assert abs(analysis["power"][i] - mc) <= 0.07 + 2 * err, (name, u, analysis["power"][i], mc)


def test_plan_prices_a_design_by_suite():
    from didmem.suites import SUITES, get_suite

    a = didmem.Assumptions(n_cohorts=4, n_checkpoints=6, outcome_sd=1.0)
    kwargs = dict(units_per_cohort=[10], n_validation=20, effect=0.5, seed=0)
    pythia = didmem.power_analysis(a, **kwargs).to_frame()
    olmo = didmem.power_analysis(a, suite="olmo-7b", **kwargs).to_frame()
    olmo2 = didmem.power_analysis(a, suite="olmo-2-1124-7b", **kwargs).to_frame()
    assert olmo.loc[0, "suite"] == "olmo-7b"
    # same instances and checkpoints; tokens per instance 2,049 (Pythia), 2,048, 4,096
    assert pythia.loc[0, "tokens"] == 60 * 6 * 2049
    assert olmo.loc[0, "tokens"] == 60 * 6 * 2048
    assert olmo2.loc[0, "tokens"] == 60 * 6 * 4096
    assert olmo.loc[0, "power"] == pythia.loc[0, "power"]
    assert get_suite("pythia-160m-deduped").checkpoints[-1] == 143_000
    assert len(get_suite("pythia-160m-deduped").checkpoints) == 154  # the README's count
    assert {s.design_kind for s in SUITES.values()} == {"pythia", "olmo", "hubble"}
    with pytest.raises(ParameterError, match="Unknown suite 'olmo-70b'; known suites: "):
        didmem.power_analysis(a, suite="olmo-70b", **kwargs)
    many = didmem.Assumptions(n_cohorts=4, n_checkpoints=200, outcome_sd=1.0)
    with pytest.raises(ParameterError, match="keeps 200 checkpoints; suite 'pythia-70m' "
                                             "publishes 154"):
        didmem.power_analysis(many, suite="pythia-70m", **kwargs)


def test_cli_plan_on_a_lab_pilot_counts_its_instance_length(tmp_path, capsys):
    import json

    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from didmem.cli import main

    df, _ = didmem.datasets.simulate_panel(n_cohorts=3, units_per_cohort=12, n_never_treated=30,
                                           seed=0)
    lab = tmp_path / "lab"
    lab.mkdir()
    df.to_csv(lab / "panel.csv", index=False)
    (lab / "manifest.json").write_text(json.dumps({"settings": {"config": {"seq_len": 32}}}))
    args = ["power", "--pilot", str(lab / "panel.csv"), "--outcome", "y", "--units", "10",
            "--simulations", "4", "--n-bootstrap", "49", "--out", str(tmp_path / "p")]
    assert main(args) == 0
    out = capsys.readouterr().out
    table = pd.read_csv(tmp_path / "p" / "power.csv")
    assert (table["tokens"] == table["instances"] * table["checkpoints"] * 32).all()
    assert "tokens: 32 per instance" in out and "give --tokens-per-second" in out
    assert main(args + ["--tokens-per-instance", "100", "--tokens-per-second", "1000",
                        "--overwrite"]) == 0
    out = capsys.readouterr().out
    table = pd.read_csv(tmp_path / "p" / "power.csv")
    assert (table["tokens"] == table["instances"] * table["checkpoints"] * 100).all()
    assert np.allclose(table["gpu_hours"], table["tokens"] / 1000 / 3600)
    assert "give --tokens-per-second" not in out
