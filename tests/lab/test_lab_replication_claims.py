"""The lab's statistical claims as tests over replicated runs (slow: 30 quick-scale runs).

Each claim is a test of a mean error over seeds against its Monte Carlo standard error, with
the thresholds of issue 16: unbiased means ``|t| < 2``, biased means ``|t| > 4``
(``t = mean error / MC se``). Figures: docs/lab.rst, benchmarks/RESULTS.md
(``python benchmarks/lab_replication.py --seeds 20 --conditions same mix``).

Sizes: the same distribution uses 10 seeds. The composition shift uses 20: over 10 seeds
unadjusted DiD's mean error is -0.020 with a spread of 0.020 over runs (t = -3.1), so reaching
4 Monte Carlo standard errors needs about (4 * 0.020 / 0.020)^2 = 16 runs; at 10 seeds the
issue's target is missed, as the docs say.
"""

import pytest

pytestmark = pytest.mark.slow


def _summary(tmp_path, n_seeds, **changes):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from didmem.lab import quick_config, replicate
    from didmem.lab.replication import default_estimators

    cfg = quick_config(metrics=("mean_token_loglik",), **changes)
    rep = replicate(tmp_path, n_seeds=n_seeds, config=cfg, estimators=default_estimators(cfg))
    assert (rep.summary["n_runs"] == n_seeds).all()
    return rep.summary.set_index("estimator")


def test_did_is_unbiased_on_the_same_distribution(tmp_path):
    s = _summary(tmp_path, 10)
    assert abs(s.loc["did", "t"]) < 2  # mean error = 0 within 2 MC standard errors
    assert abs(s.loc["difference", "t"]) < 2  # unbiased too here, only noisier
    assert s.loc["did", "rmse"] < s.loc["difference", "rmse"]
    # issue 16's quick-scale signal, averaged over runs, and the band's coverage of cells
    assert s.loc["did", "corr"] >= 0.7
    assert s.loc["did", "coverage"] >= 0.9


def test_only_covariate_adjusted_did_survives_a_composition_shift(tmp_path):
    s = _summary(tmp_path, 20, n_domains=2, validation_mix=0.9)
    assert abs(s.loc["did_domain", "t"]) < 2  # unbiased within MC error
    assert s.loc["difference", "t"] < -4  # the level gap
    assert s.loc["did", "t"] < -4  # the composition
    assert s.loc["did_domain", "rmse"] < s.loc["did", "rmse"] < s.loc["difference", "rmse"]
    assert s.loc["did_domain", "coverage"] >= 0.9 > s.loc["did", "coverage"]
