"""The generated language, its secrets, the text-file corpus and the tokenizer."""

import itertools
import json

import numpy as np
import pytest

from didmem.errors import ParameterError
from didmem.lab import WordTokenizer, quick_config
from didmem.lab.corpus import MarkovCorpus, TextCorpus, make_corpus


def _corpus(seed=0, **changes):
    return MarkovCorpus(quick_config(**changes), np.random.default_rng(seed))


def test_same_seed_same_language_and_instances():
    a, b = _corpus(1), _corpus(1)
    assert a.tokenizer.vocab == b.tokenizer.vocab
    np.testing.assert_array_equal(a.transition, b.transition)
    x = a.sample(50, np.random.default_rng(7))
    y = b.sample(50, np.random.default_rng(7))
    np.testing.assert_array_equal(x, y)
    assert _corpus(2).tokenizer.vocab != a.tokenizer.vocab


def test_instances_have_fixed_length_and_one_secret():
    cfg = quick_config()
    corpus = _corpus()
    x = corpus.sample(200, np.random.default_rng(0))
    assert x.shape == (200, cfg.seq_len)
    assert (x[:, 0] == corpus.tokenizer.bos_id).all()
    tok = corpus.tokenizer
    digits = {tok.token_id(str(d)) for d in range(10)}
    for row in x:
        words = [tok.vocab[i] for i in row]
        assert words.count("name") == 1 and words.count("code") == 1
        at = words.index("code")
        assert words.index("name") == at - 3
        assert all(i in digits for i in row[at + 1 : at + 1 + cfg.secret_digits])
    # the secrets are (nearly) all distinct: memorising one does not give away another
    secrets = {tuple(r) for r in x}
    assert len(secrets) == len(x)


def test_word_frequencies_are_zipfian():
    corpus = _corpus(n_words=96)
    x = corpus.sample(2000, np.random.default_rng(0))
    word_ids = corpus._word_ids
    counts = np.sort(np.array([(x == w).sum() for w in word_ids]))[::-1]
    assert counts[:10].sum() > counts[48:].sum()  # heavy head, long tail
    ranks = np.arange(1, len(counts) + 1)
    slope = np.polyfit(np.log(ranks[counts > 0]), np.log(counts[counts > 0]), 1)[0]
    assert -2.5 < slope < -0.7  # a power law in the rank


def test_validation_shift_makes_text_less_predictable():
    corpus = _corpus()
    law = corpus.transition
    inv = {int(w): i for i, w in enumerate(corpus._word_ids)}

    def chain_loglik(x):
        total, n = 0.0, 0
        for row in x:
            idx = [inv[t] for t in row if int(t) in inv]
            for a, b in itertools.pairwise(idx):
                total += np.log(law[a, b] + 1e-12)
                n += 1
        return total / n

    same = chain_loglik(corpus.sample(300, np.random.default_rng(1)))
    shifted = chain_loglik(corpus.sample(300, np.random.default_rng(1), shift=0.5))
    assert shifted < same - 1.0


def test_text_corpus(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("\n".join(f"line {i} of the little text" for i in range(400)), encoding="utf-8")
    cfg = quick_config(text_files=(str(path),))
    corpus = make_corpus(cfg, np.random.default_rng(0))
    assert isinstance(corpus, TextCorpus)
    first = corpus.sample(10, None)
    second = corpus.sample(10, None)
    assert first.shape == (10, cfg.seq_len) and (first[:, 0] == corpus.tokenizer.bos_id).all()
    # instances are handed out without replacement
    assert not any((first == row).all(axis=1).any() for row in second)
    with pytest.raises(ParameterError, match="the run needs at least"):
        corpus.sample(10**6, None)
    with pytest.raises(ParameterError, match="not available with text_files"):
        corpus.sample(1, None, shift=0.2)


def test_missing_text_file(tmp_path):
    cfg = quick_config(text_files=(str(tmp_path / "nope.txt"),))
    with pytest.raises(ParameterError, match="does not exist"):
        make_corpus(cfg, np.random.default_rng(0))


def test_tokenizer_round_trip(tmp_path):
    tok = WordTokenizer(["name", "code", "7", "Abe", "kilo"])
    ids = tok.encode("name Abe code 7 zulu")
    assert ids[-1] == tok.unk_id
    assert tok.decode(ids) == "name Abe code 7 <unk>"
    path = tok.save(tmp_path)
    assert path.name == "tokenizer.json"
    assert WordTokenizer.load(path).vocab == tok.vocab
    data = json.loads(path.read_text())
    assert data["model"]["type"] == "WordLevel" and data["model"]["vocab"]["<bos>"] == 1
    with pytest.raises(ParameterError, match="free of whitespace"):
        WordTokenizer(["two words"])


def test_tokenizer_file_reads_with_hf_tokenizers(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = WordTokenizer(["name", "code", "7", "Abe"])
    hf = tokenizers.Tokenizer.from_file(str(tok.save(tmp_path)))
    assert hf.encode("name Abe code 7").ids == tok.encode("name Abe code 7")
