"""
Instantaneous, persistent and residual memorisation
===================================================

The three summaries of the paper, each with its simultaneous band. The learning-rate
schedule is drawn beside instantaneous memorisation: in the paper, instantaneous
memorisation follows it.
"""

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

import didmem
from didmem import plotting

steps = np.arange(0, 8001, 100)
lr = 1e-3 * np.where(steps < 500, steps / 500, 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * (steps - 500) / 7500)))
schedule = pd.Series(lr, index=steps)

# a simulated instantaneous effect that follows the schedule at each cohort's step
cohorts = np.arange(1000, 8001, 1000)
scale = schedule.reindex(cohorts).to_numpy() / lr.max()
df, truth = didmem.datasets.simulate_panel(
    n_cohorts=8, units_per_cohort=60, n_never_treated=200, time_step=1000,
    cohort_scale=scale, seed=1,
)
panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
result = didmem.DiDEstimator(n_bootstrap=499, seed=0).fit(panel)

fig, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
plotting.plot_instantaneous(result, ax=axes[0], lr_schedule=schedule)
plotting.plot_persistent(result, ax=axes[1])
plotting.plot_residual(result, ax=axes[2])
plt.show()

# %%
# The numbers behind the figures are tidy frames:
print(result.aggregate("instantaneous").to_frame())
