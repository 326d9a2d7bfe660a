"""The multi-domain corpus: domains, their words and chains, and the validation mix."""

import numpy as np
import pytest

from didmem.errors import ParameterError
from didmem.lab import build_design, quick_config
from didmem.lab.corpus import MarkovCorpus, domain_markov_weight


def _words_of(corpus, domain):
    return set(corpus._domain_word_ids[domain].tolist())


def test_each_domain_draws_its_own_words():
    cfg = quick_config(n_domains=3)
    corpus = MarkovCorpus(cfg, np.random.default_rng(0))
    doms = np.repeat([0, 1, 2], 20)
    x = corpus.sample(60, np.random.default_rng(1), domains=doms)
    sets = [_words_of(corpus, d) for d in range(3)]
    assert not (sets[0] & sets[1]) and not (sets[1] & sets[2])
    for row, d in zip(x, doms):
        words = set(row.tolist())
        assert words & sets[d]
        assert not words & (set().union(*sets) - sets[d])
    weights = [domain_markov_weight(cfg, d) for d in range(3)]
    assert weights == pytest.approx([cfg.markov_weight * (1 - cfg.domain_contrast * d / 2)
                                     for d in range(3)])
    assert corpus.markov_weights == weights


def test_one_domain_is_the_plain_language():
    cfg = quick_config()
    a = MarkovCorpus(cfg, np.random.default_rng(4))
    x = a.sample(30, np.random.default_rng(2))
    y = a.sample(30, np.random.default_rng(2), domains=np.zeros(30, dtype=int))
    np.testing.assert_array_equal(x, y)
    assert (build_design(cfg).domains == 0).all()


@pytest.mark.parametrize("mix", [0.0, 0.8, 1.0])
def test_validation_mix_sets_the_composition(mix):
    cfg = quick_config(n_domains=2, validation_mix=mix, n_validation=100)
    d = build_design(cfg)
    val = d.domains[d.validation_ids]
    assert (val == 0).sum() == round(mix * 100)
    train = d.domains[d.split == "train"]
    assert 0.35 < train.mean() < 0.65  # uniform draws over two domains
    # a replacement has the domain of the instance it replaces
    np.testing.assert_array_equal(d.domains[d.replacement_ids], d.domains[d.analysed_ids])


def test_domain_settings_are_checked():
    with pytest.raises(ParameterError, match="needs a corpus of several domains"):
        quick_config(validation_mix=0.5)
    with pytest.raises(ParameterError, match="'validation_mix' parameter of LabConfig"):
        quick_config(n_domains=2, validation_mix=1.5)
    with pytest.raises(ParameterError, match="'domain_contrast' parameter of LabConfig"):
        quick_config(n_domains=2, domain_contrast=1.0)
    with pytest.raises(ParameterError, match="'n_domains' parameter of LabConfig"):
        quick_config(n_domains=0)
