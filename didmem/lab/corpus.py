"""Seeded corpora: a Zipfian Markov language with instance-specific secrets, or the user's text.

Generated instances mix two kinds of content:

* shared structure that a model learns as it trains: words follow a first-order Markov chain
  whose successor laws are Zipfian, with successors drawn by a Zipfian unigram law so that
  word frequencies are Zipfian too;
* with ``n_domains > 1``, several such languages (domains), each with its own words and
  chain, the later ones with less Markov structure (:func:`domain_markov_weight`);
* instance-specific content that can only be memorised: a secret ``name FIRST LAST code d1 ..
  dD`` with a random name and a random digit string, inserted at a random place;
* with ``rare_share > 0``, *rare* instances whose transitions jump to a uniformly drawn word
  with probability ``rare_jump``: rarer words, less shared structure
  (:meth:`MarkovCorpus.surprisal` measures it).

Every instance has exactly ``seq_len`` tokens and begins with ``<bos>``. The words and names
are pseudo-words made from syllables drawn with the seed; nothing is copied from elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ParameterError
from .tokenizer import WordTokenizer

__all__ = ["MarkovCorpus", "TextCorpus", "make_corpus", "domain_markov_weight"]

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


def _pseudo_words(rng: np.random.Generator, n: int, taken: set, syllables=(2, 3)) -> list:
    """``n`` distinct lowercase pseudo-words of consonant-vowel syllables, not in ``taken``."""
    out = []
    while len(out) < n:
        k = int(rng.integers(syllables[0], syllables[1] + 1))
        cons = rng.integers(0, len(_CONSONANTS), k)
        vows = rng.integers(0, len(_VOWELS), k)
        word = "".join(_CONSONANTS[c] + _VOWELS[v] for c, v in zip(cons, vows))
        if word not in taken:
            taken.add(word)
            out.append(word)
    return out


def domain_markov_weight(config, domain: int) -> float:
    """Markov weight of a domain's chain: ``markov_weight`` scaled down linearly by domain.

    Domain ``d`` of ``D`` has ``markov_weight * (1 - domain_contrast * d / (D - 1))``: the
    first domain follows the configured chain, the last one has a share ``domain_contrast``
    less of Markov structure, so it is harder to predict (a lower level) and has less to
    learn (a flatter trend).
    """
    n_domains = getattr(config, "n_domains", 1)
    if n_domains == 1:
        return float(config.markov_weight)
    contrast = getattr(config, "domain_contrast", 0.0)
    return float(config.markov_weight * (1.0 - contrast * domain / (n_domains - 1)))


def _zipf(n: int, exponent: float) -> np.ndarray:
    weights = np.arange(1, n + 1, dtype=np.float64) ** (-exponent)
    return weights / weights.sum()


class MarkovCorpus:
    """A seeded Zipfian Markov language with secrets.

    Parameters
    ----------
    config : LabConfig
        Uses ``n_words``, ``zipf_exponent``, ``n_successors``, ``markov_weight``, ``n_names``,
        ``secret_digits`` and ``seq_len``.
    rng : numpy.random.Generator
        Stream that fixes the language (its words, names and transition law).

    Attributes
    ----------
    tokenizer : WordTokenizer
        Vocabulary ``<pad> <bos> <eos> <unk> name code 0..9``, first names, last names, words.
    transition : numpy.ndarray
        ``n_words x n_words`` transition law of the Markov chain over word indices.
    """

    kind = "markov"

    def __init__(self, config, rng: np.random.Generator):
        self.config = config
        n_domains = getattr(config, "n_domains", 1)
        taken: set = set()
        words = [_pseudo_words(rng, config.n_words, taken)]
        first = [w.capitalize() for w in _pseudo_words(rng, config.n_names, taken)]
        last = [w.capitalize() for w in _pseudo_words(rng, config.n_names, taken, (3, 3))]
        for _ in range(1, n_domains):
            words.append(_pseudo_words(rng, config.n_words, taken))
        digits = [str(d) for d in range(10)]
        self.tokenizer = WordTokenizer(["name", "code"] + digits + first + last
                                       + [w for ws in words for w in ws])
        tok = self.tokenizer
        self._name_id, self._code_id = tok.token_id("name"), tok.token_id("code")
        self._digit_ids = np.array([tok.token_id(d) for d in digits])
        self._first_ids = np.array([tok.token_id(w) for w in first])
        self._last_ids = np.array([tok.token_id(w) for w in last])
        self._domain_word_ids = [np.array([tok.token_id(w) for w in ws]) for ws in words]
        self._word_ids = self._domain_word_ids[0]

        n = config.n_words
        self.unigram = _zipf(n, config.zipf_exponent)
        self._uni_cdf = np.cumsum(self.unigram)
        self._uni_cdf[-1] = 1.0
        self.markov_weights = [domain_markov_weight(config, d) for d in range(n_domains)]
        self.transitions = [self._chain(config, rng, w) for w in self.markov_weights]
        self._cdfs = []
        for transition in self.transitions:
            cdf = np.cumsum(transition, axis=1)
            cdf[:, -1] = 1.0
            self._cdfs.append(cdf)

    @property
    def transition(self) -> np.ndarray:
        """Transition law of the first domain's Markov chain (the only one by default)."""
        return self.transitions[0]

    def _chain(self, config, rng, weight: float) -> np.ndarray:
        n = config.n_words
        succ_law = _zipf(min(n, config.n_successors), config.zipf_exponent)
        markov = np.zeros((n, n))
        for i in range(n):
            # successors favour frequent words, so the chain's word frequencies stay Zipfian
            succ = rng.choice(n, size=len(succ_law), replace=False, p=self.unigram)
            markov[i, succ] = succ_law
        return weight * markov + (1.0 - weight) * self.unigram[None, :]

    def _words(self, n: int, rng: np.random.Generator, shift: float, domain: int) -> np.ndarray:
        cfg = self.config
        n_text = cfg.seq_len - 1 - cfg.secret_len
        cdf = self._cdfs[domain]
        if np.ndim(shift):  # one share per instance (rare instances)
            shift = np.asarray(shift, dtype=np.float64)
            jumps = bool(np.any(shift > 0))
        else:
            jumps = shift > 0
        words = np.empty((n, n_text), dtype=np.int64)
        cur = np.searchsorted(self._uni_cdf, rng.random(n), side="right")
        cur = np.minimum(cur, cfg.n_words - 1)
        words[:, 0] = cur
        for t in range(1, n_text):
            u = rng.random(n)
            nxt = (cdf[cur] < u[:, None]).sum(axis=1)
            if jumps:
                jump = rng.random(n) < shift
                nxt = np.where(jump, rng.integers(0, cfg.n_words, n), nxt)
            cur = np.minimum(nxt, cfg.n_words - 1)
            words[:, t] = cur
        return self._domain_word_ids[domain][words]

    def sample(self, n: int, rng: np.random.Generator, shift: float = 0.0,
               domains: np.ndarray | None = None) -> np.ndarray:
        """Draw ``n`` instances.

        Parameters
        ----------
        n : int
            Number of instances.
        rng : numpy.random.Generator
            Stream to draw from.
        shift : float or numpy.ndarray
            Share of transitions drawn uniformly over the words instead of from the chain
            (a shifted distribution for validation), or one share per instance (rare
            instances).
        domains : numpy.ndarray of int, optional
            Domain of each instance (default: all in the first domain). The text of the
            instances of domain ``d`` is drawn from that domain's chain, domain by domain.

        Returns
        -------
        numpy.ndarray
            ``n x seq_len`` int64 token ids.
        """
        cfg = self.config
        secret_len = cfg.secret_len
        n_text = cfg.seq_len - 1 - secret_len
        if np.ndim(shift) and np.shape(shift) != (n,):
            raise ParameterError(f"shift must be a number or {n} numbers; got the shape "
                                 f"{np.shape(shift)}.")
        if domains is None:
            text = self._words(n, rng, shift, 0)
        else:
            domains = np.asarray(domains, dtype=np.int64)
            if domains.shape != (n,) or (len(domains) and not (
                    0 <= domains.min() and domains.max() < len(self.transitions))):
                raise ParameterError(f"domains must be {n} integers in [0, "
                                     f"{len(self.transitions)}).")
            text = np.empty((n, n_text), dtype=np.int64)
            for d in range(len(self.transitions)):
                rows = np.flatnonzero(domains == d)
                if len(rows):
                    text[rows] = self._words(len(rows), rng,
                                             shift[rows] if np.ndim(shift) else shift, d)
        out = np.empty((n, cfg.seq_len), dtype=np.int64)
        out[:, 0] = self.tokenizer.bos_id
        if not secret_len:
            out[:, 1:] = text
            return out
        secret = np.empty((n, secret_len), dtype=np.int64)
        secret[:, 0] = self._name_id
        secret[:, 1] = self._first_ids[rng.integers(0, cfg.n_names, n)]
        secret[:, 2] = self._last_ids[rng.integers(0, cfg.n_names, n)]
        secret[:, 3] = self._code_id
        secret[:, 4:] = self._digit_ids[rng.integers(0, 10, (n, cfg.secret_digits))]
        offset = rng.integers(0, n_text + 1, n)
        for i in range(n):
            o = offset[i]
            out[i, 1:] = np.concatenate([text[i, :o], secret[i], text[i, o:]])
        return out

    def surprisal(self, tokens: np.ndarray) -> np.ndarray:
        """Mean ``-log p(w)`` (nats) of each instance's words under the unigram law.

        Parameters
        ----------
        tokens : numpy.ndarray
            ``n x seq_len`` token ids of this corpus's instances.

        Returns
        -------
        numpy.ndarray
            One value per instance over its words (every domain's ``r``-th word has the
            unigram probability of rank ``r``); the beginning token and the secret do not
            count.
        """
        table = np.full(len(self.tokenizer), np.nan)
        for ids in self._domain_word_ids:
            table[ids] = -np.log(self.unigram)
        values = table[np.asarray(tokens, dtype=np.int64)]
        words = np.isfinite(values)
        return np.where(words, values, 0.0).sum(axis=1) / np.maximum(words.sum(axis=1), 1)

    def describe(self) -> dict:
        """Settings for the manifest."""
        return {"kind": self.kind, "vocab_size": len(self.tokenizer),
                "markov_weights": [float(w) for w in self.markov_weights]}


class TextCorpus:
    """Instances cut from the user's plain-text files.

    The files are read as UTF-8 and split on whitespace; each line ends with ``<eos>``. The
    token stream is cut into pieces of ``seq_len - 1`` tokens, each prefixed with ``<bos>``;
    the pieces are shuffled with the seed and handed out without replacement, so fresh
    instances (validation, twin replacements) are never seen in training.
    """

    kind = "text"

    def __init__(self, config, rng: np.random.Generator):
        self.config = config
        lines = []
        for name in config.text_files:
            path = Path(name)
            if not path.is_file():
                raise ParameterError(f"Text file {str(path)!r} does not exist.")
            lines.extend(path.read_text(encoding="utf-8").splitlines())
        lines = [ln for ln in lines if ln.strip()]
        if not lines:
            raise ParameterError(f"The text files {list(config.text_files)} hold no words.")
        self.tokenizer = WordTokenizer.from_texts(lines)
        stream = self.tokenizer.encode_array(lines)
        width = config.seq_len - 1
        n_pieces = len(stream) // width
        pieces = stream[: n_pieces * width].reshape(n_pieces, width)
        pieces = pieces[rng.permutation(n_pieces)]
        self._pool = np.concatenate(
            [np.full((n_pieces, 1), self.tokenizer.bos_id, dtype=np.int64), pieces], axis=1
        )
        self._next = 0

    @property
    def n_available(self) -> int:
        """Instances not handed out yet."""
        return len(self._pool) - self._next

    def sample(self, n: int, rng: np.random.Generator, shift: float = 0.0,
               domains: np.ndarray | None = None) -> np.ndarray:
        """Hand out the next ``n`` unused instances (``rng`` is not used; one domain only)."""
        if shift:
            raise ParameterError("validation_shift is not available with text_files.")
        if n > self.n_available:
            raise ParameterError(
                f"The text files give {len(self._pool)} instances of {self.config.seq_len} "
                f"tokens, but the run needs at least {self._next + n}. Pass more text, or "
                "lower n_steps, batch_size, n_validation or seq_len."
            )
        out = self._pool[self._next : self._next + n].copy()
        self._next += n
        return out

    def describe(self) -> dict:
        """Settings for the manifest."""
        return {
            "kind": self.kind,
            "vocab_size": len(self.tokenizer),
            "n_instances_available": len(self._pool),
        }


def make_corpus(config, rng: np.random.Generator):
    """The corpus of a run: :class:`TextCorpus` if ``config.text_files`` else :class:`MarkovCorpus`."""
    if config.text_files:
        return TextCorpus(config, rng)
    return MarkovCorpus(config, rng)
