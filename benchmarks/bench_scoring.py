"""Throughput of TransformersBackend against a naive scorer, on Pythia-shaped models.

Builds randomly initialised GPT-NeoX models with the exact shapes of Pythia-160M and
Pythia-1.4B (throughput does not depend on the weights' values, and real weights cannot be
downloaded everywhere), saves each as a safetensors checkpoint, and for sequences of 2,049
tokens measures, in one run and on one device:

- ``backend``: :class:`didmem.backends.TransformersBackend` (bf16 weights on CUDA, SDPA
  attention, metrics from fp32 logits computed in chunks of positions);
- ``naive``: the paper pipeline's approach: the same weights with eager attention, the full
  batch x sequence x vocabulary logits, and an fp32 log-softmax over all of them;

reporting tokens/s (scored tokens, 2,048 per sequence) and model FLOPs utilisation, plus the
relative error of ``mean_token_loglik`` in bf16 against fp32.

Usage (GPU)::

    python benchmarks/bench_scoring.py --shapes 160m 1.4b --n-seqs 256 --batch-size 16

CPU smoke test (tiny shape, seconds)::

    python benchmarks/bench_scoring.py --tiny --device cpu

Cost of the membership-inference metrics (issue 39: ``min_k_logprob``, ``min_k_plus_plus``,
``zlib_ratio``) against today's scoring pass (the five other per-sequence metrics), on one
loaded model, the two metric sets timed alternately (the order flips every round)::

    nice -n 15 python benchmarks/bench_scoring.py --mia --shapes proxy --device cpu \
        --seq-len 257 --n-seqs 8 --batch-size 4 --repeats 5 --json benchmarks/results/x.json

The ``proxy`` shape is small (hidden 256, 4 layers) with Pythia's vocabulary of 50,304, so the
vocabulary-wide work the new metrics add weighs more against the model than in Pythia-160M
or 1.4B: a pessimistic CPU proxy of their cost.

Record GPU results in ``benchmarks/RESULTS.md`` with the machine and date.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from _provenance import provenance

# measure the didmem of the checkout this script belongs to, installed or not
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = {
    # name: (hidden_size, num_hidden_layers, num_attention_heads), as in Pythia's configs
    "160m": (768, 12, 12),
    "1.4b": (2048, 24, 16),
    "tiny": (64, 2, 4),
    "proxy": (256, 4, 4),  # small body, Pythia's vocabulary: the head dominates
}
BASE_METRICS = ("sequence_loglik", "mean_token_loglik", "token_accuracy", "mean_token_rank",
                "entropy")
MIA_METRICS = ("min_k_logprob", "min_k_plus_plus", "zlib_ratio")
PYTHIA_VOCAB = 50304  # embedding rows (the tokenizer has 50,277 tokens)
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0}


def build_config(shape: str, seq_len: int):
    import transformers

    hidden, layers, heads = SHAPES[shape]
    return transformers.GPTNeoXConfig(
        vocab_size=PYTHIA_VOCAB if shape != "tiny" else 512,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=max(2048, seq_len - 1),
        rotary_pct=0.25,
        rotary_emb_base=10000,
        use_parallel_residual=True,
        tie_word_embeddings=False,
        eos_token_id=0,
        bos_token_id=0,
    )


def flops_per_token(config, seq_len: int) -> float:
    """Forward FLOPs per token: 2 x (non-embedding + head parameters) + attention scores."""
    d, layers, ff = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    per_layer = 4 * d * d + 2 * d * ff  # qkv + output projection, two MLP matrices
    head = d * config.vocab_size
    attention = 2 * layers * seq_len * d  # QK^T and AV, averaged over causal positions
    return 2.0 * (layers * per_layer + head) + attention


def peak_flops(device, override):
    import torch

    if override:
        return override * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, tflops in PEAK_BF16_TFLOPS.items():
        if key in name:
            return tflops * 1e12
    return None


def synchronize(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_backend(backend, batches, metrics, device):
    backend.score_batch(0, batches[0], metrics)  # warm-up
    synchronize(device)
    start = time.perf_counter()
    for batch in batches:
        backend.score_batch(0, batch, metrics)
    synchronize(device)
    return time.perf_counter() - start


def naive_scores(model, ids):
    """The paper's approach: full logits, fp32 log-softmax over the whole tensor."""
    import torch

    logits = model(input_ids=ids[:, :-1]).logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    true = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)
    return true.mean(dim=1)


def time_naive(model, batches, device):
    import torch

    tensors = [torch.as_tensor(np.stack(b.token_ids), device=device) for b in batches]
    with torch.inference_mode():
        naive_scores(model, tensors[0])
        synchronize(device)
        start = time.perf_counter()
        for ids in tensors:
            naive_scores(model, ids)
        synchronize(device)
    return time.perf_counter() - start


def load_average() -> list:
    """The 1, 5 and 15 minute load averages (the machine is shared)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def time_head_only(backend, batches, sets, repeats) -> dict:
    """Seconds of the chunked head and metrics alone (the body's hidden states computed once):
    the part of the pass the new metrics add to, so its ratio bounds the whole pass's."""
    import torch

    from didmem.backends._lm_metrics import batch_metrics, compressed_lengths

    model = backend._model
    head = model.get_output_embeddings()
    chunk = max(1, (256 << 20) // (4 * head.weight.shape[0]))
    inputs = []
    with torch.inference_mode():
        for batch in batches:
            ids = torch.as_tensor(np.stack(batch.token_ids))
            inputs.append((model.base_model(input_ids=ids[:, :-1], use_cache=False)[0],
                           ids[:, 1:], torch.as_tensor(batch.lengths - 1), batch.token_ids))
    times = {name: [] for name in sets}
    for round_ in range(repeats):
        for name in (list(sets) if round_ % 2 == 0 else list(sets)[::-1]):
            start = time.perf_counter()
            for hidden, targets, n, token_ids in inputs:
                zlib_bytes = compressed_lengths(token_ids) if "zlib_ratio" in sets[name] else None
                batch_metrics(hidden, targets, n, head, sets[name], chunk_tokens=chunk,
                              zlib_bytes=zlib_bytes)
            times[name].append(time.perf_counter() - start)
    return times


def run_mia(shape, args, device):
    """Seconds of today's metrics and of today's plus the MIA metrics, alternating rounds."""
    import torch
    import transformers

    from didmem.backends import InstanceBatch, TransformersBackend

    config = build_config(shape, args.seq_len)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, min(config.vocab_size, 50277), size=(args.n_seqs, args.seq_len))
    batches = [InstanceBatch(np.arange(s, min(s + args.batch_size, args.n_seqs)),
                             list(tokens[s: s + args.batch_size]))
               for s in range(0, args.n_seqs, args.batch_size)]
    sets = {"today": BASE_METRICS, "today+mia": BASE_METRICS + MIA_METRICS}
    times = {name: [] for name in sets}
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        transformers.GPTNeoXForCausalLM(config).save_pretrained(tmp)
        backend = TransformersBackend({0: tmp}, device=str(device), batch_size=args.batch_size)
        backend.configs()
        backend.open_checkpoint(0)
        load_before = load_average()
        for round_ in range(args.repeats):
            order = list(sets) if round_ % 2 == 0 else list(sets)[::-1]
            for name in order:
                times[name].append(time_backend(backend, batches, sets[name], device))
        head_times = time_head_only(backend, batches, sets, args.repeats)
        backend.close_checkpoint()
    ratios = [b / a for a, b in zip(times["today"], times["today+mia"])]
    return dict(shape=shape, seq_len=args.seq_len, n_seqs=args.n_seqs,
                batch_size=args.batch_size, repeats=args.repeats,
                seconds=times, ratios=ratios, head_only_seconds=head_times,
                head_only_ratios=[b / a for a, b in zip(head_times["today"],
                                                        head_times["today+mia"])], median_ratio=float(np.median(ratios)),
                load_before=load_before, load_after=load_average(),
                torch_threads=torch.get_num_threads())


def run_shape(shape, args, device):
    import torch
    import transformers

    from didmem.backends import InstanceBatch, TransformersBackend

    config = build_config(shape, args.seq_len)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    rng = np.random.default_rng(0)
    vocab = min(config.vocab_size, 50277)
    tokens = rng.integers(0, vocab, size=(args.n_seqs, args.seq_len))
    batches = [
        InstanceBatch(
            np.arange(s, min(s + args.batch_size, args.n_seqs)),
            list(tokens[s : s + args.batch_size]),
        )
        for s in range(0, args.n_seqs, args.batch_size)
    ]
    n_tokens = args.n_seqs * (args.seq_len - 1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        model = transformers.GPTNeoXForCausalLM(config).to(dtype)
        model.save_pretrained(tmp)
        del model
        metrics = (
            "sequence_loglik",
            "mean_token_loglik",
            "token_accuracy",
            "mean_token_rank",
            "entropy",
        )
        backend = TransformersBackend({0: tmp}, device=str(device), batch_size=args.batch_size)
        backend.configs()
        backend.open_checkpoint(0)
        seconds = time_backend(backend, batches, metrics, device)
        rows.append(("backend", seconds))
        reduced = backend.score_batch(0, batches[0], ("mean_token_loglik",))["mean_token_loglik"]
        backend.close_checkpoint()

        fp32 = TransformersBackend(
            {0: tmp}, device=str(device), dtype="float32", batch_size=max(1, args.batch_size // 2)
        )
        fp32.configs()
        fp32.open_checkpoint(0)
        exact = fp32.score_batch(0, batches[0], ("mean_token_loglik",))["mean_token_loglik"]
        fp32.close_checkpoint()
        rel_err = float(np.max(np.abs(reduced / exact - 1)))

        naive = (
            transformers.GPTNeoXForCausalLM.from_pretrained(
                tmp, dtype=dtype, attn_implementation="eager", use_safetensors=True
            )
            .to(device)
            .eval()
        )
        rows.append(("naive", time_naive(naive, batches, device)))
        del naive
    fpt = flops_per_token(config, args.seq_len)
    peak = peak_flops(device, args.peak_tflops)
    out = []
    for name, seconds in rows:
        tps = n_tokens / seconds
        out.append(
            dict(
                shape=shape,
                scorer=name,
                tokens_per_s=tps,
                seconds=seconds,
                mfu=None if peak is None else tps * fpt / peak,
                batch_size=args.batch_size,
                seq_len=args.seq_len,
                n_seqs=args.n_seqs,
                dtype=str(dtype),
                bf16_vs_fp32_rel_err=rel_err,
            )
        )
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["160m", "1.4b"], choices=sorted(SHAPES))
    parser.add_argument("--tiny", action="store_true", help="smoke test: tiny shape, short run")
    parser.add_argument("--device", default=None)
    parser.add_argument("--seq-len", type=int, default=2049)
    parser.add_argument("--n-seqs", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="peak dense bf16 TFLOP/s of the device, for MFU",
    )
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--mia", action="store_true",
                        help="time the membership-inference metrics against today's pass")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of --mia")
    args = parser.parse_args(argv)
    if args.tiny:
        args.shapes, args.seq_len, args.n_seqs, args.batch_size = ["tiny"], 129, 8, 4

    import torch

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
    if args.mia:
        results = [run_mia(shape, args, device) for shape in args.shapes]
        print(f"# bench_scoring --mia on {name or device.type}, torch {torch.__version__}, "
              f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
        print("| shape | today s (median) | today+mia s (median) | ratio median | ratios | "
              "head+metrics only: ratios | load |")
        print("|---|---:|---:|---:|---|---|---|")
        for r in results:
            print(f"| {r['shape']} | {np.median(r['seconds']['today']):.3f} | "
                  f"{np.median(r['seconds']['today+mia']):.3f} | {r['median_ratio']:.3f} | "
                  f"{', '.join(f'{x:.2f}' for x in r['ratios'])} | "
                  f"{', '.join(f'{x:.2f}' for x in r['head_only_ratios'])} | "
                  f"{r['load_before']} -> {r['load_after']} |")
        if args.json:
            with open(args.json, "w") as stream:
                json.dump({"provenance": provenance(), "device": name,
                           "torch": torch.__version__, "mia": results}, stream, indent=1)
        return
    results = [r for shape in args.shapes for r in run_shape(shape, args, device)]
    print(
        f"# bench_scoring on {name or device.type}, torch {torch.__version__}, "
        f"{datetime.now(timezone.utc):%Y-%m-%d}"
    )
    print("| shape | scorer | tokens/s | MFU | speed-up | bf16 vs fp32 rel. err. |")
    print("|---|---|---:|---:|---:|---:|")
    for r in results:
        base = next(x for x in results if x["shape"] == r["shape"] and x["scorer"] == "naive")
        mfu = "n/a" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
        print(
            f"| {r['shape']} | {r['scorer']} | {r['tokens_per_s']:,.0f} | {mfu} | "
            f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}x | {r['bf16_vs_fp32_rel_err']:.2e} |"
        )
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(
                {"provenance": provenance(), "device": name, "torch": torch.__version__,
                 "results": results}, stream, indent=1
            )


if __name__ == "__main__":
    main()
