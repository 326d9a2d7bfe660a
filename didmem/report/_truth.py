"""The truth beside the estimates, where it is known (the lab, the demo, simulations).

The truth is a table with ``cohort``, ``time`` and ``tau`` (and ``metric`` when it holds
several outcomes, as the lab's does); a result is matched with the rows of its own outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from ..errors import ParameterError

__all__ = ["TruthError", "cells_with_truth", "cohort_weights", "error_summary",
           "true_aggregate", "overlay", "truth_scatter"]


@dataclass(frozen=True)
class TruthError:
    """How far a result's post-treatment cells are from the truth."""

    n_cells: int
    rmse: float
    bias: float
    covered: int

    def describe(self) -> str:
        """The sentence the demo prints in the terminal, for the report."""
        return (f"against the truth: RMSE {self.rmse:.3g} and mean error {self.bias:+.3g} "
                f"over {self.n_cells} post-treatment cells; the band covers the truth in "
                f"{self.covered} of {self.n_cells}")


def cells_with_truth(result, truth) -> pd.DataFrame:
    """``result.to_frame()`` with the true ``tau`` of each cell (NaN where the truth lacks it).

    Raises
    ------
    ParameterError
        When the truth is not a table of cohort, time, tau, holds no row of the result's
        outcome, or shares no cell with the result.
    """
    from ..results.comparison import _truth_frame as truth_frame  # pandas, when a report is made

    true = truth_frame(truth, str(result.outcome))
    frame = result.to_frame()
    out = frame.merge(true, on=["cohort", "time"], how="left")
    if out["tau"].notna().sum() == 0:
        raise ParameterError(f"The truth shares no (cohort, time) cell with the result of "
                             f"{result.outcome!r}: its cohorts are "
                             f"{sorted(true['cohort'].unique())[:8]}, the result's "
                             f"{sorted(frame['cohort'].unique())[:8]}.")
    return out


def error_summary(cells: pd.DataFrame) -> TruthError:
    """RMSE, mean error and band coverage over the post-treatment cells with a truth."""
    post = cells[cells["post"] & cells["tau"].notna() & cells["estimate"].notna()]
    err = post["estimate"] - post["tau"]
    covered = (post["ci_lower"] <= post["tau"]) & (post["tau"] <= post["ci_upper"])
    return TruthError(len(post), float(np.sqrt(np.mean(err**2))) if len(post) else np.nan,
                      float(err.mean()) if len(post) else np.nan, int(covered.sum()))


def cohort_weights(result) -> dict | None:
    """Each treated cohort's weight in the result's averages over cohorts, or None.

    R ``did``'s ``pg``: the cohort's share of the (sampling-weighted) units, or of the
    observations of a repeated cross-section; known for a fitted result (from its design),
    not for one read from a file.
    """
    design = getattr(result, "design", None)
    if design is None or not design.n_units:
        return None
    return dict(zip(design.cohorts.tolist(), design.cohort_shares.tolist()))


def true_aggregate(cells: pd.DataFrame, kind: str, key: str,
                   weights: dict | None = None) -> pd.Series:
    """The truth of an aggregation by its key, with the aggregation's cohort weights.

    ``instantaneous`` (key ``cohort``): tau(g, g); ``residual`` (``cohort``): tau(g, T) at the
    last checkpoint; ``persistent`` (``event_time``): the mean of tau(g, g + e) over the
    cohorts with a cell at e, weighted by ``weights`` (cohort -> weight, see
    :func:`cohort_weights`), as the estimate is; without them by each cell's treated count,
    which equals those weights on a balanced panel without sampling weights.
    """
    if kind == "instantaneous":
        rows = cells[cells["event_time"] == 0]
        return rows.set_index("cohort")["tau"]
    if kind == "residual":
        rows = cells[cells["time"] == cells["time"].max()]
        return rows.set_index("cohort")["tau"]
    rows = cells[cells["event_time"] > 0].dropna(subset=["tau"])
    if weights is None:
        weight = rows["n_treated"].astype(float)
    else:
        weight = rows["cohort"].map(weights).astype(float)
    weighted = (rows["tau"] * weight).groupby(rows[key]).sum()
    return weighted / weight.groupby(rows[key]).sum()


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
