"""Roth & Sant'Anna's efficient estimator for random (staggered) timing."""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import DataDroppedWarning, ParameterError
from .._validation import Count
from .base import Alpha, BaseEstimator, Instance, Interval, OneOf, Seed

__all__ = ["RandomTimingEstimator"]


class RandomTimingEstimator(BaseEstimator):
    r"""Efficient estimation and exact tests when the training order assigns cohorts at random.

    For every cell ``(g, c)`` and for the aggregations ``simple``, ``group``, ``calendar`` and
    ``dynamic``, the estimate is

    .. math:: \hat\theta_\beta = \hat\theta_0 - \beta \hat X,

    with ``theta_0`` the difference in mean outcomes between the cohort(s) and their
    controls, and ``X`` the same difference in the checkpoint before treatment.
    ``beta = 0`` is the difference in means, ``beta = 1`` Callaway & Sant'Anna's estimator
    (R ``staggered_cs``; with ``control_group="last_treated"`` Sun & Abraham's,
    ``staggered_sa``); the default ``beta=None`` is the plug-in efficient
    ``beta* = Cov(X, theta_0) / Var(X)``, never less precise than either.

    ``fit`` takes a :class:`~didmem.Panel` (balanced, no covariates) or per-cohort
    :class:`~didmem.inference.moments.cohort.CohortMoments` without weights (then no Fisher test).

    Parameters
    ----------
    beta : float or None
        The coefficient on the pre-treatment difference; None for the plug-in efficient one.
    control_group : {"not_yet_treated", "last_treated"}
        The cohorts first treated after ``max(g, c)``, or the last cohort only.
    randomised : {"training", "all"}
        Whose cohorts the design randomised: the training instances among themselves
        (never-treated units keep their label in the Fisher test), or all instances (the
        validation split was itself random).
    n_fisher : int
        Permutations of the Fisher randomisation test (0: none).
    n_draws : int
        Gaussian draws for the simultaneous bands (0: pointwise).
    alpha : float
    seed : None, int or Generator
    outcome : str, optional
    lower_is_better : bool
        The outcome is negated first (a loss: lower is better).

    Notes
    -----
    ``std_error`` is the design-based standard error of Roth & Sant'Anna (2023, Prop. 3.1
    with their refinement), ``std_error_neyman`` its conservative Neyman bound; both follow
    R ``staggered`` 1.2.3 to 1e-8 (tests/test_reference_random_timing.py). Cohorts with a
    single unit are dropped, as ``staggered`` does; with ``beta=1`` so are cohorts treated
    at or before the first checkpoint (``staggered_cs``/``staggered_sa`` do). Bands use the
    Neyman covariance (conservative). The Fisher p-values are studentised by the Neyman
    standard error. See ``docs/random_timing.rst`` for the formulas and for when random
    timing holds in language-model training.

    References
    ----------
    Roth, J. and Sant'Anna, P. H. C. (2023). Efficient estimation for staggered rollout
    designs. Journal of Political Economy Microeconomics 1(4), 669-709.
    """

    _constraints = {
        "beta": Interval(None, None, allow_none=True),
        "control_group": OneOf("not_yet_treated", "last_treated"),
        "randomised": OneOf("training", "all"),
        "n_fisher": Count(0),  # each permutation is a fit: bounded like n_simulations
        "n_draws": Count(0),
        "alpha": Alpha(),
        "seed": Seed(),
        "outcome": Instance(str, allow_none=True),
        "lower_is_better": OneOf(True, False),
    }

    def __init__(self, *, beta=None, control_group="not_yet_treated", randomised="training",
                 n_fisher=0, n_draws=1000, alpha=0.05, seed=None, outcome=None,
                 lower_is_better=False):
        super().__init__(beta=beta, control_group=control_group, randomised=randomised,
                         n_fisher=n_fisher, n_draws=n_draws, alpha=alpha, seed=seed,
                         outcome=outcome, lower_is_better=lower_is_better)

    _input_hint = ("Build one with didmem.Panel(df, unit=..., time=..., cohort=..., "
                   "outcome=...), scan a parquet folder with didmem.Panel.scan(...), or pass "
                   "per-cohort CohortMoments.")

    def _accepts(self, data) -> bool:
        from ..inference.moments.cohort import CohortMoments
        from ..panel import Panel
        from ..panel.scan import ParquetPaths

        return isinstance(data, (Panel, ParquetPaths, CohortMoments))

    def _fit(self, panel, params):
        from ..inference.moments.cohort import CohortMoments
        from ..inference.random_timing.fit import fit_random_timing
        from ..results.random_timing import RandomTimingResult

        from ..inference.moments.cohort import dataset_moments
        from ..panel.scan import ParquetPaths

        name = type(self).__name__
        if isinstance(panel, CohortMoments):
            return self._fit_moments(panel, params)
        if isinstance(panel, ParquetPaths):  # a folder: its moments, as the group-time fit
            if params["n_fisher"]:
                raise ParameterError(f"{name}: the Fisher test permutes the instances' paths, "
                                     "which a folder's moments do not keep; fit a didmem.Panel "
                                     "of the folder's rows, or pass n_fisher=0.")
            moments = dataset_moments(panel, map_items=panel.map_items)
            return self._fit_moments(moments, {**params,
                                               "outcome": params["outcome"] or panel.outcome})
        if panel.covariates:
            raise ParameterError(f"{name} takes no covariates; the panel has "
                                 f"{list(panel.covariates)}.")
        # the design-based estimator and its variance are of equally weighted instances
        # assigned one by one: weights or clusters would be ignored, silently
        for role, column in (("weights", panel.weights_column), ("cluster", panel.cluster_column)):
            if column is not None:
                raise ParameterError(
                    f"{name} weighs every instance equally and assigns them one by one (Roth "
                    f"& Sant'Anna's design); the panel has {role} column {column!r}, which it "
                    f"would ignore. Build the panel without {role}=..., or use DiDEstimator.")
        outcome = panel.resolve_outcome(params["outcome"])
        y = np.array(panel.outcome_matrix(outcome), dtype=np.float64)
        if params["lower_is_better"]:
            y = -y
        if not np.all(np.isfinite(y)):
            bad = np.flatnonzero(~np.isfinite(y).all(axis=1))
            raise ParameterError(f"{name} needs finite outcomes; units "
                                 f"{panel.units[bad[:5]].tolist()} have NaN or inf.")
        times = np.asarray(panel.times, dtype=np.float64)
        cohorts = np.asarray(panel.cohorts, dtype=np.float64)
        values, counts = np.unique(cohorts, return_counts=True)
        kept = _kept_cohorts(name, values, counts, times[0], params["beta"])
        keep = np.isin(cohorts, values[kept])
        cohorts, y = cohorts[keep], y[keep]
        randomised = (np.ones(cohorts.size, dtype=bool) if params["randomised"] == "all"
                      else np.isfinite(cohorts))
        design, tables = fit_random_timing(
            times, cohorts, y, beta=params["beta"],
            last_treated=params["control_group"] == "last_treated", randomised=randomised,
            alpha=params["alpha"], n_draws=params["n_draws"], n_fisher=params["n_fisher"],
            seed=params["seed"])
        return RandomTimingResult(estimator=name, params=params, outcome=outcome,
                                  randomised=params["randomised"], design=design,
                                  tables=tables)

    def _fit_moments(self, moments, params):
        """The fit from per-cohort moments (no Fisher test: it permutes the paths)."""
        from ..inference.random_timing.design import TimingDesign
        from ..inference.random_timing.fit import fit_random_timing
        from ..results.random_timing import RandomTimingResult

        name = type(self).__name__
        if params["n_fisher"]:
            raise ParameterError(f"{name}: the Fisher test permutes the instances' paths; fit "
                                 "a didmem.Panel, or pass n_fisher=0 with moments.")
        if params["lower_is_better"]:
            moments = moments.negated()
        kept = _kept_cohorts(name, moments.cohorts, moments.count, moments.times[0],
                             params["beta"])
        if not kept.all():
            moments = moments.select(kept)
        design, tables = fit_random_timing(
            None, None, None, beta=params["beta"],
            last_treated=params["control_group"] == "last_treated", randomised=None,
            alpha=params["alpha"], n_draws=params["n_draws"], n_fisher=0,
            seed=params["seed"], design=TimingDesign.from_moments(moments))
        return RandomTimingResult(estimator=name, params=params,
                                  outcome=params["outcome"] or "",
                                  randomised=params["randomised"], design=design,
                                  tables=tables)


def _kept_cohorts(name, cohorts, counts, first_time, beta) -> np.ndarray:
    """Which ``cohorts`` (with ``counts`` instances each) the estimator keeps, as R
    ``staggered`` does: a cohort of a single instance has no covariance, and with ``beta=1``
    a cohort treated at or before the first checkpoint has no pre-treatment period. Each drop
    is said in a :class:`~didmem.errors.DataDroppedWarning`."""
    keep = np.asarray(counts) > 1
    if not keep.all():
        warnings.warn(f"{name}: cohorts {np.asarray(cohorts)[~keep].tolist()} have a single "
                      "instance and are dropped (their covariance is undefined), as R "
                      "staggered does.", DataDroppedWarning, stacklevel=4)
    if beta == 1:
        early = keep & (np.asarray(cohorts) <= first_time)
        if early.any():
            warnings.warn(f"{name}: {int(np.asarray(counts)[early].sum())} instances of "
                          "cohorts treated at or before the first checkpoint are dropped "
                          "(beta=1 is not defined for them), as R staggered_cs/staggered_sa "
                          "do.", DataDroppedWarning, stacklevel=4)
            keep &= ~early
    return keep
