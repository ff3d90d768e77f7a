"""BM25 over one scope's postings, computed once for every store.

A store hands over, for each query term, the postings of that term in the searched scope
(document keys, term counts, document lengths) and the scope's document count and average
length; ``keyword_scores`` returns every matching document's score. The embedded store reads
postings from its in-process index, PostgreSQL from ``memory_terms``; both run this code on the
same stored floats, so both get the same bits.

Okapi BM25 with the parameters and IDF of lamina.memory.scoring. Term counts may be
fractional (a message's neighbourhood words count half).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lamina.memory.scoring import BM25_B as B
from lamina.memory.scoring import BM25_GRID as GRID
from lamina.memory.scoring import BM25_K1 as K1
from lamina.memory.scoring import bm25_idf


@dataclass(frozen=True)
class Postings:
    """One term's postings in one scope: ``keys`` with the term's count in each document
    (``counts``) and each document's length in terms (``lengths``), aligned."""

    keys: npt.NDArray[np.int64]
    counts: npt.NDArray[np.float64]
    lengths: npt.NDArray[np.float64]


@dataclass(frozen=True)
class KeywordScores:
    """BM25 scores of every document of a scope holding a query term (``pks`` ascending),
    and the sum of the query terms' IDF in that scope (a term no document holds counts as
    held by one)."""

    pks: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float64]
    idf_sum: float

    def top(self, limit: int | None) -> list[tuple[int, float]]:
        """(pk, score), best first (ties to the smaller pk, at the cut too: both stores pick
        the same ``limit`` documents)."""
        if limit is not None and len(self.pks) > limit:
            cut = -np.partition(-self.scores, limit - 1)[limit - 1]
            (above,) = np.nonzero(self.scores > cut)
            (level,) = np.nonzero(self.scores == cut)  # ascending pks
            chosen = np.concatenate([above, level[: limit - len(above)]])
        else:
            chosen = np.arange(len(self.pks))
        order = chosen[np.lexsort((self.pks[chosen], -self.scores[chosen]))]
        return [(int(self.pks[i]), float(self.scores[i])) for i in order]

    def get(self, pk: int) -> float:
        i = int(np.searchsorted(self.pks, pk))
        return float(self.scores[i]) if i < len(self.pks) and self.pks[i] == pk else 0.0

    def get_many(self, pks: Sequence[int]) -> list[float]:
        """``get`` of each of ``pks``, in one lookup."""
        if not len(self.pks) or not pks:
            return [0.0] * len(pks)
        keys = np.asarray(pks, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.pks, keys), len(self.pks) - 1)
        found: list[float] = np.where(self.pks[at] == keys, self.scores[at], 0.0).tolist()
        return found


NO_SCORES = KeywordScores(np.empty(0, dtype=np.int64), np.empty(0), 0.0)


def keyword_scores(
    documents: int, total_length: float, postings: Sequence[Postings | None]
) -> KeywordScores:
    """Every document holding any of the query's terms, with its BM25 score, in a scope of
    ``documents`` documents of ``total_length`` terms; ``postings`` has one entry per distinct
    query term (None, or empty, for a term no document of the scope holds)."""
    if documents <= 0:
        return NO_SCORES
    avg_length = max(total_length / documents, 1e-9)
    all_keys: list[npt.NDArray[np.int64]] = []
    all_shares: list[npt.NDArray[np.float64]] = []
    idf_sum = 0.0
    for term in postings:
        held = 0 if term is None else len(term.keys)
        idf = bm25_idf(documents, max(held, 1))  # an absent term weighs as a rare one
        idf_sum += idf
        if term is None or held == 0:
            continue
        tfs, lengths = term.counts, term.lengths
        # Double precision, each share rounded to the grid: the sums below are of integers,
        # exact in any order.
        share = idf * tfs * (K1 + 1.0) / (tfs + K1 * ((1.0 - B) + B * lengths / avg_length))
        all_keys.append(term.keys)
        all_shares.append(np.rint(share * GRID))
    if not all_keys:
        return KeywordScores(NO_SCORES.pks, NO_SCORES.scores, idf_sum)
    unique, inverse = np.unique(np.concatenate(all_keys), return_inverse=True)
    scores: npt.NDArray[np.float64] = (
        np.bincount(inverse, weights=np.concatenate(all_shares)).astype(np.float64) / GRID
    )
    return KeywordScores(unique, scores, idf_sum)
