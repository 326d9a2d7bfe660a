"""The result of a fit across training runs: each run's profile, the pooled one and the
within-instance comparison (:class:`~didmem.RunsEstimator`).

:class:`RunsResult` is saved as one parquet table (``save``; read back with
:func:`didmem.load_result`) whose rows are every run's cells (``estimand = "run"``, ``run``
set), the pooled profile's (``estimand = "pooled"``, ``run`` empty) and the within-instance
comparison's (``estimand = "within_instance"``, ``run`` empty). Each run's part reads back as
a :class:`~didmem.SavedResult` of that run's fit (its aggregations, pre-tests and summary in
the file's metadata), so a saved result reports what the fitted one did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..errors import ParameterError
from .common import SIGN_NOTE, CellTable, PicklableProxies, level_label, profile_matrix
from ._table_file import TableFile

__all__ = ["RunsProfile", "RunsResult", "ESTIMANDS"]

ESTIMANDS = {
    "run": "each run's profile: DiD on the run's panel (parallel trends across instances "
           "within the run)",
    "pooled": "the mean over runs of each run's tau_r(g, c), runs a random factor (runs "
              "drawn independently from one population of runs; the band adds the "
              "between-run variance)",
    "within_instance": "each instance against itself in the runs that have not trained it "
                       "yet (runs exchangeable given the instance: its untreated change "
                       "has the same expectation in every run)",
}
"""The ``estimand`` values of a runs table and what each one is, in words."""

WITHIN_TARGET = ("its target is the effect averaged over these runs' (run, instance) pairs, "
                 "with the runs held fixed: not the mean over a population of runs (the "
                 "pooled profile's), from which it differs when the runs' effects differ")
"""What the within-instance band covers (issue 50), stated in the summary and the report."""


@dataclass(frozen=True)
class _WithinFit:
    """What an aggregation reads of a fit: the cells' estimates, the inference, the band."""

    estimates: np.ndarray
    inference: Any
    band: str


@dataclass(frozen=True, eq=False)
class RunsProfile(CellTable, PicklableProxies):
    """The pooled or the within-instance profile of a fit across runs.

    Attributes
    ----------
    estimand : {"pooled", "within_instance"}
    outcome : str
    alpha : float
    cells : pandas.DataFrame
        One row per (cohort, time): ``cohort, time, base_time, event_time, post, estimate,
        std_error, ci_lower, ci_upper, significant`` and the estimand's own columns (pooled:
        ``df`` Satterthwaite's effective degrees of freedom of its variance, ``between_sd``
        the between-run standard deviation of
        tau_r(g, c), ``instance_se`` the standard error with the runs held fixed, ``n_runs``;
        within-instance: ``n_pairs`` (run, instance) pairs with a control run,
        ``n_instances``, and the efficient combination with the pooled DiD with the runs held
        fixed, ``combined_estimate``, ``combined_std_error`` and ``combined_weight`` (the
        weight on the within-instance estimate; :mod:`didmem.inference.runs.combined`:
        never a larger variance than either, on the runs-held-fixed target)).
    critical_value : float
        The pooled band's value, simulated from its variance components with the runs'
        spread (:func:`~didmem.inference.runs.pooled.pooled_band`); the within-instance band's is
        the shared one of every group-time fit: with the small-sample correction, the largest
        of the cells' t quantiles (each cell's interval uses its own, with its Welch degrees
        of freedom, at the sup-t value's pointwise level; its instances are the clusters).
    band : {"simultaneous", "pointwise"}
    pretest : tuple or None
        The within-instance comparison's Wald pre-test ``(statistic, df, pvalue)`` of its
        pre-treatment cells; None for the pooled profile.
    n_dropped : int
        Cells that some run lacks, left out of the pooled profile.
    """

    estimand: str
    outcome: str
    alpha: float
    cells: pd.DataFrame = field(repr=False)
    critical_value: float
    band: str
    pretest: tuple | None = None
    n_dropped: int = 0
    #: the within-instance comparison's shared inference (its aggregations'); None for the
    #: pooled profile and for a result read back from a file
    inference: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "cells", self.cells.reset_index(drop=True).copy())

    @property
    def params(self) -> Mapping[str, Any]:
        """``{"estimand": ...}`` (what the figures read of a result's parameters)."""
        return MappingProxyType({"estimand": self.estimand})

    @property
    def assumption(self) -> str:
        return ESTIMANDS[self.estimand]


    def profile(self, value: str = "estimate", significant_only: bool = False) -> pd.DataFrame:
        """The cohort x time matrix of one column of :meth:`to_frame`."""
        return profile_matrix(self.to_frame(), value, significant_only)

    def aggregate(self, kind: str = "simple", **options):
        """Aggregate the within-instance comparison's cells, as
        :meth:`GroupTimeResult.aggregate <didmem.results.cells.GroupTimeResult.aggregate>`
        does a fit's (the same layouts, standard errors, small-sample correction and band),
        with the cohorts weighted by their (run, instance) pairs, fixed by the runs' data
        orders (no estimated-weights term).

        The pooled profile has none (its band is its own; aggregate each run's profile,
        ``RunsResult.per_run[run].aggregate()``), nor has a profile read back from a file.
        """
        if self.inference is None:
            where = ("read back from a file (aggregate the fitted result)"
                     if self.estimand == "within_instance" else
                     "pooled over runs, whose band is its own")
            raise ParameterError(
                f"The {self.estimand} profile across runs has no aggregations here: it is "
                f"{where}; read its cells (to_frame), or aggregate one run's profile: "
                "RunsResult.per_run[run].aggregate().")
        from ..inference.runs.within import fixed_weights
        from .aggregations import AggregateResult, build_aggregation

        inference = self.inference
        fit = _WithinFit(estimates=inference.influence.estimates, inference=inference,
                         band=self.band)
        spec = build_aggregation(inference.prepared, inference.cells, fit.estimates, kind,
                                 **options)
        return AggregateResult._from_spec(fit, fixed_weights(spec))

    def plot(self, kind: str = "profile", **options):
        """The profile heatmap (``kind="profile"``, :func:`didmem.results.plotting.plot_profile`)."""
        from .plotting import plot_profile

        if kind != "profile":
            raise ParameterError(f"A profile across runs draws kind='profile' only; got "
                                 f"{kind!r}. RunsResult.plot() draws the runs side by side.")
        return plot_profile(self, **options)

    def __repr__(self) -> str:
        return (f"<RunsProfile {self.estimand} outcome={self.outcome!r}: {len(self.cells)} "
                f"cells, {self.band} band>")


def _post(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["post"].astype(bool) & np.isfinite(frame["std_error"])]


@dataclass(frozen=True, eq=False)
class RunsResult(TableFile, PicklableProxies):
    """Each run's profile, the pooled profile and the within-instance comparison.

    Attributes
    ----------
    run_column : str
        The panel's run column.
    runs : tuple
        The run labels, sorted.
    per_run : Mapping
        Run label -> its :class:`~didmem.GroupTimeResult` (a :class:`~didmem.SavedResult`
        when read from a file): the DiD of that run alone.
    pooled, within : RunsProfile
        The pooled profile (runs a random factor) and the within-instance comparison.
    params : Mapping
        The :class:`~didmem.RunsEstimator` parameters.
    outcome : str
    lower_is_better : bool
    alpha : float
    n_units : int
        Instances (the same in every run).
    """

    run_column: str
    runs: tuple
    per_run: Mapping[Any, Any] = field(repr=False)
    pooled: RunsProfile = field(repr=False)
    within: RunsProfile = field(repr=False)
    params: Mapping[str, Any] = field(repr=False)
    outcome: str
    lower_is_better: bool
    alpha: float
    n_units: int

    _proxies = ("per_run", "params")

    def __post_init__(self):
        object.__setattr__(self, "per_run", MappingProxyType(dict(self.per_run)))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @property
    def estimator(self) -> str:
        """``"RunsEstimator"``: the estimator that fitted the runs."""
        return "RunsEstimator"

    # ------------------------------------------------------------------ tables
    def to_frame(self) -> pd.DataFrame:
        """Every row: each run's cells (``run`` set, ``estimand="run"``), then the pooled
        profile's and the within-instance comparison's (``run`` empty)."""
        parts = [self.per_run[r].to_frame().assign(run=str(r), estimand="run")
                 for r in self.runs]
        parts += [self.pooled.to_frame().assign(run=None, estimand="pooled"),
                  self.within.to_frame().assign(run=None, estimand="within_instance")]
        frame = pd.concat(parts, ignore_index=True)
        frame["run"] = frame["run"].astype(object).where(frame["run"].notna(), None)
        first = ["run", "estimand"]
        return frame[first + [c for c in frame.columns if c not in first]]

    def run_frame(self) -> pd.DataFrame:
        """The runs' estimates side by side: one row per (cohort, time) of the pooled
        profile, a column per run, then the pooled and within-instance estimates."""
        index = ["cohort", "time"]
        out = self.pooled.to_frame()[index + ["estimate"]].rename(
            columns={"estimate": "pooled"})
        for r in self.runs:
            est = self.per_run[r].to_frame()[index + ["estimate"]].rename(
                columns={"estimate": f"run {r}"})
            out = out.merge(est, on=index, how="left")
        within = self.within.to_frame()[index + ["estimate"]].rename(
            columns={"estimate": "within_instance"})
        return out.merge(within, on=index, how="left")

    # ------------------------------------------------------------------ the spread
    def between_runs(self) -> dict:
        """How much memorisation depends on the run, over the pooled post-treatment cells.

        Returns
        -------
        dict
            ``between_sd``: root mean square over the cells of the between-run standard
            deviation of tau_r(g, c); ``mean_effect``: mean absolute pooled estimate;
            ``relative``: their ratio; ``run_share``: mean share of the pooled band's variance
            that is the between-run part; ``n_cells``.
        """
        post = _post(self.pooled.cells)
        if post.empty:
            nan = math.nan
            return {"between_sd": nan, "mean_effect": nan, "relative": nan, "run_share": nan,
                    "n_cells": 0}
        sd = float(np.sqrt(np.mean(post["between_sd"] ** 2)))
        effect = float(np.mean(np.abs(post["estimate"])))
        var = post["std_error"] ** 2
        share = float(np.mean(np.clip((var - post["instance_se"] ** 2) / var, 0, 1)))
        return {"between_sd": sd, "mean_effect": effect,
                "relative": sd / effect if effect > 0 else math.nan, "run_share": share,
                "n_cells": int(len(post))}

    def spread_words(self) -> str:
        """The between-run spread in one sentence."""
        b = self.between_runs()
        if b["n_cells"] == 0:
            return "No pooled post-treatment cell has a standard error: no spread to state."
        rel = ("" if not np.isfinite(b["relative"])
               else f", {100 * b['relative']:.0f}% of the mean memorisation {b['mean_effect']:.4g}")
        if b["between_sd"] == 0:
            return (f"The runs' estimates spread no more than their instance sampling explains "
                    f"(between-run SD 0 over {b['n_cells']} post-treatment cells): memorisation "
                    "does not measurably depend on the run.")
        return (f"Memorisation varies between runs with a standard deviation of "
                f"{b['between_sd']:.4g} per cell (root mean square over {b['n_cells']} "
                f"post-treatment cells{rel}); the run accounts for {100 * b['run_share']:.0f}% "
                "of the pooled band's variance.")

    def summary(self) -> str:
        """The three profiles in words and numbers."""
        lines = [f"Memorisation across {len(self.runs)} runs (column {self.run_column!r}) of "
                 f"{self.outcome!r}: {self.n_units} instances, {level_label(self.alpha)} "
                 "bands"]
        lines.append("Each run (DiD within the run):")
        for r in self.runs:
            post = _post(self.per_run[r].to_frame())
            lines.append(f"  run {r}: {len(post)} post-treatment cells, mean {_mean(post)}, "
                         f"{int(post['significant'].sum())} significant")
        pooled = _post(self.pooled.cells)
        lines.append(f"Pooled (runs a random factor; {self.pooled.band} band, critical value "
                     f"{self.pooled.critical_value:.3f}, simulated with the runs' spread): "
                     f"{len(pooled)} post-treatment cells, mean {_mean(pooled)}, "
                     f"{int(pooled['significant'].sum())} significant"
                     + (f"; {self.pooled.n_dropped} cells some run lacks are left out"
                        if self.pooled.n_dropped else ""))
        lines.append("  " + self.spread_words())
        within = _post(self.within.cells)
        ratio = self.se_ratio()
        lines.append(f"Within-instance ({self.within.band} band, critical value "
                     f"{self.within.critical_value:.3f}): {len(within)} post-treatment cells "
                     f"with a control run, mean {_mean(within)}, "
                     f"{int(within['significant'].sum())} significant"
                     + ("" if not np.isfinite(ratio) else
                        f"; median standard error {ratio:.2f} x the pooled DiD's with runs "
                        "held fixed"))
        lines.append("  " + WITHIN_TARGET)
        stat, df, p = self.within.pretest if self.within.pretest else (math.nan, 0, math.nan)
        lines.append("  pre-test (Wald, runs exchangeable given the instance): "
                     + (f"chi2({df}) = {stat:.3f}, p = {p:.3g}" if df else
                        "no pre-treatment cell to test"))
        lines.append(SIGN_NOTE)
        return "\n".join(lines)

    def se_ratio(self) -> float:
        """Median over the shared post-treatment cells of the within-instance standard error
        over the pooled DiD's with the runs held fixed (``instance_se``): below 1, comparing
        each instance with itself buys a tighter band on the same data."""
        index = ["cohort", "time"]
        both = _post(self.within.cells)[index + ["std_error"]].merge(
            _post(self.pooled.cells)[index + ["instance_se"]], on=index)
        if both.empty:
            return math.nan
        return float(np.median(both["std_error"] / both["instance_se"]))

    def plot(self, **options):
        """The runs side by side (:func:`didmem.results.plotting.plot_runs`)."""
        from .plotting import plot_runs

        return plot_runs(self, **options)

    def __repr__(self) -> str:
        return (f"<RunsResult {len(self.runs)} runs outcome={self.outcome!r}: "
                f"{len(self.pooled.cells)} pooled cells, {len(self.within.cells)} "
                "within-instance cells>")

    # ------------------------------------------------------------------ the file
    FILE_KIND, FILE_WHAT = "runs", "runs results"

    def _file_contents(self):
        from .saving import result_meta

        frame = self.to_frame()
        first = self.per_run[self.runs[0]].to_frame()
        settings = {
            "run_column": self.run_column, "runs": list(self.runs),
            "per_run": {str(r): _run_meta(self.per_run[r], result_meta) for r in self.runs},
            "run_columns": {c: str(t) for c, t in first.dtypes.items()},
            "profiles": {p.estimand: _profile_meta(p) for p in (self.pooled, self.within)},
            "params": dict(self.params), "outcome": self.outcome,
            "lower_is_better": self.lower_is_better, "alpha": self.alpha,
            "n_units": int(self.n_units),
        }
        return frame, settings

    @classmethod
    def _from_file(cls, frame, settings: dict) -> "RunsResult":
        from .saving import saved_from_frame

        runs = tuple(settings["runs"])
        dtypes = settings["run_columns"]
        run_col = frame["run"].astype(object)
        per_run = {}
        for r in runs:
            rows = frame[(frame["estimand"] == "run") & (run_col == str(r))]
            cells = rows[list(dtypes)].astype(dtypes).reset_index(drop=True)
            per_run[r] = saved_from_frame(cells, settings["per_run"][str(r)], f"run {r}")
        profiles = {}
        for name, meta in settings["profiles"].items():
            rows = frame[frame["estimand"] == name]
            cells = rows[meta["columns"]].astype(meta["dtypes"]).reset_index(drop=True)
            pretest = meta["pretest"]
            profiles[name] = RunsProfile(
                estimand=name, outcome=settings["outcome"], alpha=float(settings["alpha"]),
                cells=cells, critical_value=float(meta["critical_value"]), band=meta["band"],
                pretest=None if pretest is None else (
                    _nan(pretest[0]), int(pretest[1]), _nan(pretest[2])),
                n_dropped=int(meta["n_dropped"]))
        return cls(run_column=settings["run_column"], runs=runs, per_run=per_run,
                   pooled=profiles["pooled"], within=profiles["within_instance"],
                   params=settings["params"], outcome=settings["outcome"],
                   lower_is_better=bool(settings["lower_is_better"]),
                   alpha=float(settings["alpha"]), n_units=int(settings["n_units"]))


def _mean(frame: pd.DataFrame) -> str:
    return "-" if frame.empty else f"{frame['estimate'].mean():.4g}"


def _nan(value) -> float:
    return math.nan if value is None else float(value)


def _finite_or_none(value):
    value = float(value)
    return value if math.isfinite(value) else None


def _run_meta(result, result_meta) -> dict:
    """One run's metadata as a results file of its own holds it (a fitted or a saved
    result's: a loaded file saved again keeps what it read)."""
    from .saving import FORMAT_VERSION

    return {"format_version": FORMAT_VERSION, **result_meta(result)}


def _profile_meta(profile: RunsProfile) -> dict:
    pretest = profile.pretest
    return {"critical_value": float(profile.critical_value), "band": profile.band,
            "n_dropped": int(profile.n_dropped),
            "columns": list(profile.cells.columns),
            "dtypes": {c: str(t) for c, t in profile.cells.dtypes.items()},
            "pretest": None if pretest is None else [
                _finite_or_none(pretest[0]), int(pretest[1]), _finite_or_none(pretest[2])]}
