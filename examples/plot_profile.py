"""
The memorisation profile of a simulated model
=============================================

Simulate a panel whose true profile is known (an instantaneous effect that decays to a
residual floor), estimate tau(g, c) with a simultaneous bootstrap band, and draw the
profile heatmap with only the significant cells, as in the paper.
"""

import matplotlib.pyplot as plt

import didmem
from didmem import plotting

df, truth = didmem.datasets.simulate_panel(
    n_cohorts=8, units_per_cohort=60, n_never_treated=200, time_step=1000,
    instantaneous=1.0, decay=0.5, residual=0.2, seed=0,
)
panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
result = didmem.DiDEstimator(n_bootstrap=499, seed=0).fit(panel)
print(result.summary())

# %%
# The heatmap: rows are treatment steps g, columns checkpoints c. Cells whose band covers
# zero, and pre-treatment cells, are left grey. The dashed line marks a checkpoint of
# interest (in the paper, the end of the first epoch).
plotting.plot_profile(result, end_of_epoch=4500)
plt.show()

# %%
# The same cells without the mask, to see what the significance filter hides.
plotting.plot_profile(result, significant_only=False)
plt.show()
