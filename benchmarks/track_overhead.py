"""What tracking memorisation during training costs (issue 48's overhead target).

Trains the lab model (``LabConfig``'s defaults: GPT-NeoX, hidden 64, 2 layers, 32 tokens,
batches of 16, AdamW) for ``--steps`` steps two ways, in one process, alternating the order
each repeat:

- ``plain``: the training loop alone;
- ``tracked``: the same loop with a :class:`didmem.track.MemorisationTracker` of ``--tracked``
  instances (the first sequences of the order), ``observe`` after every step and ``score``
  at step 0 and every ``--every`` steps (parquet parts written, as in real use).

Inside the tracked run it clocks the tracker's calls (``observe`` and ``score``: the
tracker's whole cost) and, within them, the forward passes it adds (the calls of the shared
forward-pass function ``didmem.backends._loading.model_metrics``). The target: the tracker's
cost is at most its forward passes plus 10% (``tracker / forward <= 1.10``), measured in the
same run so that the machine's load cancels; ``tracked - plain`` against the tracker's cost
says whether training itself slowed down (on a loaded machine the two runs see other loads).

    python benchmarks/track_overhead.py --tracked 2000 --every 20 --steps 160 --repeats 3 \
        --json benchmarks/results/track_overhead.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import provenance  # noqa: E402

VOCAB = 256


def _setup(config, tracked: int, steps: int):
    rng = np.random.default_rng(0)
    order = rng.integers(1, VOCAB, size=(steps * config.batch_size, config.seq_len),
                         dtype=np.int64)
    if tracked > len(order):
        raise SystemExit(f"--tracked {tracked} exceeds the {len(order)} sequences trained")
    return order


def _model(config):
    from didmem.lab.trainer import init_model

    return init_model(config, VOCAB, seed=0)


def _train(config, order, steps, hook=None):
    import torch

    model = _model(config)
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, foreach=False)
    B = config.batch_size
    start = time.perf_counter()
    if hook is not None:
        hook(model, 0, None)
    for step in range(1, steps + 1):
        ids = torch.as_tensor(order[(step - 1) * B:step * B])
        loss = model(input_ids=ids, labels=ids).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if hook is not None:
            hook(model, step, np.arange((step - 1) * B, step * B))
    return time.perf_counter() - start


def plain(config, order, steps, tracked, every):
    return {"total": _train(config, order, steps)}


def tracked_run(config, order, steps, tracked, every):
    import didmem.backends._loading as loading
    from didmem.track import MemorisationTracker

    clocks = {"tracker": 0.0, "forward": 0.0}
    original = loading.model_metrics

    def timed_forward(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            clocks["forward"] += time.perf_counter() - start

    loading.model_metrics = timed_forward
    try:
        with tempfile.TemporaryDirectory() as folder:
            tracker = MemorisationTracker(folder, order[:tracked], batch_size=64,
                                          metrics=("sequence_loglik", "mean_token_loglik",
                                                   "token_accuracy", "mean_token_rank"))

            def hook(model, step, indices):
                start = time.perf_counter()
                if step > 0:
                    tracker.observe(step, indices)
                if step % every == 0:
                    tracker.score(model, step)
                clocks["tracker"] += time.perf_counter() - start

            total = _train(config, order, steps, hook)
    finally:
        loading.model_metrics = original
    return {"total": total, **clocks}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracked", type=int, default=2000)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--steps", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import torch

    from didmem.lab.config import LabConfig

    torch.set_num_threads(args.threads)
    config = LabConfig()
    order = _setup(config, args.tracked, args.steps)
    kinds = {"plain": plain, "tracked": tracked_run}
    rows = []
    for r in range(args.repeats):
        names = list(kinds) if r % 2 == 0 else list(reversed(kinds))
        got = {k: kinds[k](config, order, args.steps, args.tracked, args.every) for k in names}
        row = {"plain": got["plain"]["total"], "tracked": got["tracked"]["total"],
               "tracker": got["tracked"]["tracker"], "forward": got["tracked"]["forward"]}
        row["ratio"] = row["tracker"] / row["forward"]
        row["training_in_tracked_run"] = row["tracked"] - row["tracker"]
        rows.append(row)
        print(f"repeat {r}: plain {row['plain']:.2f} s; tracked {row['tracked']:.2f} s, of "
              f"which the tracker {row['tracker']:.2f} s and its forward passes "
              f"{row['forward']:.2f} s (tracker / forward = {row['ratio']:.3f}); training "
              f"in the tracked run {row['training_in_tracked_run']:.2f} s", flush=True)
    ratio = float(np.median([row["ratio"] for row in rows]))
    print(f"median tracker / forward passes: {ratio:.3f} (target <= 1.10: "
          f"{'met' if ratio <= 1.10 else 'NOT met'})")
    if args.json:
        out = {"provenance": provenance(), "settings": vars(args), "repeats": rows,
               "median_ratio": ratio}
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
