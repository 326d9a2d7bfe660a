"""A study's mistakes are refused when it is read or before anything is scored, with a message
that says where and what to do (issue 40, item 5: unclear messages).

The checkpoints are never loaded: every refusal here comes before any weight is read, so the
backend names directories that need not exist.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from didmem import ConfigError, Study

pytest.importorskip("pyarrow")


def _study(tmp_path, order, *, estimate=(), units=None, tokens=6):
    np.save(tmp_path / "tokens.npy", np.ones((tokens, 12), dtype=np.int64))
    lines = ['metrics = ["mean_token_loglik"]', "[backend]", 'kind = "transformers"',
             'device = "cpu"', 'checkpoints = { 0 = "c0", 2 = "c2", 4 = "c4" }',
             "[instances]", 'file = "tokens.npy"']
    if units is not None:
        np.save(tmp_path / "units.npy", np.asarray(units))
        lines.append('units = "units.npy"')
    order.to_parquet(tmp_path / "order.parquet")
    lines += ["[design]", 'kind = "order"', 'file = "order.parquet"']
    if estimate:
        lines += ["[estimate]", *estimate]
    path = tmp_path / "study.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _order(repeats=False):
    units = list(range(6))
    steps = [1, 2, 3, 4, None, None]
    if repeats:
        units, steps = units + [0, 1], steps + [3, 4]
    return pd.DataFrame({"unit": units, "step": steps})


def test_exposure_2_over_an_order_without_repeats_is_refused_when_read(tmp_path):
    """It was scored whole, then refused at the fit."""
    path = _study(tmp_path, _order(), estimate=["exposure = 2"])
    with pytest.raises(ConfigError) as err:
        Study.from_file(path)
    message = str(err.value)
    assert message.startswith(f"config {path}: [estimate] exposure = 2 needs instances trained "
                              "2 times, but the [design] trains each at most 1 time")
    assert "order.parquet" in message and "several rows of a unit" in message
    assert not (tmp_path / "didmem-study").exists()


def test_exposure_2_over_an_order_with_repeats_is_read(tmp_path):
    study = Study.from_file(_study(tmp_path, _order(repeats=True), estimate=["exposure = 2"]))
    assert study.config.design.max_exposures() == 2
    with pytest.raises(ConfigError, match=r"exposure = 3 needs .* at most 2 times"):
        Study.from_file(_study(tmp_path, _order(repeats=True), estimate=["exposure = 3"]))


def test_unit_ids_of_another_type_than_the_orders_get_a_hint(tmp_path):
    order = _order().assign(unit=lambda t: t["unit"].astype(str))  # "0", "1", ...
    study = Study.from_file(_study(tmp_path, order))
    with pytest.raises(ConfigError) as err:
        study.plan(out=tmp_path / "out")
    message = str(err.value)
    assert "has no row for 6 scored units" in message
    assert message.endswith("Its unit column holds str ids (e.g. '0') and the scored "
                            "instances int ids (e.g. 0): write both with the same type.")
    assert not (tmp_path / "out" / "plan.json").exists()


@pytest.mark.parametrize("where", ["npy", "parquet"])
def test_duplicated_unit_ids_name_their_file(tmp_path, where):
    units = [0, 1, 2, 3, 3, 5]
    if where == "npy":
        path = _study(tmp_path, _order(), units=units)
        named = f"[instances] units {str(tmp_path / 'units.npy')!r}"
    else:
        path = _study(tmp_path, _order())
        pd.DataFrame({"unit": units, "token_ids": [[1, 2, 3]] * 6}).to_parquet(
            tmp_path / "inst.parquet")
        path.write_text(path.read_text().replace('file = "tokens.npy"', 'file = "inst.parquet"'))
        named = f"[instances] file {str(tmp_path / 'inst.parquet')!r} column 'unit'"
    study = Study.from_file(path)
    with pytest.raises(ConfigError) as err:
        study.plan(out=tmp_path / "out")
    message = str(err.value)
    assert message.startswith(f"config {path}: {named} holds duplicate unit ids: 1 ids appear "
                              "more than once, e.g. 3")


def test_random_timing_over_an_order_with_repeats_is_refused_when_read(tmp_path):
    """Random timing takes one exposure per instance: a design that trains an instance twice
    is refused before anything is scored (not fitted on the first exposure silently)."""
    path = _study(tmp_path, _order(repeats=True), estimate=['estimator = "random-timing"'])
    with pytest.raises(ConfigError) as err:
        Study.from_file(path)
    message = str(err.value)
    assert message.startswith(f"config {path}: [estimate] estimator = 'random-timing' takes "
                              "one exposure per instance, but the [design] trains some "
                              "instance 2 times")
    assert "\n" not in message and "estimator = 'did'" in message
    assert not (tmp_path / "didmem-study").exists()
    # without repeats it is read, with random timing's own keys
    study = Study.from_file(_study(tmp_path, _order(), estimate=[
        'estimator = "random-timing"', "n_fisher = 9", "beta = 1.0"]))
    assert study.config.estimate.estimator_for("y").get_params()["n_fisher"] == 9


def test_random_timing_refuses_a_panel_of_several_exposures_at_the_fit(tmp_path):
    """Where the design could not tell the exposures when read, the fit refuses a panel with
    ``cohort_2`` in one line instead of fitting the first exposure alone."""
    study = Study.from_file(_study(tmp_path, _order(), estimate=[
        'estimator = "random-timing"', "n_draws = 0"]))
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"unit": np.repeat(np.arange(6), 3), "time": np.tile([0, 2, 4], 6),
                          "cohort": np.repeat([2.0, 2.0, 4.0, 4.0, np.inf, np.inf], 3),
                          "cohort_2": np.repeat([4.0, np.inf, np.inf, np.inf, np.inf, np.inf],
                                                3),
                          "mean_token_loglik": rng.standard_normal(18)})
    with pytest.raises(ConfigError) as err:
        study._fit(frame, "mean_token_loglik")
    message = str(err.value)
    assert "\n" not in message and "takes one exposure per instance" in message
    assert "2 exposures (columns cohort, cohort_2)" in message
