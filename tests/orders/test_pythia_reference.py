"""didmem's Pythia reader and step rule against Pythia's own batch viewer.

``tests/data/reference/pythia_order/`` holds what EleutherAI/pythia's ``utils/batch_viewer.py``
(a19eecb8) saved for iterations 0, 1 and 2 of a Pythia-shaped order
(``make_pythia_order_reference.py`` beside it; provenance in ``README_pythia_order.md``). The
order's ``.bin`` follows a fixed formula and is written here again, its sha256 checked.
"""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pandas as pd
import pytest

from ..conftest import reference_file

from didmem.orders.indexed import MMapIndexedDataset
from didmem.orders.pythia import PYTHIA_STEPS, training_step, treatment_checkpoint

pytestmark = pytest.mark.reference

ROWS, LENGTH = 2 * 1024 + 100, 2049


def _tokens() -> np.ndarray:
    """As ``make_pythia_order_reference.token``."""
    cell = np.arange(ROWS * LENGTH, dtype=np.uint64).reshape(ROWS, LENGTH)
    return ((cell * np.uint64(2654435761)) % np.uint64(50_277)).astype(np.uint16)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def order(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pythia_order")
    files = pd.read_csv(reference_file("pythia_order/files.csv")).set_index("file")["sha256"]
    (folder / "document.bin").write_bytes(_tokens().astype("<u2").tobytes())
    shutil.copy(reference_file("pythia_order/document.idx"), folder / "document.idx")
    for name in ("document.bin", "document.idx"):
        assert _sha((folder / name).read_bytes()) == files[name], name
    return MMapIndexedDataset(folder / "document")


def test_each_iteration_reads_the_viewers_rows(order):
    viewer = pd.read_csv(reference_file("pythia_order/batches.csv"))
    assert len(order) == ROWS
    step = training_step(np.arange(len(order)))
    for row in viewer.itertuples():
        # the viewer's iteration i is trained at 1-based optimizer step i + 1
        rows = np.flatnonzero(step == row.iteration + 1)
        assert (rows[0], rows.size) == (row.first_row, row.rows)
        batch = np.stack([order[int(r)] for r in rows]).astype("<u2")
        assert _sha(batch.tobytes()) == row.sha256
        assert batch[0, :4].tolist() == [int(t) for t in row.first_tokens.split()]


def test_checkpoint_that_first_holds_each_iteration():
    """Checkpoint ``stepN`` has trained iterations 0 .. N-1 (GPT-NeoX's ``train`` at Pythia's
    branch e15d923d runs ``train_step`` and then ``iteration += 1`` before it saves at
    ``iteration``), so iteration 2 first shows in ``step4`` of Pythia's log-spaced grid."""
    viewer = pd.read_csv(reference_file("pythia_order/batches.csv"))
    cohorts = treatment_checkpoint(viewer["first_row"].to_numpy(), PYTHIA_STEPS)
    assert cohorts.tolist() == [1, 2, 4]
