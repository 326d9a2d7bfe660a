"""Cost of the membership-inference metrics in TransformersBackend's scoring pass (issue 39).

Usage (CPU proxy, the machine's load recorded with each run)::

    nice -n 15 python benchmarks/mia_scoring.py --device cpu --seq-len 257 --n-seqs 8 \
        --batch-size 4 --repeats 5 --json benchmarks/results/mia_scoring_cpu_run1.json

On one loaded model (shape ``proxy`` of ``bench_scoring.py``: GPT-NeoX with hidden 256, 4
layers and Pythia's vocabulary of 50,304, so that the vocabulary-wide work weighs more than
in Pythia-160M: pessimistic) four metric sets are timed over the same batches, their order
rotated every round:

- ``today``: ``sequence_loglik``, ``mean_token_loglik``, ``token_accuracy``,
  ``mean_token_rank``, ``entropy``;
- ``+mia``: today's plus ``min_k_logprob``, ``min_k_plus_plus``, ``zlib_ratio``;
- ``+mia+ref first``: plus ``reference_ratio`` against a smaller model of the same
  vocabulary (hidden 64, 2 layers), its kept values cleared before each
  timing: the cost at the first checkpoint, where the reference runs;
- ``+mia+ref later``: the same with the reference's values kept: the cost at every later
  checkpoint (one reference for every checkpoint runs once per instance).

The ratios to ``today`` are per round, of wall time and of the process's CPU time (both
torch threads; less moved by other processes on a shared machine than the wall time); the
issue's target is ``+mia / today <= 1.3``.
Run the script several times (fresh processes) and report each with its load.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _provenance import provenance
from bench_scoring import (BASE_METRICS, MIA_METRICS, build_config, load_average,
                           time_backend)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SETS = {
    "today": BASE_METRICS,
    "+mia": BASE_METRICS + MIA_METRICS,
    "+mia+ref first": BASE_METRICS + MIA_METRICS + ("reference_ratio",),
    "+mia+ref later": BASE_METRICS + MIA_METRICS + ("reference_ratio",),
}


def measure(args) -> dict:
    import torch
    import transformers

    from didmem.backends import InstanceBatch, TransformersBackend

    device = torch.device(args.device)
    config = build_config("proxy", args.seq_len)
    ref_config = build_config("proxy", args.seq_len)  # Pythia's vocabulary, a smaller body
    ref_config.update({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                       "intermediate_size": 256})
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 50277, size=(args.n_seqs, args.seq_len))
    batches = [InstanceBatch(np.arange(s, min(s + args.batch_size, args.n_seqs)),
                             list(tokens[s: s + args.batch_size]))
               for s in range(0, args.n_seqs, args.batch_size)]
    times = {name: [] for name in SETS}
    cpu = {name: [] for name in SETS}
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        transformers.GPTNeoXForCausalLM(config).save_pretrained(Path(tmp) / "model")
        transformers.GPTNeoXForCausalLM(ref_config).save_pretrained(Path(tmp) / "ref")
        backend = TransformersBackend({0: Path(tmp) / "model"}, device=args.device,
                                      batch_size=args.batch_size, reference=Path(tmp) / "ref")
        backend.configs()
        backend.open_checkpoint(0)
        backend.score_batch(0, batches[0], SETS["+mia+ref first"])  # loads the reference
        load_before = load_average()
        names = list(SETS)
        for round_ in range(args.repeats):
            order = names[round_ % len(names):] + names[: round_ % len(names)]
            for name in order:
                if name == "+mia+ref first":
                    backend._reference_cache.clear()
                elif name == "+mia+ref later":  # every instance's reference value kept
                    for batch in batches:
                        backend.score_batch(0, batch, ("reference_ratio",))
                start = time.process_time()
                times[name].append(time_backend(backend, batches, SETS[name], device))
                cpu[name].append(time.process_time() - start)  # both torch threads
        backend.close_checkpoint()
    ratios = {name: [b / a for a, b in zip(times["today"], times[name])]
              for name in names[1:]}
    cpu_ratios = {name: [b / a for a, b in zip(cpu["today"], cpu[name])]
                  for name in names[1:]}
    return {"shape": "proxy", "reference_shape": "hidden 64, 2 layers, vocabulary 50,304", "seq_len": args.seq_len,
            "n_seqs": args.n_seqs, "batch_size": args.batch_size, "repeats": args.repeats,
            "seconds": times, "ratios": ratios,
            "median_ratios": {k: float(np.median(v)) for k, v in ratios.items()},
            "cpu_seconds": cpu, "cpu_ratios": cpu_ratios,
            "median_cpu_ratios": {k: float(np.median(v)) for k, v in cpu_ratios.items()},
            "load_before": load_before, "load_after": load_average(),
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seq-len", type=int, default=257)
    parser.add_argument("--n-seqs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = measure(args)
    print(f"load before {result['load_before']}, after {result['load_after']}, "
          f"{result['torch_threads']} torch threads")
    print("| set | median wall s | wall ratio to today, per round | median | "
          "CPU ratio, per round | median |")
    print("|---|---:|---|---:|---|---:|")
    for name, secs in result["seconds"].items():
        ratios, cpu = result["ratios"].get(name), result["cpu_ratios"].get(name)
        print(f"| {name} | {np.median(secs):.3f} | "
              + (", ".join(f"{r:.2f}" for r in ratios) if ratios else "—") + " | "
              + (f"{result['median_ratios'][name]:.2f}" if ratios else "1") + " | "
              + (", ".join(f"{r:.2f}" for r in cpu) if cpu else "—") + " | "
              + (f"{result['median_cpu_ratios'][name]:.2f}" if cpu else "1") + " |")
    if args.json is not None:
        args.json.write_text(json.dumps({"provenance": provenance(), **result}, indent=1))


if __name__ == "__main__":
    main()
