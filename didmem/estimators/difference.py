"""The difference estimator (the paper's Estimator 1)."""

from __future__ import annotations

from ._grouptime import INFERENCE_CONSTRAINTS, GroupTimeEstimator
from .base import Interval, OneOf

__all__ = ["DifferenceEstimator"]


class DifferenceEstimator(GroupTimeEstimator):
    r"""Difference in mean outcomes between a cohort and the controls at each checkpoint.

    .. math:: \hat\tau_{\mathrm{diff}}(g, c) = \bar Y_c(g) - \bar Y_c(\infty)

    for every cohort ``g`` and every checkpoint ``c`` (pre-treatment cells included). It
    identifies memorisation only if, absent training, treated and validation instances would
    score the same (the *difference* assumption): it breaks when the validation set differs
    in distribution from the training sample, which difference-in-differences tolerates.

    Parameters
    ----------
    control_group : {"never_treated", "not_yet_treated"}
        Compare with never-treated units, or also with units first treated after
        ``c + anticipation``.
    anticipation : float
        As in :class:`DiDEstimator`; only used by the pre-processing and the not-yet-treated
        controls.
    n_bootstrap, multiplier, alpha, cband, seed, outcome, lower_is_better, small_sample
        As in :class:`DiDEstimator`.

    Notes
    -----
    The influence function is ``w_i (Y_ic - mu_1) / W_1`` for cohort ``g`` and
    ``-w_i (Y_ic - mu_0) / W_0`` for the controls, so the analytic standard error, the
    bootstrap, the bands, the aggregations and the pre-test (here: pre-treatment level
    differences are zero) are shared with :class:`DiDEstimator`.
    """

    _constraints = {
        "control_group": OneOf("never_treated", "not_yet_treated"),
        "anticipation": Interval(0, None),
        **INFERENCE_CONSTRAINTS,
    }

    def __init__(self, *, control_group="never_treated", anticipation=0, n_bootstrap=1000,
                 multiplier=None, alpha=0.05, cband=None, seed=None,
                 outcome=None, lower_is_better=False, small_sample=True):
        super().__init__(control_group=control_group, anticipation=anticipation,
                         n_bootstrap=n_bootstrap, multiplier=multiplier, alpha=alpha,
                         cband=cband, seed=seed, outcome=outcome,
                         lower_is_better=lower_is_better, small_sample=small_sample)

    def _cells(self, prepared, params, not_yet):
        from ..inference.prepared import level_cells

        return level_cells(prepared, not_yet=not_yet, anticipation=params["anticipation"])
