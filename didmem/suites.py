"""What each public suite publishes: tokens per instance, global batch and checkpoint grid.

The planner (:func:`didmem.power.power_analysis`, ``suite=``) and the docs' *Suites* page read
these facts. Each suite's checkpoint grid is a package data file,
``didmem/data/checkpoints/<grid>.csv`` (``step,tokens``), whose ``#`` lines name its source;
``tools/make_suite_checkpoints.py`` writes them:

- OLMo: the checkpoint lists allenai/OLMo publishes (``checkpoints/official/*.csv`` at
  206da7c7 for OLMo 1, ``configs/official-*/*.csv`` at 59a53e3f for OLMo 2, column
  ``Step``), with OLMo 2 7B's last stage-1 step 928,646 from its README; tokens are steps x
  ``global_train_batch_size`` x ``max_sequence_length`` of the run's configuration
  (``configs/official-0724/OLMo-7B.yaml``: 2,048 x 2,048; ``OLMo-7B-0424.yaml`` and
  ``OLMo-7B-0724.yaml``: 1,024 x 4,096; ``OLMo-1B.yaml``: 2,048 x 2,048;
  ``configs/official-1124/OLMo2-7B-stage1.yaml``: 1,024 x 4,096, ``OLMo2-13B-stage1.yaml``:
  2,048 x 4,096; ``configs/official-0425/OLMo2-1B-stage1.yaml``: 512 x 4,096).
- Pythia: EleutherAI/pythia ``README.md`` (154 checkpoints: 0, 1, 2, 4, ..., 512 and every
  1,000 steps to 143,000; 299,892,736,000 tokens) and ``models/*/*.yml`` (batch 1,024 of
  2,048-token sequences; rows of the pre-shuffled data hold 2,049 tokens).
- Hubble: allegro-lab/hubble ``configs/hubble_1b/src_config.yml`` (``train_batch_size``
  1024, ``checkpoint_factor`` 1000, ``extra_save_iters`` 0, 1, 4, 16, 64, 256, 512), the
  README (``step48000`` and ``step238500`` are the last revisions of the 100B- and 500B-token
  runs) and ``scripts/perturbation_utils/perturb_hubble.sh`` (2,048-token sequences).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from ._messages import listing
from .errors import ParameterError

__all__ = ["Suite", "SUITES", "get_suite", "read_checkpoint_grid"]


@cache
def read_checkpoint_grid(grid: str) -> tuple:
    """The published checkpoints of a grid file: ``(steps, tokens, source lines)``.

    Parameters
    ----------
    grid : str
        The file's name in ``didmem/data/checkpoints`` without ``.csv`` (``"olmo-7b"``,
        ``"pythia"``, ...).

    Returns
    -------
    tuple
        Steps (tuple of int, sorted), tokens seen at each (tuple of int) and the file's
        ``#`` lines (its source and how tokens are computed).
    """
    text = resources.files("didmem").joinpath("data", "checkpoints", f"{grid}.csv").read_text()
    lines = text.splitlines()
    notes = tuple(line[1:].strip() for line in lines if line.startswith("#"))
    rows = [line.split(",") for line in lines if line and not line.startswith("#")]
    if rows[0] != ["step", "tokens"]:
        raise ParameterError(f"didmem/data/checkpoints/{grid}.csv must start with the header "
                             f"'step,tokens'; got {','.join(rows[0])!r}.")
    steps = tuple(int(r[0]) for r in rows[1:])
    tokens = tuple(int(r[1]) for r in rows[1:])
    return steps, tokens, notes


@dataclass(frozen=True)
class Suite:
    """One suite's published training facts.

    Attributes
    ----------
    name : str
        The name ``power_analysis(suite=...)`` takes.
    tokens_per_instance : int
        Tokens scored per instance and checkpoint.
    batch_size : int
        Instances per optimisation step.
    grid : str
        The checkpoint grid's package data file (see :func:`read_checkpoint_grid`).
    design_kind : str
        The ``[design] kind`` of a study on this suite.
    order : str
        Where the training order is published, in a few words.
    """

    name: str
    tokens_per_instance: int
    batch_size: int
    grid: str = field(repr=False)
    design_kind: str
    order: str

    @property
    def checkpoints(self) -> tuple:
        """The published checkpoint steps, sorted."""
        return read_checkpoint_grid(self.grid)[0]

    @property
    def tokens(self) -> tuple:
        """Tokens trained on at each checkpoint."""
        return read_checkpoint_grid(self.grid)[1]

    @property
    def source(self) -> str:
        """Where the checkpoint grid comes from (the data file's ``#`` lines)."""
        return "; ".join(read_checkpoint_grid(self.grid)[2])

    @property
    def last_step(self) -> int:
        """The last checkpoint's step."""
        return self.checkpoints[-1]


_PYTHIA_SIZES = ("14m", "31m", "70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b")
_PYTHIA_ORDER = ("pre-shuffled .bin/.idx (EleutherAI/pile-*-pythia-preshuffled): row i is "
                 "trained at step i // 1024 + 1")
_HUBBLE_ORDER = ("perturbation_info.json: each inserted copy's pt_loc in the training order; "
                 "the corpus is GPT-NeoX .bin/.idx with its index files")
_OLMO_ORDER = ("train_data/global_indices.npy (raw uint32, one per epoch): position p is "
               "trained at step p // B + 1; instances from raw token memmaps")
# name: (sequence length, global batch) of the run's configuration (see the module's notes)
_OLMO = {"olmo-1b": (2048, 2048), "olmo-7b": (2048, 2048), "olmo-7b-0424": (4096, 1024),
         "olmo-7b-0724": (4096, 1024), "olmo-2-1124-7b": (4096, 1024),
         "olmo-2-1124-13b": (4096, 2048), "olmo-2-0425-1b": (4096, 512)}


def _suites() -> dict:
    out = {}
    for size in _PYTHIA_SIZES:
        for suffix in ("", "-deduped"):
            if suffix and size in ("14m", "31m"):
                continue  # deduplicated versions of these were not released
            name = f"pythia-{size}{suffix}"
            out[name] = Suite(name, 2049, 1024, "pythia", "pythia", _PYTHIA_ORDER)
    for name, (length, batch) in _OLMO.items():
        out[name] = Suite(name, length, batch, name, "olmo", _OLMO_ORDER)
    for size in ("1b", "8b"):
        for tokens in ("100b", "500b"):
            name = f"hubble-{size}-{tokens}"
            out[name] = Suite(name, 2049, 1024, f"hubble-{tokens}", "hubble", _HUBBLE_ORDER)
    return out


SUITES = _suites()
"""Every known suite by name."""


def get_suite(name: str) -> Suite:
    """The :class:`Suite` called ``name``.

    Raises
    ------
    ParameterError
        An unknown name, with the known ones.
    """
    if name not in SUITES:
        raise ParameterError(
            f"Unknown suite {name!r}; known suites: {listing(sorted(SUITES), limit=40)}."
        )
    return SUITES[name]
