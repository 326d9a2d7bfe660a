"""What tracking memorisation during training costs (issue 48's overhead target).

Trains the lab model (``LabConfig``'s defaults: GPT-NeoX, hidden 64, 2 layers, 32 tokens,
batches of 16, AdamW) for ``--steps`` steps three ways, in one process, alternating the order
each repeat:

- ``plain``: the training loop alone;
- ``tracked``: the same loop with a :class:`didmem.track.MemorisationTracker` of ``--tracked``
  instances (the first sequences of the order), ``observe`` after every step and ``score``
  at step 0 and every ``--every`` steps (parquet parts written, as in real use);
- ``forward``: only the forward passes the tracker adds: the same instances, batch size and
  metrics through ``didmem.backends._loading.model_metrics`` at the same evaluation count,
  on the same model, nothing written.

The target: ``tracked - plain <= 1.10 * forward`` (the tracker costs at most the forward
passes it adds plus 10%). Reports each repeat and the median ratio.

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
    return _train(config, order, steps)


def tracked_run(config, order, steps, tracked, every):
    from didmem.track import MemorisationTracker

    with tempfile.TemporaryDirectory() as folder:
        tracker = MemorisationTracker(folder, order[:tracked], batch_size=64,
                                      metrics=("sequence_loglik", "mean_token_loglik",
                                               "token_accuracy", "mean_token_rank"))
        def hook(model, step, indices):
            if step == 0:
                tracker.score(model, 0)
                return
            tracker.observe(step, indices)
            if step % every == 0:
                tracker.score(model, step)

        return _train(config, order, steps, hook)


def forward_only(config, order, steps, tracked, every):
    import torch

    from didmem.backends._instances import Instances
    from didmem.backends._loading import model_metrics

    model = _model(config).eval()
    instances = Instances(order[:tracked])
    metrics = ("sequence_loglik", "mean_token_loglik", "token_accuracy", "mean_token_rank")
    n_evaluations = 1 + steps // every
    start = time.perf_counter()
    for _ in range(n_evaluations):
        with torch.no_grad():
            for lo in range(0, tracked, 64):
                model_metrics(model, instances.batch(lo, min(lo + 64, tracked)), metrics,
                              device=torch.device("cpu"), eos_token_ids=(),
                              prefix_length=32, suffix_length=32)
    return time.perf_counter() - start


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
    kinds = {"plain": plain, "tracked": tracked_run, "forward": forward_only}
    rows = []
    for r in range(args.repeats):
        names = list(kinds) if r % 2 == 0 else list(reversed(kinds))
        times = {k: kinds[k](config, order, args.steps, args.tracked, args.every)
                 for k in names}
        times["overhead"] = times["tracked"] - times["plain"]
        times["ratio"] = times["overhead"] / times["forward"]
        rows.append(times)
        print(f"repeat {r}: plain {times['plain']:.2f} s, tracked {times['tracked']:.2f} s, "
              f"forward passes alone {times['forward']:.2f} s: overhead / forward = "
              f"{times['ratio']:.3f}", flush=True)
    ratio = float(np.median([row["ratio"] for row in rows]))
    print(f"median overhead / forward passes: {ratio:.3f} (target <= 1.10: "
          f"{'met' if ratio <= 1.10 else 'NOT met'})")
    if args.json:
        out = {"provenance": provenance(), "settings": vars(args), "repeats": rows,
               "median_ratio": ratio}
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
