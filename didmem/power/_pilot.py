"""A pilot study as arrays: thin its checkpoints, centre its effects, resample its units."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import DidmemWarning, ParameterError
from ..panel import Panel
from ..results import GroupTimeResult

__all__ = ["Pilot", "pilot_from"]


@dataclass(frozen=True)
class Pilot:
    """Outcome matrix (oriented: higher is memorisation), times, cohort per unit (inf: never)."""

    y: np.ndarray
    times: np.ndarray
    cohorts: np.ndarray

    @property
    def treated_cohorts(self) -> np.ndarray:
        return np.unique(self.cohorts[np.isfinite(self.cohorts)])

    def thinned(self, every: int) -> "Pilot":
        """Keep every ``every``-th checkpoint from the first; cohorts move to the next kept one.

        Treated units whose new cohort is after the last kept checkpoint, or at the first (no
        pre-period), are dropped: they are neither treated in the window nor validation data.
        """
        if every == 1:
            return self
        kept = np.arange(0, self.times.size, every)
        kept_times = self.times[kept]
        pos = np.searchsorted(kept_times, self.cohorts)  # first kept time >= cohort
        treated = np.isfinite(self.cohorts)
        ok = ~treated | ((pos < kept.size) & (pos > 0))
        new = np.where(treated, kept_times[np.minimum(pos, kept.size - 1)], np.inf)
        return Pilot(self.y[ok][:, kept], kept_times, new[ok])

    def panel(self) -> Panel:
        n, t = self.y.shape
        frame = pd.DataFrame({"unit": np.repeat(np.arange(n), t), "time": np.tile(self.times, n),
                              "cohort": np.repeat(self.cohorts, t), "y": self.y.ravel()})
        return Panel(frame, unit="unit", time="time", cohort="cohort", outcome="y")

    def sampler(self, pool: str) -> "Sampler":
        """Group means and residuals to draw new units from (see :class:`Sampler`)."""
        groups = np.unique(self.cohorts)  # the treated cohorts, then inf (validation)
        labels = self.cohorts
        means = np.empty((groups.size, self.times.size))
        resid = np.empty_like(self.y)
        for j, g in enumerate(groups):
            rows = labels == g
            means[j] = self.y[rows].mean(axis=0)
            n = int(rows.sum())
            resid[rows] = (self.y[rows] - means[j]) * np.sqrt(n / (n - 1))
        return Sampler(self.times, groups, means, resid, labels, pool)


@dataclass(frozen=True)
class Sampler:
    """Draw a study: each new unit is its group's pilot mean plus a pilot residual.

    With ``pool="cohort"`` the residual comes from a unit of the same group (plain
    resampling of the pilot's units); with ``pool="all"`` from any pilot unit, treated or
    validation (instances are exchangeable before training: one variance structure is
    estimated from all of them). Residuals are scaled by ``sqrt(n / (n - 1))`` so that their
    variance is the unbiased one.
    """

    times: np.ndarray
    groups: np.ndarray  # the treated cohorts, then inf (validation)
    means: np.ndarray
    resid: np.ndarray
    labels: np.ndarray
    pool: str

    def draw(self, per_cohort: int, n_validation: int, rng) -> Pilot:
        sizes = np.where(np.isinf(self.groups), n_validation, per_cohort)
        group_of = np.repeat(np.arange(self.groups.size), sizes)
        if self.pool == "all":
            rows = rng.integers(0, self.resid.shape[0], group_of.size)
        else:
            rows = np.concatenate([rng.choice(np.flatnonzero(self.labels == g), k)
                                   for g, k in zip(self.groups, sizes)])
        y = self.means[group_of] + self.resid[rows]
        cohorts = self.groups[group_of]
        return Pilot(y, self.times, cohorts)


def pilot_from(source, estimator) -> tuple[Pilot, dict]:
    """The pilot's arrays and the estimator settings to plan with.

    ``source`` is a :class:`~didmem.Panel` (fitted with ``estimator``'s settings) or a
    :class:`~didmem.GroupTimeResult` (its own settings; ``estimator`` is ignored).
    """
    exposure = (dict(source.params) if isinstance(source, GroupTimeResult)
                else estimator.get_params()).get("exposure", 1)
    if exposure != 1:
        raise ParameterError(
            f"power_analysis plans the first exposure's profile; the pilot is for exposure "
            f"{exposure} (history-matched controls), which it cannot resample. Plan with a "
            "first-exposure pilot (DiDEstimator(exposure=1)).")
    if isinstance(source, GroupTimeResult):
        d = source.prepared
        if d.holes is not None:
            raise ParameterError(
                "power_analysis resamples a pilot's complete outcome paths; this pilot result "
                "comes from a panel with holes or repeated cross-sections. Pass a balanced "
                "pilot panel: with holes, Panel(..., balance='drop_incomplete_units'); "
                "repeated cross-sections have no paths to resample (score the same instances "
                "at every checkpoint and pass unit=...).")
        if d.y is None:  # fitted from per-cohort moments (a folder, Panel.scan, Ray)
            raise ParameterError(
                "power_analysis resamples a pilot's units; this pilot result was fitted from "
                "per-cohort moments (a folder read out of core, or on Ray), which keep no "
                "instance's outcome path. Pass the pilot panel itself (a didmem.Panel of the "
                "pilot's rows), or a result fitted on it in memory.")
        if d.x is not None or d.clusters is not None or not np.all(d.w == d.w[0]):
            raise ParameterError(
                "power_analysis resamples units, so the pilot result must come from a panel "
                "without covariates, clusters or unequal weights.")
        block = d.block_of_rows()
        cohorts = np.where(block < d.n_cohorts, d.cohorts[np.minimum(block, d.n_cohorts - 1)],
                           np.inf)
        params = dict(source.params)
        params.update(lower_is_better=False, outcome=None)  # design.y is already oriented
        return Pilot(np.asarray(d.y, float), np.asarray(d.times, float), cohorts), params
    if isinstance(source, Panel):
        if source.has_holes:
            what, remedy = (
                ("has holes (missing instance-checkpoint rows)",
                 "Pass a balanced pilot panel (Panel(..., balance='drop_incomplete_units'))")
                if source.layout == "unbalanced" else
                ("holds repeated cross-sections, which have no paths",
                 "Score the same instances at every checkpoint and build the pilot with "
                 "Panel(..., unit=...)"))
            raise ParameterError(
                f"power_analysis resamples a pilot's complete outcome paths; the pilot panel "
                f"{what}. {remedy}.")
        if source.covariates or source.has_weights or source.clusters is not None:
            raise ParameterError(
                "power_analysis resamples units, so the pilot panel must have no covariates, "
                "clusters or weights.")
        params = estimator.get_params()
        y = np.asarray(source.outcome_matrix(params["outcome"]), float)
        if params["lower_is_better"]:
            y = -y
        params.update(lower_is_better=False, outcome=None)
        return Pilot(y, np.asarray(source.times, float), np.asarray(source.cohorts, float)), params
    if type(source).__name__ == "SavedResult":
        raise ParameterError(
            "power_analysis resamples the pilot's units, which a saved result does not keep: "
            "pass the pilot's panel (didmem.Panel) or the fitted GroupTimeResult instead of "
            "the loaded file.")
    raise ParameterError(
        "The 'source' parameter of power_analysis must be a pilot (a didmem.Panel or a "
        "GroupTimeResult of DiDEstimator) or a didmem.power.Assumptions; got "
        f"{type(source).__name__}.")


def fit_quiet(estimator_cls, params, panel, aggregation=None):
    """Fit (and aggregate), silencing didmem's warnings (small cohorts, band fallbacks)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DidmemWarning)
        res = estimator_cls(**params).fit(panel)
        return res if aggregation is None else res.aggregate(aggregation)


def centred(pilot: Pilot, estimator_cls, params) -> tuple[Pilot, object]:
    """The pilot with every post-treatment cell's estimate removed from its cohort's units.

    Resampling units from the centred pilot draws from a population whose post-treatment
    effects are exactly zero; a stated effect is then added as a shift. Returns the centred
    pilot and the pilot's own fit (its aggregations are the 'pilot' effect).
    """
    res = fit_quiet(estimator_cls, {**params, "n_bootstrap": 0}, pilot.panel())
    frame = res.to_frame()
    post = frame[frame["post"]]
    y = pilot.y.copy()
    col = np.searchsorted(pilot.times, post["time"].to_numpy())
    for g, t, est in zip(post["cohort"].to_numpy(), col, post["estimate"].to_numpy()):
        y[pilot.cohorts == g, t] -= est
    return Pilot(y, pilot.times, pilot.cohorts), res
