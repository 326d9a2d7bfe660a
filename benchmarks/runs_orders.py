"""Issue 38: reading one PolyPythias seed's GPT-NeoX index maps for ~146M training sequences.

* ``generate DIR``: a Pile-like indexed dataset's ``.idx`` (``--documents`` entries with
  log-normal lengths, about ``--tokens`` tokens; the ``.bin`` is a sparse file of the right
  size, never read) and one run's index maps in GPT-NeoX's layout and names, for Pythia's
  143,000 steps x 1,024 sequences of 2,048 tokens (146,432,000 training sequences), built
  as GPT-NeoX v1.0 builds them (:func:`didmem.orders.neox.write_index_maps`).
* ``read DIR``: what a study does with one seed's order: open the ``.idx`` and the three
  maps (memory-mapped) with every value check, find the exposures of ``--instances``
  instances (half whole documents, half 64-token spans) over the whole order
  (:func:`~didmem.orders.neox.span_exposures`), read the pieces of 1,024 training
  sequences (a batch), and stream every sample's start once
  (:func:`~didmem.orders.neox.sample_starts`' pass). One JSON line per stage and in
  total: wall, CPU, peak memory, machine load.

Example (data under /tmp, never committed)::

    nice -n 15 python benchmarks/runs_orders.py generate /tmp/neox-maps
    nice -n 15 python benchmarks/runs_orders.py read /tmp/neox-maps --out \\
        benchmarks/results/runs_orders.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BATCH, STEPS, SEQ_LENGTH = 1024, 143_000, 2048
SEED = 1234


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _rss() -> dict:
    """Resident memory now, split: anonymous (the process's own arrays) and file-backed (the
    memory-mapped maps and .idx, page cache the kernel may drop), in GiB."""
    out = {}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("RssAnon", "RssFile")):
                name, value = line.split(":")
                out[name.lower().replace("rss", "rss_") + "_gib"] = round(
                    int(value.split()[0]) / 2**20, 2)
    return out


def _write_idx(prefix: Path, sizes: np.ndarray) -> None:
    """The ``.idx`` of an MMapIndexedDataset (uint16 tokens, one document per entry) and a
    sparse ``.bin`` of the size it names."""
    with open(prefix.with_suffix(".idx"), "wb") as out:
        out.write(b"MMIDIDX\x00\x00")
        out.write(struct.pack("<QBQQ", 1, 8, sizes.size, sizes.size + 1))
        out.write(sizes.astype(np.int32).tobytes())
        chunk = 1 << 24
        total = 0
        for lo in range(0, sizes.size, chunk):
            lengths = sizes[lo:lo + chunk].astype(np.int64) * 2
            pointers = np.cumsum(lengths) - lengths + total
            out.write(pointers.tobytes())
            total += int(lengths.sum())
        for lo in range(0, sizes.size + 1, chunk):
            out.write(np.arange(lo, min(lo + chunk, sizes.size + 1), dtype=np.int64).tobytes())
    with open(prefix.with_suffix(".bin"), "wb") as out:
        out.truncate(total)


def generate(folder: str, documents: int, tokens: float, seed: int, steps: int) -> None:
    from didmem.orders.neox import write_index_maps

    start, cpu0 = time.perf_counter(), _cpu()
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    mean = tokens / documents
    sigma = 1.2
    sizes = rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, documents)
    sizes = np.clip(np.rint(sizes), 1, 2**31 - 1).astype(np.int32)
    _write_idx(root / "pile", sizes)
    del rng
    maps = write_index_maps(root / "pile", sizes, BATCH * steps, SEQ_LENGTH, SEED)
    print(json.dumps({"stage": "generate", "documents": documents,
                      "tokens": int(sizes.astype(np.int64).sum()),
                      "samples": maps.n_samples, "doc_positions": int(maps.doc_idx.shape[0]),
                      "wall_s": round(time.perf_counter() - start, 1),
                      "cpu_s": round(_cpu() - cpu0, 1), "peak_gib": round(_peak_gib(), 2)}))


def read(folder: str, n_instances: int, seed: int, out: str | None) -> None:
    from _provenance import provenance

    from didmem.orders import MMapIndexedDataset
    from didmem.orders.neox import (_sample_starts, read_index_maps, sequence_spans,
                                    span_exposures)

    stages, total0, cpu_total = [], time.perf_counter(), _cpu()

    def stage(name, clock, cpu, **extra):
        row = {"stage": name, "wall_s": round(time.perf_counter() - clock, 2),
               "cpu_s": round(_cpu() - cpu, 2), "peak_gib": round(_peak_gib(), 2), **_rss(),
               **extra}
        stages.append(row)
        print(json.dumps(row), flush=True)
        return time.perf_counter(), _cpu()

    clock, cpu = time.perf_counter(), _cpu()
    data = MMapIndexedDataset(Path(folder) / "pile")
    maps = read_index_maps(folder, seed=SEED, n_documents=len(data))
    clock, cpu = stage("open and check the .idx and the three maps", clock, cpu,
                       training_sequences=len(maps), doc_positions=int(maps.doc_idx.shape[0]))
    rng = np.random.default_rng(seed)
    docs = rng.choice(len(data), n_instances, replace=False)
    sizes = np.asarray(data.sizes)
    half = n_instances // 2
    long_enough = sizes[docs[half:]] >= 65
    span_docs = docs[half:][long_enough]
    starts = (rng.random(span_docs.size) * (sizes[span_docs] - 64)).astype(np.int64)
    import pandas as pd

    instances = pd.DataFrame({
        "document": np.concatenate([docs[:half], span_docs]),
        "start": np.concatenate([np.zeros(half, np.int64), starts]),
        "end": np.concatenate([sizes[docs[:half]].astype(np.int64), starts + 64])})
    exposures = span_exposures(maps, sizes, instances, BATCH)
    clock, cpu = stage("exposures of the instances over the whole order", clock, cpu,
                       instances=len(instances), exposures=len(exposures),
                       instances_trained_whole=int(exposures["unit"].nunique()))
    batch = min(70_000, len(maps) // BATCH - 1)
    pieces = sequence_spans(maps, sizes, np.arange(BATCH) + batch * BATCH)
    clock, cpu = stage(f"pieces of the 1,024 sequences of step {batch + 1}", clock, cpu,
                       pieces=len(pieces))
    count = 0
    for _, block in _sample_starts(maps, sizes):
        count += block.size - 1
    clock, cpu = stage("every sample's start in the token stream (one streaming pass)",
                       clock, cpu, samples=count)
    total = {"stage": "total", "wall_s": round(time.perf_counter() - total0, 1),
             "cpu_s": round(_cpu() - cpu_total, 1), "peak_gib": round(_peak_gib(), 2),
             "load_before": LOAD, "load_after": list(os.getloadavg())}
    print(json.dumps(total))
    if out:
        Path(out).write_text(json.dumps({"stages": stages, "total": total,
                                         "provenance": provenance()}, indent=1) + "\n")


LOAD = list(os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("folder")
    gen.add_argument("--documents", type=int, default=134_000_000,
                     help="entries of the indexed dataset (default: about the deduplicated "
                          "Pile's)")
    gen.add_argument("--tokens", type=float, default=207e9,
                     help="tokens of one epoch (default: the deduplicated Pile's 207B, so "
                          "146M sequences of 2,049 tokens take two epochs of doc_idx)")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--steps", type=int, default=STEPS,
                     help="optimisation steps of 1,024 sequences (default: Pythia's 143,000)")
    rd = sub.add_parser("read")
    rd.add_argument("folder")
    rd.add_argument("--instances", type=int, default=10_000)
    rd.add_argument("--seed", type=int, default=0)
    rd.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.command == "generate":
        generate(args.folder, args.documents, args.tokens, args.seed, args.steps)
    else:
        read(args.folder, args.instances, args.seed, args.out)


if __name__ == "__main__":
    main()
