"""Callaway & Sant'Anna's staggered difference-in-differences (the paper's Estimator 2)."""

from __future__ import annotations

from ..inference.choices import EST_METHODS
from ._grouptime import INFERENCE_CONSTRAINTS, GroupTimeEstimator
from .base import Integral, Interval, OneOf

__all__ = ["DiDEstimator", "HISTORY_OPTIONS"]

HISTORY_OPTIONS = ("matched", "ignored")
"""How a later exposure's comparison group is chosen (:mod:`._exposure`)."""


class DiDEstimator(GroupTimeEstimator):
    r"""Group-time average treatment effects ATT(g, t) by difference-in-differences.

    For a memorisation study, ATT(g, c) is the expected counterfactual memorisation
    tau(g, c) of the instances trained on in macro-batch ``g`` at checkpoint ``c`` (Lesci et
    al. 2024). Without covariates,

    .. math::

        \widehat{ATT}(g, t) = \big(\bar Y_t(g) - \bar Y_b(g)\big)
                              - \big(\bar Y_t(C) - \bar Y_b(C)\big),

    weighted means over cohort ``g`` and the control group ``C`` of the change from the base
    period ``b`` to ``t``. It follows R ``did`` 2.5 (``att_gt`` with ``xformla = ~1``; with
    no covariates ``dr``, ``ipw`` and ``reg`` coincide) on a balanced panel.

    Parameters
    ----------
    control_group : {"never_treated", "not_yet_treated"}
        Never-treated units (validation instances) only, or also units first treated after
        ``max(t, b) + anticipation``.
    base_period : {"varying", "universal"}
        ``"varying"``: pre-treatment cells compare t with t - 1, post-treatment cells with the
        last period before ``g - anticipation``. ``"universal"``: every cell uses that period;
        its own cell is reported as 0 with a NaN standard error.
    anticipation : float
        Periods (in time units) before ``g`` in which units may already react. A cell counts
        as post-treatment when ``g <= t``.
    est_method : {"dr", "ipw", "reg"}
        Estimator of each cell when the panel has covariates (``Panel(covariates=...)``),
        under parallel trends conditional on them: ``"dr"`` the locally efficient doubly
        robust estimator of Sant'Anna & Zhao (2020, R ``DRDID::drdid_panel``), ``"ipw"``
        normalised inverse probability weighting (``std_ipw_did_panel``), ``"reg"`` outcome
        regression (``reg_did_panel``). The propensity score is a logit and the outcome
        model OLS on the controls, both on the covariates at the cell's base period.
        Controls with a propensity score of 0.995 or more are trimmed (with an
        :class:`~didmem.OverlapWarning`). Without covariates the three coincide and the
        fast grouped-sum path is used.
    n_bootstrap : int
        Multiplier-bootstrap draws; 0 gives analytic standard errors and pointwise
        intervals. With draws and ``small_sample=False``, standard errors and the band come
        from the bootstrap, as in R; with ``small_sample=True`` the draws give the band's
        dependence between cells and the standard errors stay analytic (Welch).
    multiplier : {None, "rademacher", "mammen", "normal"}
        Distribution of the multiplier weights. ``None`` (default): ``"normal"`` with
        ``small_sample=True`` (Gaussian weights: a draw is exactly normal given the data, so
        the sup-t value is the Gaussian one the t adjustment needs; a few units' sign flips
        would bound the draws' tails), ``"rademacher"`` (R's choice) with
        ``small_sample=False``. Mammen's weights have third moment 1 as well.
    alpha : float
        One minus the coverage of intervals and bands.
    cband : bool or None
        Simultaneous (sup-t) band over all cells. None (the default): simultaneous whenever
        there are bootstrap draws, pointwise otherwise. True asks for it and warns
        (:class:`~didmem.InferenceWarning`) when it cannot be had: with ``n_bootstrap=0``,
        and with only two periods (after pre-processing), where the intervals are
        pointwise as in R ``did``. False: pointwise intervals.
    seed : None, non-negative int or numpy.random.Generator
        Seed of the bootstrap.
    outcome : str, optional
        Which of the panel's outcomes to use (needed when it has several).
    lower_is_better : bool
        Flip the outcome's sign first (surprisal, rank, loss), so that memorisation is
        positive.
    small_sample : bool
        ``True`` (default): each cell's variance is Welch's (the plug-in variance of the
        treated and the control mean times ``n / (n - 1)``; with clusters ``G / (G - 1)``)
        and its interval uses the t distribution with Welch-Satterthwaite degrees of
        freedom, at the pointwise level of the bootstrap's sup-t band
        (:mod:`didmem.inference.small_sample`). The band then covers with 10-30 units per
        cohort, where R's under-covers (see the docs' *Inference* page). ``False`` gives R
        did's standard errors and band exactly. Aggregations are corrected likewise,
        block by block.

    Notes
    -----
    Identification rests on parallel trends (untreated outcome changes of cohort ``g`` equal
    those of the control group) and no anticipation beyond ``anticipation`` periods
    (Callaway & Sant'Anna 2021, Assumptions 3-5). The influence function of unit ``i`` is
    ``w_i (d_i - mu_1) / W_1`` in cohort ``g`` and ``-w_i (d_i - mu_0) / W_0`` among the
    controls, with ``d_i = Y_it - Y_ib``; the analytic standard error is
    ``sqrt(sum_i psi_i^2)`` (with a cluster column, of cluster sums), equal to R's
    ``sqrt(mean(IF^2) / n)``. Pre-processing follows R: cohorts after the last period are
    never treated, units treated by the first period plus anticipation are dropped, and
    without never-treated units the latest cohort is only a comparison group and the periods
    from it on are dropped; each of these warns.

    References
    ----------
    Callaway, B. and Sant'Anna, P. H. C. (2021). Difference-in-differences with multiple time
    periods. Journal of Econometrics 225(2), 200-230.
    Lesci, P. et al. (2024). Causal estimation of memorisation profiles. ACL 2024.

    Examples
    --------
    >>> import didmem
    >>> df, truth = didmem.datasets.simulate_panel(seed=1)
    >>> panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort", outcome="y")
    >>> res = didmem.DiDEstimator(n_bootstrap=200, seed=0).fit(panel)
    >>> res.aggregate("instantaneous").to_frame().columns.tolist()
    ['cohort', 'estimate', 'std_error', 'ci_lower', 'ci_upper', 'significant']
    """

    _constraints = {
        "control_group": OneOf("never_treated", "not_yet_treated"),
        "base_period": OneOf("varying", "universal"),
        "anticipation": Interval(0, None),
        "est_method": OneOf(*EST_METHODS),
        **INFERENCE_CONSTRAINTS,
        "exposure": Integral(1),
        "history": OneOf(*HISTORY_OPTIONS),
    }

    def __init__(self, *, control_group="never_treated", base_period="varying", anticipation=0,
                 est_method="dr", n_bootstrap=1000, multiplier=None, alpha=0.05, cband=None,
                 seed=None, outcome=None, lower_is_better=False, small_sample=True,
                 exposure=1, history="matched"):
        super().__init__(control_group=control_group, base_period=base_period,
                         anticipation=anticipation, est_method=est_method,
                         n_bootstrap=n_bootstrap,
                         multiplier=multiplier, alpha=alpha, cband=cband,
                         seed=seed, outcome=outcome,
                         lower_is_better=lower_is_better, small_sample=small_sample,
                         exposure=exposure, history=history)

    def _cells(self, prepared, params, not_yet):
        from ..inference.prepared import did_cells

        return did_cells(prepared, base_period=params["base_period"], not_yet=not_yet,
                         anticipation=params["anticipation"])
