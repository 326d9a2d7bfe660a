"""The truth beside the estimates in the report, where it is known (the lab, the demo,
simulations): the report's use of the one truth scoring (:mod:`didmem.results._truth`, which
matches the truth to a result's outcome and exposure and scores it) and the truth's marks on
the figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..results._truth import TruthScore, cells_with_truth, score_cells, true_aggregate

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["cells_with_truth", "cohort_weights", "error_summary", "true_aggregate", "overlay",
           "truth_scatter"]


def error_summary(cells: pd.DataFrame) -> TruthScore:
    """The score of the post-treatment cells with a truth (RMSE, mean error, band coverage)."""
    return score_cells(cells[cells["post"]])


def cohort_weights(result) -> dict | None:
    """Each treated cohort's weight in the result's averages over cohorts, or None.

    R ``did``'s ``pg``: the cohort's share of the (sampling-weighted) units, or of the
    observations of a repeated cross-section, as the result's settings keep it (fitted or
    saved alike); None for a result without them (a results file of format 1 or 2).
    """
    shares = result.settings.cohort_shares
    return dict(shares) if shares else None


def overlay(ax, truth: pd.Series, *, bars: bool = False) -> None:
    """Draw the truth on an aggregation's axes: markers at the keys (bar positions for bars)."""
    x = np.arange(len(truth)) if bars else truth.index.to_numpy(float)
    ax.plot(x, truth.to_numpy(float), linestyle="none", marker="D", markersize=5,
            markerfacecolor="none", markeredgecolor="#d62728", markeredgewidth=1.4,
            label="truth", zorder=5)
    handles, labels = ax.get_legend_handles_labels()
    twin = getattr(ax, "lr_axis", None)  # the instantaneous figure's learning rate
    if twin is not None:
        more = twin.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    ax.legend(handles, labels, fontsize=8, loc="best")


def truth_scatter(cells: pd.DataFrame, *, label: str):
    """Every post-treatment cell's estimate (with its band) against its truth; returns the Axes."""
    from ..errors import optional_import

    plt = optional_import("matplotlib.pyplot", "plot")
    post = cells[cells["post"] & cells["tau"].notna()]
    _, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    sig = post["significant"].to_numpy(bool)
    ax.errorbar(post["tau"], post["estimate"],
                yerr=[post["estimate"] - post["ci_lower"], post["ci_upper"] - post["estimate"]],
                fmt="none", ecolor="0.7", elinewidth=0.7, zorder=1)
    ax.scatter(post["tau"][sig], post["estimate"][sig], s=14, color="#1f5a96", zorder=2,
               label="band excludes zero")
    ax.scatter(post["tau"][~sig], post["estimate"][~sig], s=14, facecolor="none",
               edgecolor="#1f5a96", zorder=2, label="band covers zero")
    values = np.concatenate([post["tau"], post["estimate"]])
    values = values[np.isfinite(values)]
    lo, hi = (values.min(), values.max()) if values.size else (0.0, 1.0)
    ax.plot([lo, hi], [lo, hi], color="#d62728", linewidth=1, label="estimate = truth")
    ax.axhline(0, color="0.5", linewidth=0.6)
    ax.set_xlabel(f"true tau(g, c) ({label})")
    ax.set_ylabel(f"estimated tau(g, c) ({label})")
    ax.set_title(f"Estimates against the truth: {len(post)} post-treatment cells", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return ax
