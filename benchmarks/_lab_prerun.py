"""Train one lab run of a ``lab_replication.py`` condition (for running seeds in parallel).

Usage::

    python benchmarks/_lab_prerun.py CONDITION SEED OUT

Writes ``OUT/CONDITION/seed{SEED}`` with exactly the settings ``lab_replication.py`` uses, so
that it loads the run instead of training it again.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from lab_replication import CONDITIONS  # noqa: E402

from didmem.lab import quick_config, run  # noqa: E402

if __name__ == "__main__":
    condition, seed, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    config = quick_config(**dict(CONDITIONS[condition], metrics=("mean_token_loglik",)))
    run(out / condition / f"seed{seed}", config=config.replace(seed=seed))
