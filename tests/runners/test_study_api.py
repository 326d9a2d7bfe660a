"""``didmem.Study``: the whole configuration checked when it is read, then run resumably.

The studies are the ones of ``test_study.py``: a tiny GPT-NeoX at three checkpoints (steps 0,
2, 4), a pre-shuffled ``.bin``/``.idx`` dataset of 14 sequences and a validation ``.npy``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

import didmem
from didmem import ConfigError, OutputFileError, Study, StudyRun
from didmem._validation import Integral, constraints_of
from didmem.cli import main
from didmem.study import DESIGNS, Design

from .conftest import METRICS
from .test_study import pythia_design, study_config, three_checkpoints, write_data  # noqa: F401

pytest.importorskip("torch")
pytest.importorskip("pyarrow")

OUTCOME = "mean_token_loglik"


def good_study(tmp_path, checkpoints, *, design=None, estimate=()):
    """A Pythia study with one outcome and 99 bootstrap draws; returns the file's path."""
    write_data(tmp_path, "didmem")
    return study_config(tmp_path, checkpoints, design or pythia_design(), extra=[
        "[estimate]", f'outcomes = ["{OUTCOME}"]', "n_bootstrap = 99", *estimate])


def nothing_scored(out: Path) -> bool:
    return not out.exists() or not any(out.glob("*.parquet"))


@pytest.mark.filterwarnings("ignore::didmem.errors.InferenceWarning")
def test_study_run_gives_the_estimates_that_didmem_run_writes(three_checkpoints, tmp_path,
                                                              capsys):
    config = good_study(tmp_path, three_checkpoints)
    run = Study.from_file(config).run(out=tmp_path / "lib")
    assert isinstance(run, StudyRun) and list(run.results) == [OUTCOME]
    assert run.report_path == tmp_path / "lib" / "report.html" and run.report_path.is_file()
    pd.testing.assert_frame_equal(run.panel, pd.read_parquet(tmp_path / "lib" / "panel.parquet"))

    assert main(["run", "--config", config, "--out", str(tmp_path / "cli")]) == 0
    written = didmem.load_result(tmp_path / "cli" / f"results-{OUTCOME}.parquet")
    mine, theirs = run.results[OUTCOME].to_frame(), written.to_frame()
    assert len(mine) == len(theirs) > 0
    # the same panel, estimator and seed: the same numbers (the file stores float64 as is)
    pd.testing.assert_frame_equal(mine.reset_index(drop=True), theirs.reset_index(drop=True),
                                  check_exact=False, rtol=1e-12, atol=1e-12)
    capsys.readouterr()

    # a second run of the library redoes nothing and reads the saved result back
    again = Study.from_file(config).run(out=tmp_path / "lib", log=print)
    assert capsys.readouterr().out.count("done already") == 3
    np.testing.assert_allclose(again.results[OUTCOME].to_frame()["estimate"],
                               mine["estimate"], rtol=1e-12, atol=1e-12)


def test_a_typo_in_estimate_outcomes_is_refused_before_scoring(three_checkpoints, tmp_path,
                                                               capsys):
    write_data(tmp_path, "didmem")
    config = study_config(tmp_path, three_checkpoints, pythia_design(), extra=[
        "[estimate]", 'outcomes = ["mean_token_lgolik"]'])
    with pytest.raises(ConfigError) as info:
        Study.from_file(config)
    message = str(info.value)
    assert message.startswith(f"config {config}: [estimate] outcomes names 'mean_token_lgolik'")
    assert "did you mean 'mean_token_loglik'?" in message
    out = tmp_path / "out"
    assert main(["run", "--config", config, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "outcomes names 'mean_token_lgolik'" in err
    assert nothing_scored(out)  # no score file, no part, no sample


@pytest.mark.parametrize("extra, message", [
    (['lower_is_better = ["token_acuracy"]'],
     "[estimate] lower_is_better names 'token_acuracy' (did you mean 'token_accuracy'?), "
     "which is not scored"),
    (['covariates = ["lenght"]'],
     "[estimate] covariates names 'lenght' (did you mean 'length'?); the study's covariates "
     "are length, mean_log_unigram_freq"),
    (["n_boostrap = 9"], "[estimate] unknown key 'n_boostrap' (did you mean 'n_bootstrap'?)"),
    (['balance = "sometimes"'], "[estimate] balance must be "
     + constraints_of(didmem.Panel)["balance"].description + "; got 'sometimes'"),
])
def test_estimate_keys_are_checked_against_metrics_and_declarations(three_checkpoints, tmp_path,
                                                                    extra, message):
    write_data(tmp_path, "didmem")
    config = study_config(tmp_path, three_checkpoints, pythia_design(),
                          extra=["[estimate]", *extra])
    with pytest.raises(ConfigError) as info:
        Study.from_file(config)
    assert str(info.value).startswith(f"config {config}: ") and message in str(info.value)


def test_balance_takes_the_panels_own_choices(three_checkpoints, tmp_path):
    write_data(tmp_path, "didmem")
    for choice in constraints_of(didmem.Panel)["balance"].values:
        config = study_config(tmp_path, three_checkpoints, pythia_design(),
                              extra=["[estimate]", f'balance = "{choice}"'])
        assert Study.from_file(config).config.estimate.balance == choice


@pytest.mark.parametrize("design, message", [
    (pythia_design(cohorts="[2, 2]"), "[design] cohorts lists 2 more than once"),
    (pythia_design(n_validation=9), "[design] n_validation = 9 needs as many validation"),
    (pythia_design(n_validation=0),
     "[design] n_validation = 0 leaves no never-treated instance, which [estimate] "
     "control_group = 'never_treated' needs"),
    (pythia_design(cohort_rule='"papr"'), "got 'papr' (did you mean 'paper'?)"),
    (pythia_design(sead=3), "[design] unknown key 'sead' for kind = 'pythia' (did you mean "
                            "'seed'?)"),
    (['kind = "pythai"'], "[design] kind must be one of pythia, order, olmo, hubble, runs; got 'pythai' (did you "
                          "mean 'pythia'?)"),
])
def test_design_mistakes_are_found_when_the_study_is_read(three_checkpoints, tmp_path, design,
                                                          message):
    write_data(tmp_path, "didmem")
    config = study_config(tmp_path, three_checkpoints, design)
    with pytest.raises(ConfigError) as info:
        Study.from_file(config)
    assert str(info.value).startswith(f"config {config}: ") and message in str(info.value)
    assert nothing_scored(tmp_path / "didmem-study")


def test_an_order_table_with_both_step_and_index_says_only_one_of(three_checkpoints, instances,
                                                                   tmp_path):
    tokens, ids = instances
    np.save(tmp_path / "tokens.npy", tokens)
    np.save(tmp_path / "units.npy", np.array(ids))
    pd.DataFrame({"unit": ids, "step": 1, "index": 0}).to_parquet(tmp_path / "order.parquet")
    config = study_config(tmp_path, three_checkpoints,
                          ['kind = "order"', 'file = "order.parquet"', "batch_size = 3"],
                          extra=["[instances]", 'file = "tokens.npy"', 'units = "units.npy"'])
    with pytest.raises(ConfigError) as info:
        Study.from_file(config)
    message = str(info.value)
    assert message.startswith(f"config {config}: [design] file ")
    assert "has both a 'step' and an 'index' column; it needs only one of them" in message


def test_from_dict_reads_paths_from_base_dir_and_names_the_key(three_checkpoints, tmp_path):
    config = Path(good_study(tmp_path, three_checkpoints))
    import tomllib

    data = tomllib.loads(config.read_text())
    study = Study.from_dict(data, base_dir=tmp_path)
    assert study.outcomes == (OUTCOME,) and study.config.design.data == tmp_path / "pile" / \
        "document"
    data["metric"] = ["sequence_loglik"]
    with pytest.raises(ConfigError, match=r"^config <dict>: unknown key 'metric' \(did you "
                                          r"mean 'metrics'\?\)"):
        Study.from_dict(data, base_dir=tmp_path)
    del data["metric"]
    with pytest.raises(ConfigError, match=r"\[design\] data: MMapIndexedDataset"):
        Study.from_dict(data, base_dir=tmp_path / "elsewhere")


def test_a_study_without_a_design_scores_but_does_not_run(two_checkpoints, instances, tmp_path):
    from .test_score_cli import write_config

    study = Study.from_file(write_config(tmp_path, two_checkpoints, instances))
    with pytest.raises(ConfigError, match=r"running a study needs a \[design\] table"):
        study.run(out=tmp_path / "o")
    assert nothing_scored(tmp_path / "o")
    from didmem.runners import LocalRunner

    # a runner is used as given (here: one shard per checkpoint, not the file's shard_size),
    # writing its parts to the study's directory
    runner = LocalRunner(progress=False)
    frame = study.score(out=tmp_path / "o", runner=runner)
    assert runner.out_dir is None and len(list((tmp_path / "o").glob("part-*.parquet"))) == 2
    assert list(frame.columns) == ["unit", "time", *METRICS]
    with pytest.raises(ConfigError, match="give the runner out_dir=None"):
        study.score(out=tmp_path / "o", runner=LocalRunner(tmp_path / "elsewhere"))
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "o" / "scores.parquet"), frame)


def test_a_truncated_part_file_names_the_file_to_delete(two_checkpoints, instances, tmp_path,
                                                         capsys):
    from .test_score_cli import write_config

    config = write_config(tmp_path, two_checkpoints, instances)
    out = tmp_path / "o"
    assert main(["score", "--config", config, "--out", str(out)]) == 0
    part = sorted(out.glob("part-*.parquet"))[1]
    part.write_bytes(part.read_bytes()[:50])
    capsys.readouterr()
    assert main(["score", "--config", config, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(part) in err and "Delete it and run again" in err, err
    part.unlink()  # as the message says: the re-run scores that item again
    assert main(["score", "--config", config, "--out", str(out)]) == 0


@pytest.mark.filterwarnings("ignore::didmem.errors.InferenceWarning")
def test_a_truncated_panel_names_the_file_to_delete(three_checkpoints, tmp_path):
    config = good_study(tmp_path, three_checkpoints)
    out = tmp_path / "o"
    Study.from_file(config).run(out=out)
    panel = out / "panel.parquet"
    panel.write_bytes(panel.read_bytes()[:100])
    with pytest.raises(OutputFileError) as info:
        Study.from_file(config).run(out=out)
    assert str(panel) in str(info.value) and "Delete it and run again" in str(info.value)


def test_ctrl_c_during_didmem_run_is_one_line_and_exit_130(three_checkpoints, tmp_path, capsys,
                                                           monkeypatch):
    from didmem.runners import _base

    def interrupt(self, pending, sink):
        raise KeyboardInterrupt

    monkeypatch.setattr(_base._LocalSession, "execute", interrupt)
    config = good_study(tmp_path, three_checkpoints)
    assert main(["run", "--config", config, "--out", str(tmp_path / "o")]) == 130
    err = capsys.readouterr().err
    assert err == ("didmem run: interrupted; run the same command again to resume (finished "
                   "work is kept).\n")


def test_a_design_kind_is_one_class_and_one_registry_line(three_checkpoints, instances,
                                                         tmp_path, monkeypatch):
    """What the suites' readers do: a kind whose keys come from its fields."""
    @dataclass(frozen=True)
    class EveryUnitAtStep(Design):
        """Every instance trained at one step.

        Parameters
        ----------
        where : str
            Where the table is.
        step : int
            The step.
        """

        step: int = 1
        kind: ClassVar[str] = "constant"
        _constraints: ClassVar[dict] = {"step": Integral(1)}

        def instances(self, config, checkpoints, out):
            return config.load_instances()

        def cohorts_of(self, units, checkpoints):
            from didmem.cohorts import cohort_from_step

            return cohort_from_step(np.full(len(units), float(self.step)), checkpoints)

    monkeypatch.setitem(DESIGNS, "constant", EveryUnitAtStep)
    tokens, ids = instances
    np.save(tmp_path / "tokens.npy", tokens)
    config = study_config(tmp_path, three_checkpoints, ['kind = "constant"', "step = 3"],
                          extra=["[instances]", 'file = "tokens.npy"'])
    design = Study.from_file(config).config.design
    assert isinstance(design, EveryUnitAtStep) and design.step == 3
    assert list(design.cohorts_of([0, 1], (0, 2, 4))) == [4.0, 4.0]
    bad = study_config(tmp_path, three_checkpoints, ['kind = "constant"', "step = 0"],
                       extra=["[instances]", 'file = "tokens.npy"'])
    with pytest.raises(ConfigError, match=r"\[design\] step must be an integer in \[1, inf\]"):
        Study.from_file(bad)


def test_a_study_estimates_with_random_timing_saves_reads_back_and_reports(
        three_checkpoints, tmp_path):
    """[estimate] estimator = "random-timing": the study's fit is RandomTimingEstimator's on
    the study's panel (with the study's seed), saved as its own result kind, read back equal
    on a second run, and reported with its Fisher test."""
    from didmem.results.random_timing import RandomTimingResult

    write_data(tmp_path, "didmem")
    config = study_config(tmp_path, three_checkpoints, pythia_design(), extra=[
        "[estimate]", f'outcomes = ["{OUTCOME}"]', 'estimator = "random-timing"',
        "n_fisher = 19", "n_draws = 99"])
    run = Study.from_file(config).run(out=tmp_path / "lib")
    result = run.results[OUTCOME]
    assert isinstance(result, RandomTimingResult) and result.tables.n_fisher == 19
    panel = didmem.Panel(run.panel, unit="unit", time="time", cohort="cohort", outcome=OUTCOME)
    direct = didmem.RandomTimingEstimator(n_fisher=19, n_draws=99, seed=0).fit(panel)
    pd.testing.assert_frame_equal(result.to_frame(), direct.to_frame(), check_exact=False,
                                  rtol=1e-12, atol=1e-12)
    assert np.isfinite(result.to_frame()["fisher_pvalue"]).all()
    page = run.report_path.read_text()
    assert "RandomTimingEstimator" in page and "Fisher randomisation test (19 permutations" in page
    lines = []
    again = Study.from_file(config).run(out=tmp_path / "lib", log=lines.append)
    assert sum("done already" in line for line in lines) == 3
    loaded = again.results[OUTCOME]
    assert isinstance(loaded, RandomTimingResult)
    pd.testing.assert_frame_equal(loaded.to_frame(), result.to_frame(), check_exact=True)
    for name in ("group", "calendar", "dynamic"):
        pd.testing.assert_frame_equal(loaded.aggregate(name).to_frame(),
                                      result.aggregate(name).to_frame(), check_exact=True)
