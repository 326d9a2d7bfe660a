"""Record, with OLMo's own data code, which instance each optimizer step trains.

Run in a virtual environment with ai2-olmo installed (not didmem's: this script imports only
OLMo, numpy and torch)::

    python3 -m venv /work/venvs/olmo
    /work/venvs/olmo/bin/pip install torch==2.13.0 ai2-olmo "datasets<3" "pyarrow<18" "numpy<2"
    /work/venvs/olmo/bin/python tests/data/reference/make_olmo_order_reference.py \
        tests/data/reference/olmo_order

It writes, into the folder given:

- ``part-0.npy`` ... ``part-2.npy``: raw ``uint16`` token files without a ``.npy`` header
  (written as OLMo's ``scripts/prepare_memmap_dataset.py`` writes them, with ``np.memmap``),
  23 instances of 8 tokens in all, two of the files with a tail shorter than an instance;
- ``instances.csv``: ``instance, tokens`` as OLMo's ``MemMapDataset`` (chunk_size 8) reads
  each instance (tokens space-separated);
- ``<case>/global_indices.npy``: the file OLMo's ``IterableDataset`` writes into
  ``save_folder/train_data`` (``_build_and_save_global_indices``), for each case below;
- ``steps.csv``: ``case, epoch, step, rank, slot, instance``: for every batch that OLMo's
  training loop receives (a ``torch.utils.data.DataLoader`` over OLMo's ``IterableDataset``
  with ``batch_size = device_train_batch_size`` and ``drop_last`` of the data configuration,
  as in ``olmo.data.build_train_dataloader``), the instance index (the ``index`` OLMo attaches
  to each item) of every slot on every rank, and the optimizer step it is trained at
  (``Trainer.fit`` adds 1 to ``global_step`` per batch, across epochs);
- ``cases.csv``: each case's parameters and OLMo's ``total_size`` (the length of its global
  indices) and batches per epoch (``total_size // global_train_batch_size``).

Cases (global batch 4 instances on 2 ranks, 2 per device, seed 6198 as in OLMo's official
configurations):

- ``drop_last``: ``drop_last = True`` (the official configurations), epochs 0 and 1 (OLMo
  reshuffles with ``seed + epoch``); 23 instances: OLMo keeps 22 (a multiple of the world
  size), 5 full batches, and positions 20, 21 are never trained in the epoch.
- ``pad``: ``drop_last = False``: OLMo pads the order to 24 by repeating its first entry, so
  one instance is trained twice in the epoch.

The script also checks that two DataLoader workers per rank give the same batches as none.
"""

from __future__ import annotations

import csv
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from olmo.version import VERSION
from olmo.data.iterable_dataset import IterableDataset
from olmo.data.memmap_dataset import MemMapDataset

SEED = 6198
CHUNK = 8
GLOBAL_BATCH = 4
WORLD = 2
FILE_TOKENS = (7 * CHUNK + 3, 5 * CHUNK, 11 * CHUNK + 5)  # 7 + 5 + 11 = 23 instances


def write_tokens(folder: Path) -> list:
    rng = np.random.default_rng(20261124)
    paths = []
    for i, size in enumerate(FILE_TOKENS):
        path = folder / f"part-{i}.npy"
        mm = np.memmap(path, dtype=np.uint16, mode="w+", shape=(size,))
        mm[:] = rng.integers(0, 50_280, size=size)
        mm.flush()
        del mm
        paths.append(path)
    return paths


def batches(dataset, rank, *, epoch, drop_last, work_dir, num_workers):
    """The batches OLMo's training loader yields on ``rank``: lists of instance indices."""
    iterable = IterableDataset(dataset, GLOBAL_BATCH, seed=SEED, epoch=epoch, shuffle=True,
                               drop_last=drop_last, world_size=WORLD, rank=rank,
                               fs_local_rank=rank, work_dir=work_dir)
    loader = DataLoader(iterable, batch_size=GLOBAL_BATCH // WORLD, drop_last=drop_last,
                        collate_fn=lambda items: [int(x["index"]) for x in items],
                        num_workers=num_workers)
    return iterable, list(loader)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    paths = write_tokens(out)
    dataset = MemMapDataset(*[str(p) for p in paths], chunk_size=CHUNK, memmap_dtype=np.uint16)
    with open(out / "instances.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["instance", "tokens"])
        for i in range(len(dataset)):
            writer.writerow([i, " ".join(str(int(t)) for t in dataset[i]["input_ids"])])
    step_rows, case_rows = [], []
    for case, drop_last, epochs in (("drop_last", True, (0, 1)), ("pad", False, (0,))):
        first_step = 0
        for epoch in epochs:
            work = out / case if epoch == 0 else out / f"{case}_epoch{epoch}"
            per_rank = {}
            twin_dir = tempfile.TemporaryDirectory()
            for rank in range(WORLD):  # rank 0 writes the global indices, rank 1 reads them
                iterable, got = batches(dataset, rank, epoch=epoch, drop_last=drop_last,
                                        work_dir=work, num_workers=0)
                _, twin = batches(dataset, rank, epoch=epoch, drop_last=drop_last,
                                  work_dir=twin_dir.name, num_workers=2)
                assert twin == got, "two DataLoader workers changed the batches"
                # the training loop asserts full device batches (Trainer.fit); a short last
                # batch (drop_last = False) would stop it, so it is not a trained step
                per_rank[rank] = [b for b in got if len(b) == GLOBAL_BATCH // WORLD]
            twin_dir.cleanup()
            n_steps = len(per_rank[0])
            assert all(len(b) == n_steps for b in per_rank.values())
            per_epoch = iterable.total_size // GLOBAL_BATCH
            assert n_steps == per_epoch, (n_steps, per_epoch)
            for k in range(n_steps):
                for rank in range(WORLD):
                    for slot, instance in enumerate(per_rank[rank][k]):
                        step_rows.append([case, epoch, first_step + k + 1, rank, slot, instance])
            case_rows.append([case, epoch, str(Path(work.name) / "global_indices.npy"),
                              drop_last, len(dataset), WORLD, GLOBAL_BATCH, SEED,
                              iterable.total_size, per_epoch, first_step])
            first_step += n_steps
    with open(out / "steps.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["case", "epoch", "step", "rank", "slot", "instance"])
        writer.writerows(step_rows)
    with open(out / "cases.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["case", "epoch", "global_indices", "drop_last", "instances",
                         "world_size", "global_batch_size", "seed", "total_size",
                         "batches_per_epoch", "steps_before"])
        writer.writerows(case_rows)
    print(f"ai2-olmo {VERSION}, "
          f"torch {torch.__version__}, numpy {np.__version__}: wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
