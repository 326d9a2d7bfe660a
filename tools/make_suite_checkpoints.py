"""Write didmem/data/checkpoints/*.csv: each suite's published checkpoint steps and tokens.

Each file starts with ``#`` lines naming its source (repository, commit, path) and how its
``tokens`` column is computed, then ``step,tokens`` rows, one per distinct step, sorted.
OLMo's lists are read from a clone of allenai/OLMo at the commits named below; Pythia's and
Hubble's grids are stated in their READMEs and configuration files, not listed, so they are
computed from those statements here. Run from the repository root::

    git clone https://github.com/allenai/OLMo /tmp/OLMo
    python tools/make_suite_checkpoints.py /tmp/OLMo
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "didmem" / "data" / "checkpoints"
OLMO_URL = "https://github.com/allenai/OLMo/blob"
OLMO_OLD = "206da7c76bd7b6871726d8942155c19da87cb2a4"  # last commit with checkpoints/official/
OLMO_NEW = "59a53e3f68e546330ca5a99ec626e58f9ab96494"

# suite: (commit, list, config whose batch x sequence length gives tokens, batch, length,
#         extra steps with their source)
OLMO = {
    "olmo-1b": (OLMO_OLD, "checkpoints/official/OLMo-1B.csv",
                "configs/official-0724/OLMo-1B.yaml", 2048, 2048, ()),
    "olmo-7b": (OLMO_OLD, "checkpoints/official/OLMo-7B.csv",
                "configs/official-0724/OLMo-7B.yaml", 2048, 2048, ()),
    "olmo-7b-0424": (OLMO_OLD, "checkpoints/official/OLMo-7B-0424.csv",
                     "configs/official-0724/OLMo-7B-0424.yaml", 1024, 4096, ()),
    "olmo-7b-0724": (OLMO_OLD, "checkpoints/official/OLMo-7B-0724.csv",
                     "configs/official-0724/OLMo-7B-0724.yaml", 1024, 4096, ()),
    "olmo-2-1124-7b": (OLMO_NEW, "configs/official-1124/OLMo-2-1124-7B.csv",
                       "configs/official-1124/OLMo2-7B-stage1.yaml", 1024, 4096,
                       ((928_646, "README.md: stage1-step928646-tokens3896B"),)),
    "olmo-2-1124-13b": (OLMO_NEW, "configs/official-1124/OLMo-2-1124-13B.csv",
                        "configs/official-1124/OLMo2-13B-stage1.yaml", 2048, 4096, ()),
    "olmo-2-0425-1b": (OLMO_NEW, "configs/official-0425/OLMo-2-0425-1B.csv",
                       "configs/official-0425/OLMo2-1B-stage1.yaml", 512, 4096, ()),
}
PYTHIA_SOURCE = ("https://github.com/EleutherAI/pythia/blob/"
                 "a19eecb807ec2c79a39ebf18108816e6ffffc1d5/README.md: \"steps 0 "
                 "(initialization), 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, and then every "
                 "1,000 subsequent steps\" to 143,000 (models/*/*.yml: train-iters 143000)")
HUBBLE_SOURCE = ("https://github.com/allegro-lab/hubble configs/hubble_1b/src_config.yml: "
                 "checkpoint_factor 1000, extra_save_iters [0, 1, 4, 16, 64, 256, 512]; "
                 "README: last revisions step48000 (100B tokens) and step238500 (500B)")


def _write(name: str, header: list, steps, tokens_per_step: int) -> None:
    lines = [f"# {h}" for h in header] + ["step,tokens"]
    lines += [f"{s},{s * tokens_per_step}" for s in sorted(set(steps))]
    (OUT / f"{name}.csv").write_text("\n".join(lines) + "\n")


def _git_show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def main(olmo_repo: Path) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (commit, listing, config, batch, length, extra) in OLMO.items():
        rows = list(csv.DictReader(io.StringIO(_git_show(olmo_repo, commit, listing))))
        steps = [int(r["Step"]) for r in rows] + [s for s, _ in extra]
        header = [f"suite: {name}", f"source: {OLMO_URL}/{commit}/{listing} (column Step)"]
        header += [f"also: step {s} from {OLMO_URL}/{OLMO_NEW}/{why}" for s, why in extra]
        text = _git_show(olmo_repo, commit, config)
        assert f"global_train_batch_size: {batch}\n" in text, (config, batch)
        assert f"max_sequence_length: {length}\n" in text, (config, length)
        header.append(f"tokens: step x {batch} x {length} (global_train_batch_size x "
                      f"max_sequence_length of {OLMO_URL}/{commit}/{config})")
        _write(name, header, steps, batch * length)
    pythia = [0, *(2 ** i for i in range(10)), *range(1000, 143_001, 1000)]
    _write("pythia", ["suite: pythia-* (every size, standard and deduplicated)",
                      f"source: {PYTHIA_SOURCE}",
                      "tokens: step x 1024 x 2048 (the README: 299,892,736,000 tokens at "
                      "143,000 steps)"], pythia, 1024 * 2048)
    for tokens, last in (("100b", 48_000), ("500b", 238_500)):
        steps = {0, 1, 4, 16, 64, 256, 512, last, *range(1000, last + 1, 1000)}
        _write(f"hubble-{tokens}", [f"suite: hubble-*-{tokens}", f"source: {HUBBLE_SOURCE}",
                                    "tokens: step x 1024 x 2048 (train_batch_size 1024, "
                                    "2,048-token sequences)"], steps, 1024 * 2048)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
