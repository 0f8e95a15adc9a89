"""Okapi BM25 over the policies and prior contracts.

BM25 rather than embeddings: the corpus is a few dozen documents written in the same
vocabulary as the requests, the ranking must be explainable to an auditor (which
words matched, how rare they are), and it runs offline with no model to ship. The
scoring is the classic one (Robertson & Zaragoza, 2009) with the non-negative IDF
of Lucene, so a word found in most documents still counts a little, never against.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from procurement.corpus import Document
from procurement.text import tokens

RETRIEVER_NAME = "bm25/1"


@dataclass(frozen=True)
class Hit:
    """A document and its BM25 score for one query."""

    document: Document
    score: float


class BM25Index:
    """An in-memory BM25 index of ``documents``' ``searchable_text``.

    Args:
        k1: how fast a word's repetitions stop adding to the score.
        b: how much long documents are penalized (0 none, 1 fully).
    """

    def __init__(self, documents: Sequence[Document], *, k1: float = 1.5, b: float = 0.75) -> None:
        if not documents:
            raise ValueError("a BM25 index needs at least one document")
        self.documents = list(documents)
        self.k1, self.b = k1, b
        self._counts = [Counter(tokens(d.searchable_text)) for d in self.documents]
        self._lengths = [sum(c.values()) for c in self._counts]
        self._average_length = sum(self._lengths) / len(self._lengths)
        frequency: Counter[str] = Counter(w for counts in self._counts for w in counts)
        n = len(self.documents)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in frequency.items()}

    def score(self, query_words: Sequence[str], index: int) -> float:
        counts, length = self._counts[index], self._lengths[index]
        norm = self.k1 * (1 - self.b + self.b * length / self._average_length)
        total = 0.0
        for word in query_words:
            tf = counts.get(word, 0)
            if tf:
                total += self.idf[word] * tf * (self.k1 + 1) / (tf + norm)
        return total

    def search(self, query: str, *, top_k: int = 5) -> list[Hit]:
        """The ``top_k`` best documents for ``query``, best first; documents that share
        no word with it are left out, so the answer may be shorter (or empty)."""
        words = tokens(query)
        hits = [Hit(d, self.score(words, i)) for i, d in enumerate(self.documents)]
        ranked = sorted(
            (h for h in hits if h.score > 0), key=lambda h: (-h.score, h.document.document_id)
        )
        return ranked[:top_k]
