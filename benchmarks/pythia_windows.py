"""How fast the windowed search for re-packed repeats runs (didmem.orders.windows).

Writes a Pythia-shaped order (rows of 2,049 uint16 tokens, .bin/.idx) whose second half
re-packs pieces of sampled rows at random offsets of other rows (each a copy of ``--piece``
tokens of a sampled row, at a random place of a later row), then times
:func:`~didmem.orders.find_windows` over every row (window 50, stride 50 by
default) beside whole-row hashing (:func:`~didmem.orders.find_repeats`) on
the same file. It checks that every planted piece is found at its place and length (a piece
of at least window + stride - 1 tokens is always found) and that whole-row hashing finds
none of them. Rows per second extrapolate to Pythia's 146,432,000 rows.

Usage (from ``benchmarks/``)::

    python pythia_windows.py --rows 100000 --sampled 1000 --pieces 300 --repeats 3 \
        --out results/pythia_windows.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from _provenance import write_rows

from didmem.orders.indexed import MMapIndexedDataset, write_indexed_dataset
from didmem.orders.pythia_repeats import find_repeats
from didmem.orders.windows import find_windows

PYTHIA_ROWS = 143_000 * 1024
LENGTH = 2049


def _order(path, rows, rng, pieces, sampled, piece):
    data = rng.integers(0, 50_000, size=(rows, LENGTH), dtype=np.uint16)
    picks = np.sort(rng.choice(rows // 2, size=sampled, replace=False))
    planted = []
    targets = rng.choice(np.arange(rows // 2, rows), size=pieces, replace=False)
    for dst in targets:
        src = int(rng.choice(picks))
        a, b = (int(x) for x in rng.integers(0, LENGTH - piece + 1, size=2))
        data[dst, a:a + piece] = data[src, b:b + piece]
        planted.append((src, int(dst), a, b))
    write_indexed_dataset(path, data, dtype=np.uint16)
    return data, picks, planted


def _best(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return times, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--sampled", type=int, default=1000)
    parser.add_argument("--pieces", type=int, default=300)
    parser.add_argument("--piece", type=int, default=300, help="tokens per planted piece")
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--stride", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/pythia_windows.json")
    args = parser.parse_args()
    stride = args.window if args.stride is None else args.stride
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "document"
        data, picks, planted = _order(prefix, args.rows, rng, args.pieces, args.sampled,
                                      args.piece)
        dataset = MMapIndexedDataset(prefix)
        tokens = [data[i] for i in picks]
        find_windows(dataset, picks[:2], tokens[:2], batch_size=1024, stop=1024)  # compile
        find_repeats(dataset, picks[:2], tokens[:2], batch_size=1024, stop=1024)
        win_times, runs = _best(lambda: find_windows(
            dataset, picks, tokens, batch_size=1024, window=args.window, stride=stride),
            args.repeats)
        row_times, whole = _best(lambda: find_repeats(dataset, picks, tokens, batch_size=1024),
                                 args.repeats)
    got = {(int(r.unit), int(r.position), int(r.offset), int(r.instance_offset))
           for r in runs.itertuples() if r.tokens >= args.piece}
    missed = [p for p in planted if p not in got]
    assert not missed, f"the windowed search missed {len(missed)} planted pieces"
    assert (whole["position"] == whole["unit"]).all(), "row hashing found a re-packed piece"
    best_w, best_r = min(win_times), min(row_times)
    row = {"rows": args.rows, "sampled": args.sampled, "pieces": len(planted),
           "piece_tokens": args.piece, "window": args.window, "stride": stride,
           "found": len(planted) - len(missed), "window_seconds": win_times,
           "row_hash_seconds": row_times, "window_rows_per_second": args.rows / best_w,
           "row_hash_rows_per_second": args.rows / best_r,
           "pythia_minutes_at_window_rate": PYTHIA_ROWS / (args.rows / best_w) / 60}
    print(f"{args.rows} rows, {args.sampled} sampled, {len(planted)} re-packed pieces of "
          f"{args.piece} tokens: windowed (k={args.window}, stride={stride}) found all, best "
          f"{best_w:.2f} s ({row['window_rows_per_second']:.0f} rows/s; Pythia's rows: "
          f"{row['pythia_minutes_at_window_rate']:.0f} min); whole-row hashing found none, "
          f"best {best_r:.2f} s ({row['row_hash_rows_per_second']:.0f} rows/s)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_rows(args.out, [row])


if __name__ == "__main__":
    main()
