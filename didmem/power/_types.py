"""What a power analysis is made from and what it gives: :class:`Assumptions` and :class:`PowerAnalysis`
(light to import: pandas loads when an analysis is used)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .._validation import (Integral, Interval, Satisfies, check, check_fits_memory,
                           validate_params)
from ..errors import ParameterError
from ..results._table_file import TableFile

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Assumptions", "PowerAnalysis", "PAPER_TOKENS_PER_INSTANCE", "POWER"]

PAPER_TOKENS_PER_INSTANCE = 2049  # Pythia's sequence length + 1 (Lesci et al. 2024)
POWER = Interval(0, 1, closed="neither")


@dataclass(frozen=True)
class Assumptions:
    """What is assumed about the outcome when there is no pilot.

    The outcome of an instance over the checkpoints has standard deviation ``outcome_sd``
    at every checkpoint and correlation ``unit_share + (1 - unit_share) * ar1 ** |j - l|``
    between checkpoints ``j`` and ``l`` (positions in the full list of checkpoints): a
    unit effect (instance difficulty) carrying ``unit_share`` of the variance plus AR(1)
    noise. Cohort ``j`` (``j = 1 .. n_cohorts``) is treated at checkpoint ``j`` (the
    first checkpoint, 0, is everyone's pre-period), as in
    :func:`didmem.datasets.simulate_panel`.

    Parameters
    ----------
    n_cohorts : int
        Macro-batches (treatment steps) sampled from.
    n_checkpoints : int
        Checkpoints in the full design; at least ``n_cohorts + 1``.
    outcome_sd : float
        Standard deviation of the outcome at a checkpoint, around the checkpoint's mean.
    unit_share : float
        Share of that variance due to a per-instance constant, in [0, 1).
    ar1 : float
        Lag-one autocorrelation of the rest, in (-1, 1).
    """

    n_cohorts: int
    n_checkpoints: int
    outcome_sd: float = 1.0
    unit_share: float = 0.0
    ar1: float = 0.0

    _constraints = {
        "n_cohorts": Integral(1),
        "n_checkpoints": Integral(2),
        "outcome_sd": Interval(0, None, closed="neither"),
        "unit_share": Interval(0, 1, closed="left"),
        "ar1": Interval(-1, 1, closed="neither"),
    }

    def __post_init__(self):
        for name, constraint in self._constraints.items():
            check("Assumptions", name, getattr(self, name), constraint)
        if self.n_checkpoints < self.n_cohorts + 1:
            check("Assumptions", "n_checkpoints", self.n_checkpoints,
                  Satisfies(lambda v: False, f"at least n_cohorts + 1 = {self.n_cohorts + 1}"))

    def kept_checkpoints(self, every: int):
        """Positions of the cohorts among the kept checkpoints, and the outcome covariance."""
        n_kept = -(-self.n_checkpoints // every)
        check_fits_memory("Assumptions", "n_checkpoints", self.n_checkpoints,
                          24.0 * n_kept ** 2,
                          f"the outcome covariance of its {n_kept:,} kept checkpoints "
                          f"(checkpoint_every={every})")
        kept = np.arange(0, self.n_checkpoints, every)
        pos = np.unique(np.ceil(np.arange(1, self.n_cohorts + 1) / every).astype(int))
        pos = pos[pos < kept.size]
        lag = np.abs(kept[:, None] - kept[None, :])
        corr = self.unit_share + (1 - self.unit_share) * self.ar1 ** lag
        return pos, kept.size, self.outcome_sd ** 2 * corr



@dataclass(frozen=True, eq=False)
class PowerAnalysis(TableFile):
    """Power, minimum detectable effect and cost of every design of a power analysis.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per design; see :meth:`to_frame`.
    target : str
        ``"instantaneous"``, ``"persistent"`` or ``"overall"``.
    method : str
        ``"analytic"`` or ``"simulated"``.
    effect_source : str
        ``"stated"`` (the ``effect=`` argument) or ``"pilot"`` (the pilot's own estimates).
    mde_power : float
        The power at which ``mde`` is computed.
    """

    table: pd.DataFrame = field(repr=False)
    target: str
    method: str
    effect_source: str
    mde_power: float
    alpha: float

    def to_frame(self) -> pd.DataFrame:
        """One row per design.

        Columns: ``units_per_cohort``, ``n_validation``, ``checkpoint_every``, ``n_cohorts``,
        ``checkpoints`` (kept), ``instances``, ``tokens``, ``gpu_hours`` (NaN without
        ``tokens_per_second``), ``effect`` (the effect power is computed at; its mean over
        keys for the pilot's own), ``power``, ``power_lower`` and ``power_upper`` (with the
        pilot's own effects: the central 90% of the power over draws of the effects from
        their posterior, which reflects the pilot's size; NaN with a stated effect),
        ``power_mc_error`` (0 for analytic),
        ``mde`` (the smallest common effect reaching ``mde_power``), ``critical_value``
        (mean over simulations), ``method``.
        """
        return self.table.copy()

    @validate_params({"power": POWER}, owner="PowerAnalysis.recommend")
    def recommend(self, power: float = 0.8) -> pd.Series:
        """The cheapest design (fewest tokens, then fewest instances) with at least ``power``.

        Raises
        ------
        ParameterError
            When no design of the analysis reaches ``power``.
        """
        t = self.table
        ok = t[t["power"] >= power]
        if ok.empty:
            best = t.loc[t["power"].idxmax()]
            raise ParameterError(
                f"No design of the analysis reaches power {power:g} for the {self.target} target; "
                f"the highest is {best['power']:.3f} at units_per_cohort="
                f"{int(best['units_per_cohort'])}, n_validation={int(best['n_validation'])}. "
                "Add larger designs.")
        return ok.sort_values(["tokens", "instances", "units_per_cohort"]).iloc[0]

    def __repr__(self) -> str:
        return (f"<PowerAnalysis {self.target} ({self.method}, {self.effect_source} effect): "
                f"{len(self.table)} designs>")

    def summary(self) -> str:
        """The designs as text: cost, effect, power (with its interval) and MDE."""
        cols = [c for c in ("units_per_cohort", "n_validation", "checkpoint_every", "tokens",
                            "gpu_hours", "effect", "power", "power_lower", "power_upper",
                            "power_mc_error", "mde") if c in self.table]
        table = self.table[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}")
        interval = ("; power_lower/power_upper: the central 90% of the power over the "
                    "pilot's uncertainty about the effect" if self.effect_source == "pilot"
                    else "")
        return (f"Power analysis: power for the {self.target} effect ({self.method}, "
                f"{self.effect_source} effect, level {self.alpha:g}); mde at power "
                f"{self.mde_power:g}{interval}\n{table}")

    FILE_KIND, FILE_WHAT = "power_analysis", "power analysis"

    def _file_contents(self):
        return self.table, {"target": self.target, "method": self.method,
                            "effect_source": self.effect_source,
                            "mde_power": float(self.mde_power), "alpha": float(self.alpha)}

    @classmethod
    def _from_file(cls, frame, settings: dict) -> "PowerAnalysis":
        return cls(table=frame, target=settings["target"], method=settings["method"],
                   effect_source=settings["effect_source"],
                   mde_power=float(settings["mde_power"]), alpha=float(settings["alpha"]))
