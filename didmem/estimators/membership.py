"""Membership inference (the attacks of MIMIR, Duan et al. 2024) as a memorisation estimator."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import EstimationError
from ..inference.bands import normal_quantile
from ..results import CellResult
from ._auc import auc_interval, delong_auc, delong_df
from .base import Alpha, BaseEstimator, Instance, OneOf

__all__ = ["MembershipInferenceEstimator", "MEMBERSHIP_ASSUMPTION", "MEMBER_SETS"]

MEMBERSHIP_ASSUMPTION = (
    "Absent training, members and non-members would score alike: E[Y_c(x; inf) | member] = "
    "E[Y_c(x; inf) | non-member], so any gap in the score between training and validation "
    "instances is memorisation (broken by a distribution shift between the two splits)."
)
#: Who counts as a member at checkpoint ``c``: the instances trained on by ``c`` (cohort
#: ``<= c``), or every training instance (the final model's training set, as MIMIR).
MEMBER_SETS = ("trained", "all")


class MembershipInferenceEstimator(BaseEstimator):
    r"""A membership-inference score read as memorisation: its AUC and its implied profile.

    A membership-inference attack scores each instance (loss, reference-model ratio, zlib
    ratio, Min-K%, Min-K%++: the metrics of :class:`~didmem.backends.TransformersBackend`)
    and calls the high scorers members. At each checkpoint ``c`` this estimator reports

    - the attack's **membership AUC**: training (member) against validation (never-treated)
      instances, with DeLong's standard error and a score interval that keeps its coverage
      with few instances and AUCs near 1 (``extra["auc"]``; per cohort in
      ``extra["cell_auc"]``);
    - the score's **implied profile** on the (cohort, checkpoint) grid, the gap the attack
      thresholds: the mean score of cohort ``g`` minus that of the non-members,

      .. math:: \hat\tau_{\mathrm{MIA}}(g, c) = \bar S_c(g) - \bar S_c(\infty),

      so that :func:`didmem.compare` sets it beside DiD, the difference, extractable and
      architectural estimators, against the truth of the same metric.

    Parameters
    ----------
    score : str, optional
        The panel's outcome that holds the attack's score; may be omitted when the panel has
        one outcome.
    members : {"trained", "all"}
        Members at checkpoint ``c``: the training instances already trained on (cohort
        ``<= c``; the default), or every training instance (MIMIR's split: the final
        model's training set, whatever the checkpoint).
    lower_is_better : bool
        True for a score on which members score *lower* (a loss, a rank): it is negated, as
        by :class:`DiDEstimator`, so the AUC and the profile read "higher = member".
    alpha : float
        One minus the coverage of the intervals of the AUCs and the cells.

    Notes
    -----
    **AUC.** With ``m`` member and ``n`` non-member scores, :math:`\hat\theta` is the
    Mann-Whitney statistic (ties count one half) and ``std_error`` DeLong's
    :math:`\sqrt{S_{10}/m + S_{01}/n}` of the placement values (see
    :func:`didmem.estimators._auc.delong_auc`). The interval (``ci_lower``, ``ci_upper``)
    is Newcombe's (2006) score interval, the :math:`\theta` with
    :math:`(\hat\theta - \theta)^2 \le z^2_{1-\alpha/2}\, r\, V(\theta)`, where
    :math:`V(\theta)` is Hanley & McNeil's variance at :math:`N^* = (m+n)/2 - 1` scores per
    sample (:func:`didmem.estimators._auc.newcombe_variance`) and
    :math:`r = \max(1, (t_{\nu}/z)^2\,\widehat{se}^2 / V(\hat\theta))` widens it where
    DeLong's variance is the larger (heavy-tailed scores), with the t quantile at the
    Welch-Satterthwaite degrees of freedom :math:`\nu` of its two parts; see
    :func:`didmem.estimators._auc.auc_interval`.
    Unlike the Wald interval :math:`\hat\theta \pm z\,\widehat{se}` (whose standard
    error is 0 at an AUC of 1), it stays inside ``[0, 1]``, is never of zero width, and
    depends on the scores only through their ranks. Its coverage, by Monte Carlo on normal,
    Cauchy (heavy-tailed) and discrete (tied) scores with 10 v 30, 25 v 25 and 30 v 100
    instances at AUCs of 0.7, 0.9 and 0.97, is in ``benchmarks/RESULTS.md``
    (``benchmarks/auc_coverage.py``): 0.96-0.98 at an AUC of 0.97 on all three, at least
    0.95 at 0.7 and 0.9 on normal and discrete scores. Limits: on Cauchy scores at an AUC
    of 0.9 with 25 v 25 instances it covers about 0.92 (every interval compared
    under-covers there); with fewer than two scores in a split the interval is NaN; with
    few instances and many ties it is conservative (wider than it needs to be); the
    interval is pointwise, for one checkpoint at a time. An AUC of 0.5 is
    chance: the score does not tell members apart.

    **Profile.** Its assumption (``result.assumption``) is the difference estimator's: had
    the model not been trained on them, members and non-members would score alike. With the
    score ``mean_token_loglik`` the cells equal :class:`DifferenceEstimator`'s. The per-unit
    table (``result.units``) holds each member's score minus the non-members' mean at the
    same checkpoint; a cell's standard error is Welch's,
    :math:`\sqrt{s_g^2 / n_g + s_\infty^2 / n_\infty}`. Pre-treatment cells (``c < g``) are
    reported too: their true effect is zero, so a gap there, or an AUC above 0.5 before any
    training, measures a distribution shift between the splits, not memorisation. Sampling
    weights are ignored; a panel with holes uses the observed scores at each checkpoint
    (a panel holds finite scores only: :class:`~didmem.Panel` refuses a NaN or infinite
    one, such as a Min-K%++ of a one-hot distribution).

    References
    ----------
    Duan, M. et al. (2024). Do membership inference attacks work on large language models?
    COLM 2024 (MIMIR).
    Shi, W. et al. (2024). Detecting pretraining data from large language models. ICLR.
    Zhang, J. et al. (2024). Min-K%++: improved baseline for detecting pre-training data
    from large language models. arXiv:2404.02936.
    DeLong, E. R., DeLong, D. M. & Clarke-Pearson, D. L. (1988). Biometrics 44, 837-845.
    Newcombe, R. G. (2006). Confidence intervals for an effect size measure based on the
    Mann-Whitney statistic. Part 2. Statistics in Medicine 25, 559-573.

    Examples
    --------
    >>> import didmem, pandas as pd
    >>> df = pd.DataFrame({"unit": [1, 1, 2, 2, 3, 3, 4, 4], "time": [1, 2] * 4,
    ...                    "cohort": [2, 2, 2, 2, None, None, None, None],
    ...                    "min_k_logprob": [-3.0, -1.0, -2.5, -1.5, -2.0, -2.0, -3.0, -2.5]})
    >>> panel = didmem.Panel(df, unit="unit", time="time", cohort="cohort",
    ...                      outcome="min_k_logprob")
    >>> result = didmem.MembershipInferenceEstimator(score="min_k_logprob").fit(panel)
    >>> result.extra["auc"][["time", "auc", "n_members"]]
       time  auc  n_members
    0   1.0  NaN          0
    1   2.0  1.0          2
    >>> result.to_frame()["estimate"].tolist()
    [-0.25, 1.0]
    """

    _constraints = {
        "score": Instance(str, allow_none=True),
        "members": OneOf(*MEMBER_SETS),
        "lower_is_better": OneOf(True, False),
        "alpha": Alpha(),
    }

    def __init__(self, *, score=None, members="trained", lower_is_better=False, alpha=0.05):
        super().__init__(score=score, members=members, lower_is_better=lower_is_better,
                         alpha=alpha)

    def _fit(self, panel, params) -> CellResult:
        name = panel.resolve_outcome(params["score"])
        unit, time, values = panel.observed_rows(name)
        values = np.asarray(values, dtype=np.float64)
        score = -values if params["lower_is_better"] else values
        cohort = np.asarray(panel.cohorts, dtype=np.float64)[unit]
        times = np.asarray(panel.times, dtype=np.float64)
        never = np.isinf(cohort)
        if not never.any():
            raise EstimationError(
                "MembershipInferenceEstimator needs non-members: never-treated (validation) "
                "units, with an infinite or missing cohort; the panel has none.")
        if never.all():
            raise EstimationError(
                "MembershipInferenceEstimator needs members: trained instances (a finite "
                "cohort); the panel has only never-treated units.")
        z = normal_quantile(1 - params["alpha"] / 2)
        auc_rows, cell_rows, unit_parts = [], [], []
        for j, c in enumerate(times):
            at = time == j
            outside = score[at & never]
            member = at & ~never & ((cohort <= c) if params["members"] == "trained" else True)
            auc_rows.append(_auc_row(c, score[member], outside, z) | {"time": c})
            n0 = outside.size
            base = outside.mean() if n0 else np.nan
            spread = outside.var(ddof=1) / n0 if n0 > 1 else np.nan
            for g in np.unique(cohort[at & ~never]):
                mine = score[at & (cohort == g)]
                se = np.sqrt(mine.var(ddof=1) / mine.size + spread) if mine.size > 1 \
                    else np.nan
                cell_rows.append({"cohort": g, "time": c, "estimate": mine.mean() - base,
                                  "std_error": se, "n_units": mine.size})
                cell_rows[-1]["auc"] = _auc_row(c, mine, outside, z)
            treated = at & ~never
            unit_parts.append(pd.DataFrame({
                "unit": np.asarray(panel.units)[unit[treated]], "cohort": cohort[treated],
                "time": c, "estimate": score[treated] - base, "std_error": np.nan}))
        cells = pd.DataFrame([{k: v for k, v in r.items() if k != "auc"} for r in cell_rows])
        cell_auc = pd.DataFrame([{"cohort": r["cohort"], "time": r["time"], **r["auc"]}
                                 for r in cell_rows])
        auc = pd.DataFrame(auc_rows)[["time"] + _AUC_COLUMNS]
        return CellResult.from_cells(
            cohort=cells["cohort"], time=cells["time"], estimate=cells["estimate"],
            std_error=cells["std_error"], n_units=cells["n_units"], alpha=params["alpha"],
            estimator=type(self).__name__, params=params, outcome=name,
            assumption=MEMBERSHIP_ASSUMPTION, units=pd.concat(unit_parts, ignore_index=True),
            extra={"auc": auc, "cell_auc": cell_auc},
        )


_AUC_COLUMNS = ["auc", "std_error", "ci_lower", "ci_upper", "n_members", "n_nonmembers"]


def _auc_row(time, members, nonmembers, z) -> dict:
    auc, var = delong_auc(members, nonmembers)
    m, n = int(np.size(members)), int(np.size(nonmembers))
    se = float(np.sqrt(var)) if np.isfinite(var) else float("nan")
    lower, upper = auc_interval(auc, m, n, z, variance=var,
                                df=delong_df(members, nonmembers)) if m > 1 and n > 1 \
        else (float("nan"), float("nan"))
    return {"auc": auc, "std_error": se, "ci_lower": lower, "ci_upper": upper,
            "n_members": m, "n_nonmembers": n}
