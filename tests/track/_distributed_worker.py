"""A data-parallel training loop with the tracker, for tests/track/test_distributed.py.

``python -m tests.track._distributed_worker OUT WORLD`` trains the tiny GPT-NeoX for three
steps of 8 sequences on WORLD gloo processes (each rank trains and observes its share of
every batch, DistributedDataParallel averages the gradients) and writes the tracker folder
``OUT/track`` and each rank's state ``OUT/rank{r}.json``. With WORLD = 0 it runs the same
loop in this one process, without torch.distributed.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

import numpy as np

N_TRAIN, N_VALID, BATCH, STEPS, EVALUATIONS = 24, 4, 8, 3, (2, 3)


def instances():
    from tests.track.track_helpers import sequences

    tokens = np.concatenate([sequences(N_TRAIN, seed=1), sequences(N_VALID, seed=2)])
    sample_ids = np.concatenate([np.arange(N_TRAIN), np.full(N_VALID, -1)])
    return tokens, sample_ids


def order():
    """The global batches: a fixed shuffle of the training set."""
    perm = np.random.default_rng(0).permutation(N_TRAIN)
    return [perm[i * BATCH:(i + 1) * BATCH] for i in range(STEPS)]


def train(out: Path, rank: int = 0, world: int = 1) -> None:
    import torch

    from didmem.track import MemorisationTracker
    from tests.track.track_helpers import tiny_model

    torch.set_num_threads(1)
    tokens, sample_ids = instances()
    model = tiny_model(seed=3)
    trained = model
    if world > 1:
        trained = torch.nn.parallel.DistributedDataParallel(model)
    tracker = MemorisationTracker(out / "track", tokens, sample_ids=sample_ids,
                                  metrics=("mean_token_loglik", "token_accuracy"),
                                  batch_size=8)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.5)
    tracker.score(trained, 0)
    for step, batch in enumerate(order(), start=1):
        share = batch[rank::world]
        ids = torch.as_tensor(tokens[share])
        loss = trained(input_ids=ids, labels=ids).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        tracker.observe(step, share)
        if step in EVALUATIONS:
            tracker.score(trained, step)
    state = tracker.state_dict()
    (out / f"rank{rank}.json").write_text(json.dumps(state))


def _worker(rank: int, world: int, out: str, port: int) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        train(Path(out), rank, world)
        # Free the DistributedDataParallel wrapper (its reducer holds the process group and
        # sits in reference cycles) and wait for every rank before tearing the group down: a
        # rank that exits while another still holds an open gloo pair can abort that one
        # ("terminate called without an active exception", seen in CI about 1 run in 20).
        gc.collect()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def main(out: str, world: int) -> None:
    if world == 0:
        train(Path(out))
        return
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(world, out, port), nprocs=world, join=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
