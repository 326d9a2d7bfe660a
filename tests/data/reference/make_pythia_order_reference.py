"""Record, with Pythia's own batch viewer, which rows each training iteration reads.

Needs a checkout of EleutherAI/pythia (its ``utils/batch_viewer.py`` and
``utils/mmap_dataset.py``, run as they are, never copied here) and an environment with
numpy, torch and tqdm (the one of ``make_olmo_order_reference.py`` serves)::

    git clone https://github.com/EleutherAI/pythia /tmp/pythia     # a19eecb8
    /work/venvs/olmo/bin/python tests/data/reference/make_pythia_order_reference.py \
        /tmp/pythia tests/data/reference/pythia_order

It writes, into the folder given:

- ``document.idx``: the index of a Pythia-shaped data order of 2,148 rows of 2,049 ``uint16``
  tokens (two full iterations of 1,024 rows and 100 more), written by :func:`write_index`
  from the format's description (Pythia's own ``Index.writer`` fails at a19eecb8:
  ``NameError: name 'code' is not defined``), so didmem's writer is not the one under test;
- ``batches.csv``: ``iteration, first_row, rows, sha256, first_tokens`` for iterations 0, 1
  and 2, as ``utils/batch_viewer.py --start_iteration i --end_iteration i`` saves them
  (``indicies.npy``): the rows it returns, the sha256 of their little-endian ``uint16``
  bytes and the first four tokens;
- ``files.csv``: the sha256 of ``document.bin`` and ``document.idx``.

``document.bin`` (8.8 MB) is not kept: its tokens follow :func:`token`, and the test writes it
again and checks its sha256 before reading.
"""

from __future__ import annotations

import csv
import hashlib
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROWS = 2 * 1024 + 100
LENGTH = 2049


def token(rows: int, length: int = LENGTH) -> np.ndarray:
    """The tokens of the order: a fixed integer hash of (row, column), below 50,277."""
    cell = np.arange(rows * length, dtype=np.uint64).reshape(rows, length)
    return ((cell * np.uint64(2654435761)) % np.uint64(50_277)).astype(np.uint16)


def write_index(path: Path, rows: int, doc_idx) -> None:
    """The ``MMIDIDX`` index: magic, version 1, dtype code 8 (uint16), counts, sizes,
    byte pointers and document starts, little-endian."""
    sizes = np.full(rows, LENGTH, dtype="<i4")
    pointers = np.arange(rows, dtype="<i8") * LENGTH * 2
    doc_idx = np.asarray(doc_idx, dtype="<i8")
    path.write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, rows, len(doc_idx))
                     + sizes.tobytes() + pointers.tobytes() + doc_idx.tobytes())


def sha256(path_or_bytes) -> str:
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else Path(path_or_bytes).read_bytes()
    return hashlib.sha256(data).hexdigest()


def main(pythia: Path, out: Path) -> None:
    out = out.resolve()  # the viewer runs in its own folder
    out.mkdir(parents=True, exist_ok=True)
    prefix = out / "document"
    tokens = token(ROWS)
    prefix.with_suffix(".bin").write_bytes(tokens.astype("<u2").tobytes())
    write_index(prefix.with_suffix(".idx"), ROWS, list(range(0, ROWS, 7)) + [ROWS])
    rows = []
    for iteration in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, str(pythia / "utils" / "batch_viewer.py"),
                            "--start_iteration", str(iteration), "--end_iteration",
                            str(iteration), str(prefix), "--save_path", tmp],
                           check=True, cwd=pythia / "utils", capture_output=True)
            batch = np.load(Path(tmp) / "indicies.npy")
        assert batch.ndim == 2 and batch.shape[1] == LENGTH
        first = next(r for r in range(ROWS) if np.array_equal(tokens[r], batch[0]))
        rows.append([iteration, first, len(batch), sha256(batch.astype("<u2").tobytes()),
                     " ".join(str(int(t)) for t in batch[0, :4])])
    with open(out / "batches.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["iteration", "first_row", "rows", "sha256", "first_tokens"])
        writer.writerows(rows)
    with open(out / "files.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["file", "sha256", "bytes"])
        for suffix in (".bin", ".idx"):
            path = prefix.with_suffix(suffix)
            writer.writerow([path.name, sha256(path), path.stat().st_size])
    prefix.with_suffix(".bin").unlink()
    print(f"numpy {np.__version__}: wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
