"""Replicated lab runs: each estimator's error against the exact truth, over seeds.

One lab run gives one draw of every estimator's error. :func:`replicate` runs the lab for
``n_seeds`` master seeds (each its own corpus, sample, data order and initialisation), fits
every estimator on each run's panel and scores it against that run's truth. Over the runs it
reports, per estimator, the mean error with its Monte Carlo standard error (so that "unbiased
here" is a test of mean error = 0), the RMSE, the correlation with the truth and the coverage
of the intervals.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..results._truth import score_cells
from ..results.comparison import aligned_cells
from .._validation import Satisfies, validate_params
from ..errors import ParameterError
from ..panel import Panel
from .config import LabConfig
from .pipeline import RUN_ARGUMENTS, run

__all__ = ["replicate", "Replication", "default_estimators", "summarise_cells"]

_TRUTH_WORDS = {"tau": "the exact truth", "tau_twin": "the twin",
                "tau_nyt": "the exact truth with not-yet-treated controls",
                "tau_total": "the exact total effect (with the spillover)"}
_TRUTHS = tuple(_TRUTH_WORDS)


def default_estimators(config: LabConfig, n_bootstrap: int = 499) -> dict:
    """The estimators a replication fits by default.

    ``"did"`` (:class:`~didmem.DiDEstimator`) and ``"difference"``
    (:class:`~didmem.DifferenceEstimator`), each with a simultaneous band from
    ``n_bootstrap`` draws; with more than one domain also ``"did_domain"``, DiD with
    ``covariates=["domain"]`` (conditional parallel trends, outcome regression).
    """
    from ..estimators import DiDEstimator, DifferenceEstimator

    out = {
        "did": DiDEstimator(n_bootstrap=n_bootstrap, seed=0),
        "difference": DifferenceEstimator(n_bootstrap=n_bootstrap, seed=0),
    }
    if config.n_domains > 1:
        out["did_domain"] = (DiDEstimator(n_bootstrap=n_bootstrap, seed=0,
                                          est_method="reg"), ("domain",))
    return out


@dataclass(frozen=True)
class Replication:
    """What :func:`replicate` measured.

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per estimator; see :func:`summarise_cells`.
    runs : pandas.DataFrame
        One row per seed and estimator: ``seed``, ``estimator``, ``n_cells``, ``mean_error``,
        ``rmse``, ``corr``, ``coverage`` (share of cells whose interval covers the truth) and
        ``covers_all`` (whether the intervals cover every cell at once, which is what a
        simultaneous band promises).
    cells : pandas.DataFrame
        Every scored cell: ``seed``, ``estimator``, ``cohort``, ``time``, ``estimate``,
        ``ci_lower``, ``ci_upper``, ``tau``.
    config : LabConfig
        The settings of the first seed's run (the others differ only in ``seed``).
    metric, cells_kind, truth : str
        The metric, the cells scored (``"post"``, ...) and the truth column used.
    """

    summary: pd.DataFrame
    runs: pd.DataFrame
    cells: pd.DataFrame
    config: LabConfig
    metric: str
    cells_kind: str
    truth: str

    def to_text(self) -> str:
        """The summary as an aligned text table, with the number of runs."""
        n = int(self.runs["seed"].nunique())
        head = (f"{n} lab runs (seeds {int(self.runs['seed'].min())}..."
                f"{int(self.runs['seed'].max())}), {self.metric}, {self.cells_kind} cells, "
                f"against {_TRUTH_WORDS[self.truth]}; "
                "mc_se: Monte Carlo standard error over runs")
        cols = ["estimator", "n_runs", "n_cells", "mean_error", "mc_se", "t", "rmse", "corr",
                "coverage", "covers_all"]
        return head + "\n" + self.summary[cols].to_string(
            index=False, float_format=lambda v: f"{v:.4f}")


def _run_scores(part: pd.DataFrame) -> dict:
    """One run's scores of one estimator (:func:`didmem.results._truth.score_cells`)."""
    score = score_cells(part)
    return {
        "n_cells": score.n_cells,
        "mean_error": score.bias,
        "sq_error": score.rmse ** 2,
        "corr": score.corr,
        "coverage": score.coverage,
        "covers_all": score.covers_all,
    }


def _mean_se(values: np.ndarray) -> tuple:
    values = values[np.isfinite(values)]
    if not len(values):
        return np.nan, np.nan
    se = float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else np.nan
    return float(values.mean()), se


def summarise_cells(cells: pd.DataFrame) -> tuple:
    """Per-run scores and their summary over runs.

    Parameters
    ----------
    cells : pandas.DataFrame
        Columns ``seed``, ``estimator``, ``cohort``, ``time``, ``estimate``, ``ci_lower``,
        ``ci_upper`` and ``tau``.

    Returns
    -------
    (summary, runs) : tuple of pandas.DataFrame
        ``runs`` as in :class:`Replication`. ``summary`` has one row per estimator:
        ``n_runs``, ``n_cells`` (per run), ``mean_error`` (mean over runs of the run's mean
        error over cells) and ``mc_se`` (its Monte Carlo standard error, the standard
        deviation over runs divided by ``sqrt(n_runs)``), ``t = mean_error / mc_se`` and
        ``p_value`` (two-sided, Student t with ``n_runs - 1`` degrees of freedom: the test
        of mean error = 0), ``rmse`` (root of the mean squared error over runs and cells),
        ``corr`` and ``corr_mc_se`` (mean correlation over runs), ``coverage`` and
        ``coverage_mc_se`` (mean share of covered cells), ``covers_all`` and
        ``covers_all_mc_se`` (share of runs whose intervals cover every cell at once).
    """
    from scipy import stats

    rows = []
    for (seed, name), part in cells.groupby(["seed", "estimator"], sort=False):
        rows.append({"seed": seed, "estimator": name, **_run_scores(part)})
    runs = pd.DataFrame(rows)
    summary = []
    for name, part in runs.groupby("estimator", sort=False):
        mean, se = _mean_se(part["mean_error"].to_numpy())
        t = mean / se if se and np.isfinite(se) and se > 0 else np.nan
        n = len(part)
        row = {"estimator": name, "n_runs": n, "n_cells": int(part["n_cells"].iloc[0]),
               "mean_error": mean, "mc_se": se, "t": t,
               "p_value": float(2 * stats.t.sf(abs(t), n - 1)) if np.isfinite(t) else np.nan,
               "rmse": float(np.sqrt(part["sq_error"].mean()))}
        for key in ("corr", "coverage", "covers_all"):
            row[key], row[key + "_mc_se"] = _mean_se(part[key].to_numpy(float))
        summary.append(row)
    runs = runs.assign(rmse=np.sqrt(runs.pop("sq_error")))
    runs = runs[["seed", "estimator", "n_cells", "mean_error", "rmse", "corr", "coverage",
                 "covers_all"]]
    return pd.DataFrame(summary), runs


def _spec(name, spec):
    if isinstance(spec, tuple) and len(spec) == 2 and hasattr(spec[0], "fit"):
        covariates = (spec[1],) if isinstance(spec[1], str) else tuple(spec[1])
        return spec[0], covariates
    if hasattr(spec, "fit"):
        return spec, ()
    raise ParameterError(
        f"replicate: the estimator {name!r} must be an estimator with fit(panel), or a pair "
        f"(estimator, covariates); got {type(spec).__name__}.")


@validate_params({k: v for k, v in RUN_ARGUMENTS.items() if k != "seed"} | {
                  "first_seed": RUN_ARGUMENTS["seed"],
                  "metric": Satisfies(lambda v: isinstance(v, str), "a metric's name"),
                  "estimators": Satisfies(lambda v: v is None or isinstance(v, dict),
                                          "None or a dict {name: estimator}")},
                 owner="didmem.lab.replicate")
def replicate(out_dir, n_seeds: int = 10, *, first_seed: int = 0, quick: bool = True,
              estimators: dict | None = None, metric: str = "mean_token_loglik",
              cells: str = "post", truth: str = "tau", overwrite: bool = False,
              config: LabConfig | None = None, **changes) -> Replication:
    """Run the lab over seeds and score every estimator against each run's truth.

    Parameters
    ----------
    out_dir : path-like
        Each run goes to ``out_dir/seed{s}``; complete runs with the same settings are
        loaded instead of recomputed (see :func:`didmem.lab.run`).
    n_seeds : int
        Number of runs, with master seeds ``first_seed, ..., first_seed + n_seeds - 1``.
    first_seed : int
        The first master seed.
    quick : bool
        Quick scale (default) or demo scale, when ``config`` is not given.
    estimators : dict, optional
        ``{name: estimator}`` or ``{name: (estimator, covariates)}``; each estimator is fit
        on the run's panel of ``metric`` (with those covariate columns). Default:
        :func:`default_estimators`.
    metric : str
        The outcome, one of the runs' metrics.
    cells : {"post", "all", "instantaneous", "residual"}
        Which cells to score (as in :func:`didmem.compare`).
    truth : {"tau", "tau_twin", "tau_nyt", "tau_total"}
        Score against the exact truth of each estimator's estimand (default: the direct
        effect ``tau``, or ``tau_nyt`` for estimators with not-yet-treated controls, as
        :func:`didmem.compare` matches them), or every estimator against one column of the
        run's ``truth.parquet``: the twin's (``tau_twin``), the not-yet-treated estimand
        (``tau_nyt``) or the total effect with the spillover (``tau_total``).
    overwrite : bool
        Passed to :func:`didmem.lab.run`.
    config : LabConfig, optional
        Settings of every run (its ``seed`` is replaced by each run's seed).
    **changes
        Fields of :class:`~didmem.lab.LabConfig` to change, e.g. ``validation_mix=0.9``.

    Returns
    -------
    Replication

    Notes
    -----
    The runs are independent draws of the whole experiment, so the Monte Carlo standard
    error of a mean over runs is the standard deviation over runs divided by
    ``sqrt(n_seeds)``. The cells of one run share its model and sample and are not
    independent; they are averaged within a run first.
    """
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 2:
        raise ParameterError(f"The 'n_seeds' parameter of replicate must be an integer of at "
                             f"least 2. Got {n_seeds!r}.")
    if truth not in _TRUTHS:
        raise ParameterError(f"The 'truth' parameter of replicate must be one of "
                             f"{set(_TRUTHS)}. Got {truth!r}.")
    several = changes.get("runs", config.runs if config is not None else 1)
    if several != 1:
        raise ParameterError(f"replicate scores single runs; got runs={several!r}. Replicate "
                             "each run of several with runs=1, or fit the runs' panel with "
                             "the estimands of several runs.")
    root = Path(out_dir)
    parts, first_config = [], None
    for seed in range(first_seed, first_seed + n_seeds):
        cfg = config.replace(seed=seed, **changes) if config is not None else None
        result = run(root / f"seed{seed}", quick=quick, seed=seed, overwrite=overwrite,
                     config=cfg, **({} if cfg is not None else changes))
        first_config = first_config or result.config
        if metric not in result.config.metrics:
            raise ParameterError(f"replicate: metric {metric!r} is not among the runs' metrics "
                                 f"{list(result.config.metrics)}.")
        specs = estimators if estimators is not None else default_estimators(result.config)
        if truth not in result.truth.columns:
            raise ParameterError(f"replicate: the truth of the run in "
                                 f"{str(result.out_dir)!r} has no column {truth!r} (a run of "
                                 "an older didmem); run it again with overwrite=True.")
        reference = result.truth.assign(tau=result.truth[truth])
        if truth != "tau":  # one column for every estimator, whatever its control group
            reference = reference.drop(columns="tau_nyt", errors="ignore")
        for name, spec in specs.items():
            estimator, covariates = _spec(name, spec)
            panel = Panel(result.panel, unit="unit", time="time", cohort="cohort",
                          outcome=metric, covariates=list(covariates) or None)
            fitted = estimator.fit(panel)
            long = aligned_cells({name: fitted}, reference, metric=metric, cells=cells)
            parts.append(long.assign(seed=seed))
    all_cells = pd.concat(parts, ignore_index=True)
    all_cells = all_cells[["seed", "estimator", "cohort", "time", "estimate", "ci_lower",
                           "ci_upper", "tau"]]
    summary, runs = summarise_cells(all_cells)
    return Replication(summary=summary, runs=runs, cells=all_cells, config=first_config,
                       metric=metric, cells_kind=cells, truth=truth)
