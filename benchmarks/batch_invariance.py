"""How much do TransformersBackend scores move when the work is cut differently?

The same instances are scored with several batch sizes, shard sizes and CPU thread counts,
in float32 and bfloat16, on a random GPT-NeoX model built here (no download). Each setting is
compared with the reference setting (``--ref-batch`` sequences per batch, every thread, one
shard) of the same dtype, and every dtype with a float64 run, the nearest thing to exact
arithmetic. The figures back the guarantee written in docs/ray.rst and in the
TransformersBackend docstring: bitwise equality for identical batch shapes in the same kind
of process, and a tolerance otherwise.

Usage::

    python benchmarks/batch_invariance.py [--n 24] [--length 128] [--hidden 256] [--layers 4]

Nothing is random across runs: the model and the token ids come from fixed seeds.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers

from didmem.backends import TransformersBackend

METRICS = ["sequence_loglik", "mean_token_loglik", "token_accuracy", "mean_token_rank"]


def build_model(root: Path, args) -> dict:
    config = transformers.GPTNeoXConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, intermediate_size=4 * args.hidden,
        max_position_embeddings=args.length, initializer_range=args.init,
        eos_token_id=0, bos_token_id=0,
    )
    torch.manual_seed(0)
    model = transformers.GPTNeoXForCausalLM(config)
    model.save_pretrained(root / "step0")
    return {0: root / "step0"}


def score(paths, tokens, *, dtype, batch_size, shard_size, threads):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        backend = TransformersBackend(paths, device="cpu", dtype=dtype, batch_size=batch_size)
        return backend.score(tokens, metrics=METRICS, shard_size=shard_size, progress=False)
    finally:
        torch.set_num_threads(old)


def compare(frame, ref) -> dict:
    seq, rseq = frame["sequence_loglik"].to_numpy(), ref["sequence_loglik"].to_numpy()
    mean, rmean = frame["mean_token_loglik"].to_numpy(), ref["mean_token_loglik"].to_numpy()
    acc, racc = frame["token_accuracy"].to_numpy(), ref["token_accuracy"].to_numpy()
    return {
        "identical": bool(frame.equals(ref)),
        "seq_rel": float(np.max(np.abs(seq - rseq) / np.abs(rseq))),
        "mean_abs": float(np.max(np.abs(mean - rmean))),
        "acc_changed": int(np.sum(acc != racc)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=24, help="sequences")
    p.add_argument("--length", type=int, default=128, help="tokens per sequence")
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--init", type=float, default=0.1, help="initializer_range of the weights")
    p.add_argument("--ref-batch", type=int, default=8)
    args = p.parse_args()

    rng = np.random.default_rng(0)
    # unequal lengths, so that batches also differ in padding
    lengths = rng.integers(args.length // 2, args.length + 1, size=args.n)
    tokens = [rng.integers(1, args.vocab, size=k) for k in lengths]
    n_threads = torch.get_num_threads()
    settings = [(args.ref_batch, None, n_threads)]
    settings += [(b, None, n_threads) for b in (1, 3, args.n) if b != args.ref_batch]
    settings += [(args.ref_batch, 5, n_threads), (args.ref_batch, None, 1)]
    settings = list(dict.fromkeys(settings))

    print(f"# batch invariance of TransformersBackend scores, {datetime.date.today()}")
    print(f"machine: {platform.processor() or platform.machine()}, {n_threads} torch threads, "
          f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"CPU capability {torch.backends.cpu.get_cpu_capability()}")
    print(f"model: random GPT-NeoX, hidden {args.hidden}, {args.layers} layers, vocab "
          f"{args.vocab}, init {args.init}; {args.n} sequences of {lengths.min()}-"
          f"{lengths.max()} tokens")
    with tempfile.TemporaryDirectory() as tmp:
        paths = build_model(Path(tmp), args)
        exact = score(paths, tokens, dtype="float64", batch_size=args.ref_batch,
                      shard_size=None, threads=n_threads)
        print("\n| dtype | batch | shard | threads | bitwise equal to reference | "
              "max rel. diff sequence_loglik | max abs. diff mean_token_loglik | "
              "token_accuracy changed |")
        print("|---|---:|---:|---:|---|---:|---:|---:|")
        for dtype in ("float32", "bfloat16"):
            ref = score(paths, tokens, dtype=dtype, batch_size=args.ref_batch, shard_size=None,
                        threads=n_threads)
            rows = [("float64 run", compare(ref, exact))]
            for b, s, t in settings:
                frame = score(paths, tokens, dtype=dtype, batch_size=b, shard_size=s, threads=t)
                rows.append(((b, s, t), compare(frame, ref)))
            for key, c in rows:
                b, s, t = ("vs", "float64", "") if isinstance(key, str) else key
                print(f"| {dtype} | {b} | {s or 'all'} | {t} | {c['identical']} | "
                      f"{c['seq_rel']:.1e} | {c['mean_abs']:.1e} | {c['acc_changed']} |")


if __name__ == "__main__":
    main()
