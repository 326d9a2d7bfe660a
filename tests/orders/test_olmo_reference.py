"""didmem's OLMo reader against OLMo's own data code (ai2-olmo 0.6.0).

``tests/data/reference/olmo_order/`` holds token files, the global indices OLMo's
``IterableDataset`` wrote for them and the instance OLMo's training loader hands each rank at
each step (``make_olmo_order_reference.py`` beside it; provenance in ``README_olmo_order.md``).
Nothing of OLMo is needed here: the test reads the committed files with didmem only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ..conftest import reference_file

from didmem.orders.exposures import exposure_cohorts
from didmem.orders.olmo import (OlmoTokens, olmo_exposures, parse_olmo_checkpoint,
                                  read_global_indices, trained_positions)

pytestmark = pytest.mark.reference

FOLDER = "olmo_order"


def _cases():
    return pd.read_csv(reference_file(f"{FOLDER}/cases.csv"))


def _steps():
    return pd.read_csv(reference_file(f"{FOLDER}/steps.csv"))


def test_instances_are_olmos_memmap_chunks():
    expected = pd.read_csv(reference_file(f"{FOLDER}/instances.csv"))
    paths = [reference_file(f"{FOLDER}/part-{i}.npy") for i in range(3)]
    data = OlmoTokens(paths, sequence_length=8, dtype="uint16")
    assert len(data) == len(expected) == 23  # the files' tails are dropped, as OLMo does
    for instance, tokens in zip(expected["instance"], expected["tokens"]):
        np.testing.assert_array_equal(data[instance], [int(t) for t in tokens.split()])


@pytest.mark.parametrize("case, epoch", [("drop_last", 0), ("drop_last", 1), ("pad", 0)])
def test_each_step_trains_olmos_instances(case, epoch):
    spec = _cases().set_index(["case", "epoch"]).loc[(case, epoch)]
    batch = int(spec["global_batch_size"])
    order = read_global_indices(reference_file(f"{FOLDER}/{spec['global_indices']}"), batch)
    assert len(order) == spec["total_size"]
    assert trained_positions(len(order), batch) // batch == spec["batches_per_epoch"]
    found = olmo_exposures(order, np.arange(int(spec["instances"])), batch,
                           n_instances=int(spec["instances"]),
                           first_step=int(spec["steps_before"]))
    olmo = _steps()
    olmo = olmo[(olmo["case"] == case) & (olmo["epoch"] == epoch)]
    # the same instances at the same steps, as many times (OLMo's padding repeats some)
    mine = sorted(zip(found["step"], found["unit"]))
    theirs = sorted(zip(olmo["step"], olmo["instance"]))
    assert mine == theirs


def test_the_short_batch_is_never_trained():
    spec = _cases().set_index(["case", "epoch"]).loc[("drop_last", 0)]
    order = np.asarray(read_global_indices(reference_file(f"{FOLDER}/drop_last/global_indices.npy"),
                                           4))
    assert len(order) % 4 == 2  # 22 positions: OLMo keeps a multiple of the world size only
    tail = set(order[20:].tolist()) - set(order[:20].tolist())
    trained = set(_steps().query("case == 'drop_last' and epoch == 0")["instance"])
    assert tail and not tail & trained
    assert olmo_exposures(order, sorted(tail), 4)["unit"].empty
    assert spec["total_size"] == 22


def test_two_epochs_in_one_design_count_steps_on():
    """OLMo's trainer counts global steps across epochs; so does the design's list of files."""
    from didmem.study.designs.olmo import OlmoDesign

    base = reference_file(f"{FOLDER}/cases.csv").parent
    design = OlmoDesign.from_table(
        {"kind": "olmo", "global_indices": ["drop_last/global_indices.npy",
                                            "drop_last_epoch1/global_indices.npy"],
         "batch_size": 4}, "test [design]", base)
    found = design.exposures(np.arange(23), checkpoints=[5, 10])
    olmo = _steps().query("case == 'drop_last'")
    assert sorted(zip(found["step"], found["unit"])) == sorted(zip(olmo["step"], olmo["instance"]))
    table = exposure_cohorts(found, np.arange(23), [2, 5, 7, 10])
    first = olmo.groupby("instance")["step"].min()
    grid = np.array([2, 5, 7, 10])
    for unit, step in first.items():
        assert table.set_index("unit").loc[unit, "cohort"] == grid[np.searchsorted(grid, step)]


def test_checkpoint_directories_of_olmos_trainer():
    """OLMo saves ``f"step{global_step}{suffix}"``; its published lists give those URLs."""
    assert parse_olmo_checkpoint("step1000-unsharded").step == 1000
    assert parse_olmo_checkpoint("step5").step == 5
    url = "https://olmo-checkpoints.org/ai2-llm/olmo-medium/wvc30anm/step5000-unsharded/"
    parsed = parse_olmo_checkpoint(url)
    assert (parsed.step, parsed.stage, parsed.tokens_billions) == (5000, 1, None)
