"""How long the search for repeated sequences takes (didmem.orders.pythia_repeats).

Writes a Pythia-shaped data order (rows of 2,049 uint16 tokens in the .bin/.idx format),
plants copies of some sampled rows at random later positions, and times
:func:`~didmem.orders.find_repeats` over the whole file (hashing every row,
then checking hash matches token by token); it checks that every planted copy is found and
nothing else. The rate (rows and GB per second) extrapolates to Pythia's 143,000 x 1,024 =
146,432,000 rows (about 600 GB), where reading the file from disk bounds it.

Usage::

    python benchmarks/pythia_repeats.py --rows 200000 --sampled 1000 --copies 300 \
        --out benchmarks/results/pythia_repeats.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from _provenance import write_rows

from didmem.orders.indexed import write_indexed_dataset
from didmem.orders.pythia_repeats import find_repeats

PYTHIA_ROWS = 143_000 * 1024


def _order(path, rows, rng, copies, sampled):
    data = rng.integers(0, 50_000, size=(rows, 2049), dtype=np.uint16)
    picks = rng.choice(rows // 2, size=sampled, replace=False)
    planted = {}
    for src in rng.choice(picks, size=copies, replace=False):
        dst = int(rng.integers(rows // 2, rows))
        while dst in planted.values():
            dst = int(rng.integers(rows // 2, rows))
        data[dst] = data[src]
        planted[int(src)] = dst
    write_indexed_dataset(path, data, dtype=np.uint16)
    return data, picks, planted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--sampled", type=int, default=1000)
    parser.add_argument("--copies", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/pythia_repeats.json")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "document"
        data, picks, planted = _order(prefix, args.rows, rng, args.copies, args.sampled)
        from didmem.orders.indexed import MMapIndexedDataset

        dataset = MMapIndexedDataset(prefix)
        tokens = [data[i] for i in picks]
        find_repeats(dataset, picks[:2], tokens[:2], batch_size=1024, stop=1024)  # compile
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            found = find_repeats(dataset, picks, tokens, batch_size=1024)
            times.append(time.perf_counter() - start)
        extra = found[found["position"] != found["unit"]]
        got = dict(zip(extra["unit"].astype(int), extra["position"].astype(int)))
        assert got == planted, "the search missed a planted copy or found a false one"
        gbytes = args.rows * 2049 * 2 / 1e9
        best = min(times)
        row = {"rows": args.rows, "sampled": args.sampled, "planted": len(planted),
               "found": len(got), "seconds": times, "best_seconds": best,
               "rows_per_second": args.rows / best, "gb_per_second": gbytes / best,
               "pythia_rows": PYTHIA_ROWS,
               "pythia_minutes_at_this_rate": PYTHIA_ROWS / (args.rows / best) / 60}
    print(f"{args.rows} rows ({gbytes:.2f} GB), {args.sampled} sampled, {len(planted)} copies "
          f"planted and found: best {best:.2f} s of {args.repeats} "
          f"({row['rows_per_second']:.0f} rows/s, {row['gb_per_second']:.2f} GB/s); Pythia's "
          f"{PYTHIA_ROWS} rows at this rate: {row['pythia_minutes_at_this_rate']:.0f} min")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_rows(args.out, [row])


if __name__ == "__main__":
    main()
