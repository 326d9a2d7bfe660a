"""Membership-inference scores judged against the lab's counterfactual truth.

For each score of a lab run (a metric of its panel) :func:`membership_comparison` puts side
by side what a membership-inference study reports and what the twin and exact runs know:

- the attack's membership AUC of the analysed (training) against the validation instances
  at the last checkpoint, and at the last checkpoint before any analysed instance was
  trained (``auc_untrained``: no memorisation at all, so anything but 0.5 there is the
  splits' distribution shift, the bias MIMIR describes);
- the rank correlation (Spearman) of each analysed instance's score gap (its score minus
  the validation mean, at the last checkpoint) with its own counterfactual effect
  (``truth_units.parquet``: the direct effect of training on it, of the same metric);
- the error of the score's implied cohort profile (:class:`~didmem.MembershipInferenceEstimator`)
  against the truth ``tau(g, c)``, beside DiD's on the same metric with not-yet-treated and
  with never-treated controls, and DiD on the training instances alone (not-yet-treated
  controls, the validation split left out: what no shift of the validation split can bias).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import DataDroppedWarning, ParameterError

__all__ = ["membership_comparison", "MIA_SCORES", "COMPARISON_COLUMNS"]

#: The membership-inference scores the lab's backend computes (with the plain loss).
MIA_SCORES = ("mean_token_loglik", "min_k_logprob", "min_k_plus_plus", "zlib_ratio",
              "reference_ratio")
#: The columns of :func:`membership_comparison`.
COMPARISON_COLUMNS = ["score", "auc", "auc_lower", "auc_upper", "auc_untrained",
                      "auc_untrained_lower", "auc_untrained_upper", "spearman", "mia_bias",
                      "mia_rmse", "mia_pre_gap", "did_nyt_bias", "did_nyt_rmse",
                      "did_never_bias", "did_never_rmse", "did_trained_bias",
                      "did_trained_rmse"]


def membership_comparison(result, scores=None, *, alpha: float = 0.05) -> pd.DataFrame:
    """One row per score: its attack's AUCs, its agreement with the per-instance truth, and
    its implied profile's error beside DiD's.

    Parameters
    ----------
    result : didmem.lab.LabResult
        A lab run (:func:`didmem.lab.run`) whose metrics include the scores.
    scores : sequence of str, optional
        Metrics of the run to judge; by default those of :data:`MIA_SCORES` that it has.
    alpha : float
        One minus the coverage of the AUCs' intervals (the estimator's score intervals).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COMPARISON_COLUMNS`: ``auc`` (and its interval) at the last
        checkpoint; ``auc_untrained`` at the last checkpoint before the first cohort;
        ``spearman`` with the per-instance truth at the last checkpoint; ``mia_bias`` and
        ``mia_rmse`` of the implied profile over the post-treatment cells (truth ``tau``),
        ``mia_pre_gap`` its mean over the pre-treatment cells (truth 0); ``did_nyt_*`` and
        ``did_never_*`` DiD's with not-yet-treated (truth ``tau_nyt``) and never-treated
        (truth ``tau``) controls; ``did_trained_*`` DiD's on the training instances alone
        with not-yet-treated controls (truth ``tau_nyt``): without never-treated units the
        last cohort serves only as a comparison group and its periods are dropped, as in R
        ``did`` (the :class:`~didmem.DataDroppedWarning` that says so is expected here and
        not shown).
    """
    import warnings

    from scipy.stats import spearmanr

    from ..estimators.did import DiDEstimator
    from ..estimators.membership import MembershipInferenceEstimator
    from ..panel import Panel
    from ..results.comparison import compare

    cfg = result.config
    if scores is None:
        scores = [m for m in MIA_SCORES if m in cfg.metrics]
    missing = [m for m in scores if m not in cfg.metrics]
    if missing or not scores:
        raise ParameterError(f"membership_comparison: the lab run scored {list(cfg.metrics)}; "
                             f"it has no {missing or 'score to judge'}.")
    scores = list(scores)
    panel = Panel(result.panel, unit="unit", time="time", cohort="cohort", outcome=scores)
    trained = result.panel[np.isfinite(result.panel["cohort"])]
    trained = Panel(trained, unit="unit", time="time", cohort="cohort", outcome=scores)
    units = pd.read_parquet(result.out_dir / "truth_units.parquet")
    last, before = float(cfg.n_steps), float(cfg.cohorts[0] - cfg.checkpoint_every)
    rows = []
    for m in scores:
        mia = MembershipInferenceEstimator(score=m, members="all", alpha=alpha).fit(panel)
        auc = mia.extra["auc"].set_index("time")
        gaps = mia.units[mia.units["time"] == last].set_index("unit")["estimate"]
        truth = units[(units["metric"] == m) & (units["time"] == last)].set_index("unit")
        rho = spearmanr(gaps.reindex(truth.index).to_numpy(), truth["effect"].to_numpy())
        cells = mia.to_frame()
        fits = {
            "mia": mia,
            "did_nyt": DiDEstimator(outcome=m, control_group="not_yet_treated",
                                    n_bootstrap=0).fit(panel),
            "did_never": DiDEstimator(outcome=m, n_bootstrap=0).fit(panel),
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataDroppedWarning)
            fits["did_trained"] = DiDEstimator(outcome=m, control_group="not_yet_treated",
                                               n_bootstrap=0).fit(trained)
        table = compare(fits, truth=result.truth, metric=m).set_index("estimator")
        rows.append({
            "score": m,
            "auc": auc.loc[last, "auc"], "auc_lower": auc.loc[last, "ci_lower"],
            "auc_upper": auc.loc[last, "ci_upper"],
            "auc_untrained": auc.loc[before, "auc"],
            "auc_untrained_lower": auc.loc[before, "ci_lower"],
            "auc_untrained_upper": auc.loc[before, "ci_upper"],
            "spearman": float(rho.statistic),
            "mia_pre_gap": float(cells.loc[cells["time"] < cells["cohort"], "estimate"].mean()),
            **{f"{name}_{stat}": table.loc[name, stat] for name in fits
               for stat in ("bias", "rmse")},
        })
    return pd.DataFrame(rows)[COMPARISON_COLUMNS]
