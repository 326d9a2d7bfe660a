"""
Probing parallel trends, and comparing models
=============================================

Pre-treatment cells (c < g) estimate what training has not yet touched: under parallel
trends they are all zero. The first figure draws them with their band, the Wald pre-test
in the title. The second compares the profiles of three "models" (here, panels with a
slower or faster decay) by their correlation on the cells they share — the paper's
Figure 6.
"""

import matplotlib.pyplot as plt

import didmem
from didmem import plotting


def fit(decay, seed):
    df, _ = didmem.datasets.simulate_panel(
        n_cohorts=6, units_per_cohort=50, n_never_treated=150, time_step=1000,
        decay=decay, seed=seed,
    )
    panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    return didmem.DiDEstimator(n_bootstrap=299, seed=seed).fit(panel)


models = {"fast decay": fit(0.2, 0), "medium": fit(0.5, 1), "slow decay": fit(0.9, 2)}

plotting.plot_pretrends(models["medium"])
plt.show()

# %%
corr = didmem.profile_correlation(models)
print(corr.round(3))
plotting.plot_profile_correlation(corr)
plt.show()
