"""Memorisation across training runs: each run's profile, the pooled one, and each instance
compared with itself across runs (a panel built with ``Panel(..., run=...)``)."""

from __future__ import annotations

from ..inference.choices import RUN_TRENDS
from ._grouptime import INFERENCE_CONSTRAINTS
from .base import BaseEstimator, OneOf
from .did import DiDEstimator

__all__ = ["RunsEstimator"]


class RunsEstimator(BaseEstimator):
    r"""Three profiles of a panel of several training runs.

    1. **Each run's profile**: :class:`~didmem.DiDEstimator` on each run's panel (its
       cohorts are its own data order), with its own band.
    2. **The pooled profile**: the mean over runs of the runs' tau_r(g, c), with runs a
       random factor: its band adds the between-run variance (estimated from the spread of
       the run estimates beyond their instance sampling) to the instances' (the runs'
       influence functions summed per instance), with Satterthwaite t quantiles
       (:func:`~didmem.inference.runs.pooled.pooled_cells`). The summary states the between-run
       standard deviation and its share of the band's variance.
    3. **The within-instance comparison**: at checkpoint ``c``, the instances first trained
       at ``g`` in one run against the same instances in the runs that have not trained
       them by ``c``, each differenced against its own base-period score
       (:func:`~didmem.inference.runs.within.within_cells`); influence functions per
       instance, so its band (with the small-sample correction), and the Wald pre-test of
       its pre-treatment cells, are the shared ones of every group-time fit
       (:class:`~didmem.inference.runs.within.WithinInfluence`), and it aggregates as a fit
       does (``RunsResult.within.aggregate``). Its cells also carry the efficient
       combination with the pooled DiD with the runs held fixed (``combined_*`` columns,
       :func:`~didmem.inference.runs.combined.combine_cells`).

    Parameters
    ----------
    control_group, base_period, anticipation, est_method, n_bootstrap, multiplier, alpha,
    cband, seed, outcome, lower_is_better, small_sample
        As :class:`~didmem.DiDEstimator` (the per-run fits take them as they are; the
        pooled and within-instance bands use ``n_bootstrap`` Gaussian draws, ``alpha`` and
        ``cband``, and the within-instance cells the same base period and anticipation).
    run_trends : {"never_treated", "none"}
        How the within-instance comparison removes a run's shift at a checkpoint common to
        its instances: subtract the mean of the instances that no run trains (the default;
        needs two or more), or nothing (runs that differ only in their data order).

    Notes
    -----
    The estimands and their assumptions are on the docs' *Estimands* page (section
    *Several runs*); when each is right, on the *Several runs* page. The per-run seeds of
    the bootstrap are drawn from ``seed``.

    Examples
    --------
    >>> import didmem
    >>> df, truth = didmem.datasets.simulate_runs(n_runs=3, seed=0)
    >>> panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y",
    ...                      run="run")
    >>> res = didmem.RunsEstimator(n_bootstrap=200, seed=0).fit(panel)
    >>> sorted(res.to_frame()["estimand"].unique())
    ['pooled', 'run', 'within_instance']
    """

    _constraints = {
        **{name: DiDEstimator._constraints[name]
           for name in ("control_group", "base_period", "anticipation", "est_method")},
        **INFERENCE_CONSTRAINTS,
        "run_trends": OneOf(*RUN_TRENDS),
    }
    _takes_runs = True

    def __init__(self, *, control_group="never_treated", base_period="varying", anticipation=0,
                 est_method="dr", n_bootstrap=1000, multiplier=None, alpha=0.05, cband=None,
                 seed=None, outcome=None, lower_is_better=False, small_sample=True,
                 run_trends="never_treated"):
        super().__init__(control_group=control_group, base_period=base_period,
                         anticipation=anticipation, est_method=est_method,
                         n_bootstrap=n_bootstrap, multiplier=multiplier, alpha=alpha,
                         cband=cband, seed=seed, outcome=outcome,
                         lower_is_better=lower_is_better, small_sample=small_sample,
                         run_trends=run_trends)

    def _fit(self, panel, params):
        from ._runs_fit import fit_runs

        return fit_runs(panel, params)
