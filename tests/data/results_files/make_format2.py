"""Write results_format2.parquet: a results file of format 2, as didmem wrote it before format 3.

Made with the didmem of commit b0828df (the last to write format 2), from a checkout of it:

    PYTHONPATH=/path/to/didmem-at-b0828df python tests/data/results_files/make_format2.py

The panel is small (3 cohorts of 15 units, 20 never-treated, 5 times) so the file stays small;
tests/test_results_io.py reads it with today's didmem.
"""

from pathlib import Path

import didmem
from didmem.results import FORMAT_VERSION
from didmem.datasets import simulate_panel

assert FORMAT_VERSION == 2, "run this with the didmem of commit b0828df"
df, _ = simulate_panel(n_cohorts=3, units_per_cohort=15, n_never_treated=20, n_times=5, seed=7)
panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
result = didmem.DiDEstimator(n_bootstrap=49, seed=0).fit(panel)
result.save(Path(__file__).with_name("results_format2.parquet"))
