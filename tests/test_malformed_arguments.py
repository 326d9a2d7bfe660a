"""Every public entry point refuses malformed arguments with a DidmemError naming them.

A property test over the declarations themselves: for each function or class that declares
its constraints (:func:`didmem._validation.validate_params`, ``_constraints``), values drawn
from a pool of odd ones (wrong types, NaN, negative, empty, ...) that break the declared
constraint must be refused with a :class:`~didmem.DidmemError` whose message names the
argument, never with another library's exception. The entry points: the estimators, the
analyses, the simulators (``simulate_panel``, ``simulate_exposures``), every figure of
:mod:`didmem.results.plotting`, :func:`~didmem.report.render_report`, the lab (``LabConfig``,
``lab.run``, ``lab.replicate``: refused before anything trains) and the study API
(``Study.from_file``, ``from_dict``, ``plan``, ``score``, ``run``). Two more property tests
put odd values into a study's tables and odd strings on the command line (values argparse
lets through), and entry points that take objects rather than declared values are listed by
hand below.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import didmem
from didmem._validation import constraints_of
from didmem.errors import DidmemError

ODD_VALUES = [None, "a", "", "0.8", -1, -5, 0, 1, 2.5, -0.5, 1.5, 10**30, float("nan"),
              float("inf"), -float("inf"), [], {}, [1], [1, 1], {0: 0.0}, (), True, False,
              object(), np.float64("nan"), np.int64(-3)]


@pytest.fixture(scope="module")
def panel():
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=8, n_never_treated=10,
                                           n_times=5, seed=0)
    return didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")


@pytest.fixture(scope="module")
def event_study(panel):
    return didmem.DiDEstimator(base_period="universal", n_bootstrap=0).fit(panel) \
        .aggregate("dynamic")


@pytest.fixture(scope="module")
def plan():
    return didmem.power_analysis(didmem.Assumptions(n_cohorts=2, n_checkpoints=4),
                              units_per_cohort=[10, 20], effect=0.5, seed=0)


_FITTED = {}


def _fitted(panel):
    """The panel's fit, once (the property test draws hundreds of calls)."""
    if id(panel) not in _FITTED:
        _FITTED[id(panel)] = didmem.DiDEstimator(n_bootstrap=0).fit(panel)
    return _FITTED[id(panel)]


_ONCE = {}


def _sensitivity(event_study):
    if "sensitivity" not in _ONCE:
        _ONCE["sensitivity"] = didmem.sensitivity(event_study, m=[0.0, 0.1], grid_points=50)
    return _ONCE["sensitivity"]


def _study(root):
    """A valid study over checkpoints that are never loaded (nothing here scores)."""
    if "study" not in _ONCE:
        from didmem import Study

        root.mkdir(parents=True, exist_ok=True)
        np.save(root / "tokens.npy", np.ones((4, 8), dtype=np.int64))
        _ONCE["study"] = Study.from_dict(_study_data(), base_dir=root)
    return _ONCE["study"]


def _study_data() -> dict:
    return {"model": "tiny", "metrics": ["mean_token_loglik"], "shard_size": 2, "out": "o",
            "backend": {"kind": "transformers", "checkpoints": {"0": "c0", "2": "c2"},
                        "device": "cpu", "batch_size": 2, "dtype": "float32",
                        "prefix_length": 2, "suffix_length": 2},
            "instances": {"file": "tokens.npy"},
            "runner": {"kind": "local", "max_retries": 1},
            "estimate": {"n_bootstrap": 9, "alpha": 0.05, "control_group": "never_treated"},
            "report": {"title": "t", "figures": ["profile"]}}


def _more_calls(panel, event_study, plan, root):
    """The entry points of the third pass (issue 40, item 6)."""
    from didmem import lab
    from didmem.report import render_report
    from didmem.study.pipeline import Study

    fitted = _fitted(panel)
    calls = {
        didmem.datasets.simulate_exposures: lambda n, v: didmem.datasets.simulate_exposures(
            **{"n_first": 1, "units_per_cohort": 2, "n_never_treated": 2, n: v}),
        render_report: lambda n, v: render_report(fitted, **{n: v}),
        lab.LabConfig: lambda n, v: lab.LabConfig(**{n: v}),
        lab.run: lambda n, v: lab.run(**{"out_dir": root / "lab", n: v}),
        lab.replicate: lambda n, v: lab.replicate(**{"out_dir": root / "lab", n: v}),
        Study.from_file: lambda n, v: Study.from_file(**{"path": root / "none.toml", n: v}),
        Study.from_dict: lambda n, v: Study.from_dict(**{"data": {}, n: v}),
    }
    for method in ("plan", "score", "run"):
        calls[getattr(Study, method)] = (
            lambda m: lambda n, v: getattr(_study(root / "study"), m)(**{n: v}))(method)
    try:
        import matplotlib
    except ImportError:  # the figures need the plot extra
        return calls
    matplotlib.use("Agg")
    from didmem import plotting

    for draw in (plotting.plot_profile, plotting.plot_exposure_profiles,
                 plotting.plot_instantaneous, plotting.plot_persistent,
                 plotting.plot_residual, plotting.plot_pretrends):
        calls[draw] = (lambda d: lambda n, v: d(fitted, **{n: v}))(draw)
    calls[plotting.plot_profile_correlation] = lambda n, v: plotting.plot_profile_correlation(
        fitted, fitted, **{n: v})
    calls[plotting.plot_power_analysis] = lambda n, v: plotting.plot_power_analysis(**{"analysis": plan, n: v})
    calls[plotting.plot_sensitivity] = lambda n, v: plotting.plot_sensitivity(
        **{"sensitivity": _sensitivity(event_study), n: v})
    return calls


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("malformed")


def _calls(panel, event_study, plan, root=None):
    """``owner -> call(name, value)`` for each entry point with declared constraints."""
    assumptions = didmem.Assumptions(n_cohorts=2, n_checkpoints=4)
    calls = {
        didmem.sensitivity: lambda n, v: didmem.sensitivity(event_study, **{n: v}),
        didmem.power_analysis: lambda n, v: didmem.power_analysis(
            assumptions, **{"units_per_cohort": 10, "effect": 0.5, n: v}),
        didmem.Assumptions: lambda n, v: didmem.Assumptions(
            **{"n_cohorts": 2, "n_checkpoints": 4, n: v}),
        didmem.PowerAnalysis.recommend: lambda n, v: plan.recommend(**{n: v}),
        didmem.datasets.simulate_panel: lambda n, v: didmem.datasets.simulate_panel(
            **{"n_cohorts": 1, "units_per_cohort": 2, "n_never_treated": 2, n: v}),
        didmem.GroupTimeResult.aggregate: lambda n, v: _fitted(panel).aggregate(
            **{"aggregation": "dynamic", n: v}),
    }
    for cls in (didmem.DiDEstimator, didmem.DifferenceEstimator, didmem.TWFEEstimator):
        calls[cls] = (lambda c: lambda n, v: c(**{n: v}).fit(panel))(cls)
    if root is not None:
        calls.update(_more_calls(panel, event_study, plan, root))
    return calls


def _declared(panel, event_study, plan, root=None):
    return [(owner, name, call) for owner, call in _calls(panel, event_study, plan,
                                                          root).items()
            for name in constraints_of(owner)]


@settings(max_examples=600, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(data=st.data())
def test_declared_constraints_are_enforced_with_a_named_error(panel, event_study, plan, root,
                                                              data):
    owner, name, call = data.draw(st.sampled_from(_declared(panel, event_study, plan, root)))
    value = data.draw(st.sampled_from(ODD_VALUES))
    constraint = constraints_of(owner)[name]
    assume(not constraint(value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DidmemError, match=f"'{name}'"):
            call(name, value)


def test_every_declared_argument_is_reached(panel, event_study, plan, root):
    """The pool of odd values breaks every declared constraint at least once, so the property
    test above exercises every argument (a check that cannot be vacuous)."""
    declared = _declared(panel, event_study, plan, root)
    for owner, name, _ in declared:
        constraint = constraints_of(owner)[name]
        assert any(not constraint(v) for v in ODD_VALUES), (owner, name)
    owners = {getattr(owner, "__qualname__", owner) for owner, _, _ in declared}
    assert {"simulate_exposures", "render_report", "LabConfig", "run", "replicate",
            "Study.from_file", "Study.from_dict", "Study.plan", "Study.score",
            "Study.run"} <= owners, owners
    pytest.importorskip("matplotlib")
    assert {"plot_profile", "plot_exposure_profiles", "plot_instantaneous", "plot_persistent",
            "plot_residual", "plot_pretrends", "plot_profile_correlation", "plot_power_analysis",
            "plot_sensitivity"} <= owners, owners


@pytest.mark.parametrize("name, value", [("quick", "a"), ("seed", -1), ("overwrite", "yes"),
                                         ("config", {}), ("out_dir", 5), ("out_dir", "")])
def test_the_lab_refuses_before_anything_trains(tmp_path, monkeypatch, name, value):
    """didmem.lab.run(out, quick="a") trained at the demo scale (a minute) before."""
    from didmem import lab
    from didmem.lab import pipeline

    monkeypatch.setattr(pipeline, "build_design", lambda cfg: pytest.fail("it ran"))
    kwargs = {"out_dir": tmp_path / "lab", name: value}
    with pytest.raises(DidmemError, match=f"'{name}' parameter of didmem.lab.run"):
        lab.run(**kwargs)
    assert not (tmp_path / "lab").exists()


@pytest.mark.parametrize("case, name", [
    ("plot_sensitivity", "sensitivity"),
    ("plot_power_analysis", "analysis"),
    ("sensitivity_data", "AggregateResult"),
    ("plan_source", "source"),
    ("saved_pilot", "pass the pilot's panel"),
])
def test_objects_of_the_wrong_kind_are_named(panel, event_study, plan, tmp_path, case, name):
    pytest.importorskip("matplotlib")
    from didmem import plotting

    cases = {
        "plot_sensitivity": lambda: plotting.plot_sensitivity(event_study),
        "plot_power_analysis": lambda: plotting.plot_power_analysis(event_study),
        "sensitivity_data": lambda: didmem.sensitivity(pd.DataFrame()),
        "plan_source": lambda: didmem.power_analysis(pd.DataFrame(), units_per_cohort=10),
        "saved_pilot": lambda: didmem.power_analysis(
            didmem.load_result(didmem.DiDEstimator(n_bootstrap=0).fit(panel)
                               .save(tmp_path / "r.parquet")), units_per_cohort=10),
    }
    with pytest.raises(DidmemError, match=name):
        cases[case]()


@pytest.mark.parametrize("case, name", [
    ({"weights": []}, "weights column"),
    ({"cluster": {}}, "cluster column"),
    ({"never_treated": []}, "'never_treated' parameter of Panel"),
    ({"never_treated": "never"}, "'never_treated' parameter of Panel"),
    ({"never_treated": True}, "'never_treated' parameter of Panel"),
])
def test_panel_roles_of_the_wrong_kind_are_named(case, name):
    """Before, an unhashable column name reached pandas ("unhashable type: 'list'") and a
    never_treated of another shape numpy's broadcasting error."""
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=4, n_never_treated=4,
                                           n_times=4, seed=0)
    with pytest.raises(DidmemError, match=name):
        didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y", **case)


@pytest.mark.parametrize("path", [None, -1, 2.5, ["r.parquet"]])
def test_results_files_name_a_path_or_kind_of_the_wrong_type(panel, plan, path):
    with pytest.raises(DidmemError, match="'path' parameter of load_result"):
        didmem.load_result(path)
    fitted = _fitted(panel)
    for save in (fitted.save, plan.save):
        with pytest.raises(DidmemError, match="'path' parameter of save"):
            save(path)


@pytest.mark.parametrize("value", [[], {}, ["dynamic"], None])
def test_aggregation_kinds_and_profile_columns_of_the_wrong_type(panel, tmp_path, value):
    """Before, a list reached a dict lookup or pandas ("unhashable type: 'list'")."""
    fitted = _fitted(panel)
    saved = didmem.load_result(fitted.save(tmp_path / "r.parquet"))
    with pytest.raises(DidmemError, match="aggregation"):
        saved.aggregate(value)
    with pytest.raises(DidmemError, match="Unknown column"):
        fitted.profile(value)


def _study_keys():
    data = _study_data()
    keys = [(None, k) for k, v in data.items() if not isinstance(v, dict)]
    keys += [(table, k) for table, v in data.items() if isinstance(v, dict) for k in v]
    return keys + [("estimate", "exposure"), ("report", "notes"), (None, "runner")]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_study_tables_refuse_odd_values_by_key(root, data):
    """An odd value anywhere in a study's tables is accepted or refused by a ConfigError that
    names its key (and the table), never by a foreign exception (issue 40, item 6)."""
    from didmem import ConfigError, Study

    _study(root / "study")  # writes tokens.npy
    table, key = data.draw(st.sampled_from(_study_keys()))
    value = data.draw(st.sampled_from(ODD_VALUES))
    config = _study_data()
    (config if table is None else config[table])[key] = value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            Study.from_dict(config, base_dir=root / "study")
        except ConfigError as exc:
            message = str(exc)
            assert message.startswith("config <dict>") and "\n" not in message
            assert key in message or (table is not None and f"[{table}]" in message), message


@pytest.mark.parametrize("table, key, value, said", [
    ("backend", "device", "tpu9", "'device' parameter of TransformersBackend"),
    ("backend", "batch_size", 0, "'batch_size' parameter of TransformersBackend"),
    ("estimate", "n_bootstrap", -1, "n_bootstrap"),
    ("report", "figures", ["pie"],
     "[report] figures names 'pie' (did you mean 'profile'?), which is not a figure"),
    ("report", "figures", [1], "[report] figures must be a list of strings"),
    (None, "shard_size", 0, "shard_size must be a positive integer"),
])
def test_study_tables_name_what_is_wrong(root, table, key, value, said):
    """The property above on cases whose refusal is certain (so it cannot pass vacuously)."""
    from didmem import ConfigError, Study

    _study(root / "study")
    config = _study_data()
    (config if table is None else config[table])[key] = value
    with pytest.raises(ConfigError) as err:
        Study.from_dict(config, base_dir=root / "study")
    assert said in str(err.value)


# the command line: values that argparse lets through (the right type, an odd value) must end
# in exit status 2 and one line naming the option, or run; never a traceback
ODD_TEXT = ["-1", "0", "nan", "inf", "-inf", "1e400", "", " ", "abc", "0.5", "2", "10000000000",
            "[]", "None", "1,2", ",", "-0", "1e-300"]


@pytest.fixture(scope="module")
def cli_files(panel, root):
    pytest.importorskip("pyarrow")
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=8, n_never_treated=10,
                                           n_times=5, seed=0)
    df.to_csv(root / "panel.csv", index=False)
    with warnings.catch_warnings():  # a band below the pointwise one, by the draws (as R)
        warnings.simplefilter("ignore", didmem.errors.InferenceWarning)
        fitted = didmem.DiDEstimator(base_period="universal", n_bootstrap=99,
                                     seed=0).fit(panel)
        results = fitted.save(root / "results.parquet")  # saving computes every band
    return {"estimate": ["estimate", str(root / "panel.csv"), "--outcome", "y",
                         "--out", str(root / "e.parquet")],
            "plot": ["plot", str(results), "--figure", "profile", "--out", str(root / "p.png")],
            "sensitivity": ["sensitivity", str(results), "--m", "0.1", "--no-figure",
                            "--out", str(root / "s.csv")],
            "report": ["report", str(results), "--out", str(root / "r.html")]}


def _options(command):
    import argparse

    from didmem.cli import build_parser

    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [a.option_strings[-1] for a in sub.choices[command]._actions
            if a.option_strings and a.nargs != 0 and a.dest not in ("help", "out")
            and a.help != argparse.SUPPRESS]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_cli_refuses_odd_option_values_in_one_line(cli_files, data, capsys):
    from didmem.cli import main

    command = data.draw(st.sampled_from(sorted(cli_files)))
    option = data.draw(st.sampled_from(_options(command)))
    text = data.draw(st.sampled_from(ODD_TEXT))
    argv = [*cli_files[command], option, text]
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own refusal of the type: usage and exit 2
            assert exc.code == 2
            return
    err = capsys.readouterr().err
    if code == 0:
        return
    assert code == 2, (argv, err)
    lines = [line for line in err.splitlines() if not line.startswith("didmem: warning:")]
    assert len(lines) == 1 and lines[0].startswith(f"didmem {command}: error: "), (argv, err)
    named = option.lstrip("-")
    assert any(n in lines[0] for n in (option, named, named.replace("-", "_"), text or "''")), \
        (argv, lines[0])


def test_cli_options_are_drawn(cli_files):
    """The CLI property test draws from every value-taking option of its subcommands."""
    assert {"--outcome", "--control", "--n-bootstrap", "--seed"} <= set(_options("estimate"))
    assert {"--m", "--alpha", "--grid-points"} <= set(_options("sensitivity"))
    assert "--dpi" in _options("plot")
    assert {"--truth", "--sensitivity-m", "--labels", "--title"} <= set(_options("report"))


@pytest.mark.parametrize("alpha", [1e-300, 1e-17, 0.0])
def test_a_level_too_small_for_floating_point_is_refused(event_study, alpha):
    """didmem sensitivity --alpha 1e-300 failed inside statistics ("p must be in the range
    0.0 < p < 1.0"): 1 - alpha / 2 rounds to 1. Found by the CLI property above."""
    with pytest.raises(DidmemError, match=r"'alpha' parameter of sensitivity .*\[1e-12, 1\)"):
        didmem.sensitivity(event_study, alpha=alpha)
    assumptions = didmem.Assumptions(n_cohorts=2, n_checkpoints=4)
    with pytest.raises(DidmemError, match="'alpha' parameter of power_analysis"):
        didmem.power_analysis(assumptions, units_per_cohort=10, effect=0.5, alpha=alpha)


@pytest.mark.parametrize("alpha", [1e-300, 1e-17])
@pytest.mark.parametrize("estimator", ["DiDEstimator", "DifferenceEstimator", "TWFEEstimator"])
def test_every_estimator_refuses_a_level_too_small_for_floating_point(panel, estimator, alpha):
    """``DiDEstimator(alpha=1e-300)`` raised a StatisticsError from inside ``statistics``: the
    estimators now declare the same ``Alpha()`` constraint as sensitivity and power_analysis."""
    with pytest.raises(DidmemError, match=rf"'alpha' parameter of {estimator} .*\[1e-12, 1\)"):
        getattr(didmem, estimator)(alpha=alpha).fit(panel)


def test_huge_counts_are_refused_before_memory_is_spent(panel, tmp_path, capsys):
    """Found by the CLI property test in a fresh clone: ``didmem estimate --exposure
    10000000000`` spelled out ten billion cohort column names until the machine ran out of
    memory; ``--n-bootstrap 10000000000`` failed inside numpy. Both are refused at once, in
    one line naming the option (the flag, not its deprecated alias --draws)."""
    from didmem.cli import main

    with warnings.catch_warnings(), pytest.raises(
            DidmemError, match=r"'n_bootstrap' parameter of DiDEstimator must leave room for its "
                               r"draws.*GiB"):
        warnings.simplefilter("ignore", didmem.errors.DidmemWarning)
        didmem.DiDEstimator(n_bootstrap=10**10).fit(panel)
    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=8, n_never_treated=10,
                                           n_times=5, seed=0)
    df.to_csv(tmp_path / "p.csv", index=False)
    for option, said in (("--exposure", "no column 'cohort_2'"), ("--n-bootstrap", "GiB")):
        capsys.readouterr()
        assert main(["estimate", str(tmp_path / "p.csv"), "--outcome", "y", "--out",
                     str(tmp_path / "e.parquet"), option, "10000000000"]) == 2
        lines = [line for line in capsys.readouterr().err.splitlines()
                 if not line.startswith("didmem: warning:")]
        assert len(lines) == 1, lines
        err = lines[0]
        assert err.startswith(f"didmem estimate: error: The option {option}" if option ==
                              "--n-bootstrap" else "didmem estimate: error: --exposure"), err
        assert said in err
