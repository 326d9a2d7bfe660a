"""The result of :class:`~didmem.estimators.dose.DoseResponseEstimator`: the cumulative effect
of ``d`` exposures against none, by dose, with its band."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._table_file import TableFile

__all__ = ["DoseResponseResult"]


@dataclass(frozen=True, eq=False)
class DoseResponseResult(TableFile):
    """Effects of ``d`` exposures against none at checkpoint ``at``, one row per dose.

    Attributes
    ----------
    estimator, outcome : str
    params : dict
        The estimator's parameters.
    at, base : float
        The checkpoint of the effect and that of the baseline.
    doses : ndarray of int
        The doses with units (``d >= 1``).
    n_units : ndarray of int
        Units of each dose; ``n_control`` those never exposed by ``at``.
    estimates, std_errors : ndarray
    critical_value : float
        Multiplies the standard errors: the sup-t value over the doses (``band ==
        "simultaneous"``) or the normal quantile (``"pointwise"``).
    alpha : float
    draws : ndarray or None
        Bootstrap draws (draws x doses) of ``sum_i U_i psi_i``; not saved to files.
    """

    FILE_KIND = "dose_response"
    FILE_WHAT = "dose-response result"

    estimator: str
    params: dict = field(repr=False)
    outcome: str
    at: float
    base: float
    doses: np.ndarray = field(repr=False)
    n_units: np.ndarray = field(repr=False)
    n_control: int
    estimates: np.ndarray = field(repr=False)
    std_errors: np.ndarray = field(repr=False)
    critical_value: float
    band: str
    alpha: float
    draws: Any = field(default=None, repr=False)

    def to_frame(self):
        """One row per dose: ``dose``, ``time`` (``at``), ``n_units``, ``estimate``,
        ``std_error``, ``ci_lower``, ``ci_upper`` (the band) and ``significant``."""
        import pandas as pd

        half = self.critical_value * np.asarray(self.std_errors)
        lower = np.asarray(self.estimates) - half
        upper = np.asarray(self.estimates) + half
        return pd.DataFrame({
            "dose": np.asarray(self.doses, dtype=int), "time": float(self.at),
            "n_units": self.n_units,
            "estimate": self.estimates, "std_error": self.std_errors, "ci_lower": lower,
            "ci_upper": upper, "significant": (lower > 0) | (upper < 0)})

    def summary(self) -> str:
        """The table with a header naming the estimand, the comparison and the band."""
        level = f"{100 * (1 - self.alpha):g}%"
        head = [
            f"{self.estimator}: cumulative effect of d exposures against none on "
            f"{self.outcome!r} at {self.at:g} (changes from {self.base:g})",
            f"  {len(self.doses)} doses, {int(np.sum(self.n_units))} exposed units against "
            f"{self.n_control} never exposed; {self.band} {level} "
            f"{'band over the doses' if self.band == 'simultaneous' else 'intervals'} "
            f"(critical value {self.critical_value:.3f})",
        ]
        return "\n".join(head + [self.to_frame().to_string(index=False)])

    def __str__(self) -> str:
        return self.summary()

    def plot(self, ax=None, log_dose: bool = True):
        """The estimates against the dose with their band (a log dose axis by default)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3.5))
        frame = self.to_frame()
        ax.fill_between(frame["dose"], frame["ci_lower"], frame["ci_upper"], alpha=0.25,
                        label=f"{100 * (1 - self.alpha):g}% {self.band} band")
        ax.plot(frame["dose"], frame["estimate"], marker="o", label="estimate")
        ax.axhline(0.0, color="grey", lw=0.8)
        if log_dose:
            ax.set_xscale("log")
        ax.set_xlabel("exposures d")
        ax.set_ylabel(f"effect on {self.outcome} at {self.at:g}")
        ax.legend(frameon=False)
        return ax

    # ------------------------------------------------------------ files
    def _file_contents(self):
        frame = self.to_frame()
        settings = {"estimator": self.estimator, "outcome": self.outcome, "at": self.at,
                    "base": self.base, "n_control": self.n_control,
                    "critical_value": self.critical_value, "band": self.band,
                    "alpha": self.alpha, "params": {k: v for k, v in self.params.items()
                                                    if k != "random_state" or v is None
                                                    or isinstance(v, int)}}
        return frame, settings

    @classmethod
    def _from_file(cls, frame, settings: dict):
        return cls(estimator=settings["estimator"], params=settings["params"],
                   outcome=settings["outcome"], at=settings["at"], base=settings["base"],
                   doses=frame["dose"].to_numpy(), n_units=frame["n_units"].to_numpy(),
                   n_control=settings["n_control"], estimates=frame["estimate"].to_numpy(),
                   std_errors=frame["std_error"].to_numpy(),
                   critical_value=settings["critical_value"], band=settings["band"],
                   alpha=settings["alpha"])
