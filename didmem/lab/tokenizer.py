"""A word-level tokenizer built in code, saved in the Hugging Face ``tokenizers`` format.

Text is split on whitespace and each word maps to one id; unknown words map to ``<unk>``. The
file written by :meth:`WordTokenizer.save` is a ``tokenizer.json`` that
``tokenizers.Tokenizer.from_file`` and ``transformers.PreTrainedTokenizerFast`` read, but
nothing here needs those packages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..errors import ParameterError

__all__ = ["WordTokenizer", "SPECIAL_TOKENS"]

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")


class WordTokenizer:
    """Whitespace word-level tokenizer with a fixed vocabulary.

    Parameters
    ----------
    words : sequence of str
        The vocabulary after the special tokens ``<pad> <bos> <eos> <unk>`` (ids 0-3), in id
        order. Words must be unique, non-empty and free of whitespace.
    """

    def __init__(self, words: Sequence[str]):
        vocab = list(SPECIAL_TOKENS) + [w for w in words if w not in SPECIAL_TOKENS]
        bad = [w for w in vocab if not w or any(ch.isspace() for ch in w)]
        if bad:
            raise ParameterError(f"Tokens must be non-empty and free of whitespace: {bad[:5]}.")
        if len(set(vocab)) != len(vocab):
            raise ParameterError("The tokenizer vocabulary holds repeated words.")
        self.vocab = tuple(vocab)
        self._ids = {w: i for i, w in enumerate(self.vocab)}

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.vocab)

    def token_id(self, word: str) -> int:
        """Id of one word (``<unk>``'s id when unknown)."""
        return self._ids.get(word, self.unk_id)

    def encode(self, text: str) -> list:
        """Ids of the whitespace-separated words of ``text``."""
        return [self._ids.get(w, self.unk_id) for w in text.split()]

    def decode(self, ids: Iterable[int]) -> str:
        """Words of ``ids`` joined by single spaces."""
        return " ".join(self.vocab[int(i)] for i in ids)

    def to_json(self) -> dict:
        """The tokenizer as a Hugging Face ``tokenizers`` JSON document."""
        added = [
            {"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for i, tok in enumerate(SPECIAL_TOKENS)
        ]
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {"type": "WhitespaceSplit"},
            "post_processor": None,
            "decoder": None,
            "model": {
                "type": "WordLevel",
                "vocab": {w: i for i, w in enumerate(self.vocab)},
                "unk_token": "<unk>",
            },
        }

    def save(self, path) -> Path:
        """Write ``tokenizer.json`` (or ``path`` itself if it names a ``.json`` file)."""
        path = Path(path)
        if path.suffix != ".json":
            path = path / "tokenizer.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        return path

    @classmethod
    def load(cls, path) -> WordTokenizer:
        """Read a file written by :meth:`save`."""
        path = Path(path)
        if path.is_dir():
            path = path / "tokenizer.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        vocab = data["model"]["vocab"]
        words = [w for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
        return cls(words[len(SPECIAL_TOKENS):])

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> WordTokenizer:
        """Vocabulary of every word in ``texts``, most frequent first (ties alphabetical)."""
        counts: dict = {}
        for text in texts:
            for w in text.split():
                counts[w] = counts.get(w, 0) + 1
        for tok in SPECIAL_TOKENS:
            counts.pop(tok, None)
        words = sorted(counts, key=lambda w: (-counts[w], w))
        return cls(words)

    def encode_array(self, texts: Sequence[str]) -> np.ndarray:
        """Concatenated ids of several texts, each followed by ``<eos>`` (int64 array)."""
        out = []
        for text in texts:
            out.extend(self.encode(text))
            out.append(self.eos_id)
        return np.asarray(out, dtype=np.int64)
