"""An in-process BM25 keyword index, partitioned by (tenant, layer, scope key).

Postings are append-only arrays per term. Every posting carries the version of the document
it was made from; updating or deleting a document bumps its version, so stale postings are
skipped at query time and dropped by compaction. BM25 statistics (document count, average
length, document frequency) are those of the searched scope alone.

Scores use Okapi BM25 with the parameters and IDF of lamina.memory.scoring (one BM25 for
every store). Term counts may be fractional (a message's neighbourhood words count half).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lamina.memory.scoring import BM25_B as B
from lamina.memory.scoring import BM25_GRID as GRID
from lamina.memory.scoring import BM25_K1 as K1
from lamina.memory.scoring import bm25_idf

PartitionKey = tuple[str, str, str]


@dataclass(frozen=True)
class KeywordScores:
    """BM25 scores of every document of a scope holding a query term (``pks`` ascending),
    and the sum of the query terms' IDF in that scope (a term no document holds counts as
    held by one)."""

    pks: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float64]
    idf_sum: float

    def top(self, limit: int | None) -> list[tuple[int, float]]:
        """(pk, score), best first (ties to the smaller pk, at the cut too: the same
        ``limit`` documents PostgreSQL's ``ORDER BY score DESC, seq LIMIT`` picks)."""
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


_EMPTY = KeywordScores(np.empty(0, dtype=np.int64), np.empty(0), 0.0)


class _Postings:
    __slots__ = ("pks", "tfs", "versions")

    def __init__(self) -> None:
        self.pks = array("q")
        self.tfs = array("f")
        self.versions = array("q")


class LexicalIndex:
    """Not thread-safe by itself: the owning store serialises access."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._postings: dict[str, _Postings] = {}
        self._part_ids: dict[PartitionKey, int] = {}
        self._part_docs: list[int] = []
        self._part_length: list[float] = []
        size = 1024
        self._doc_part: npt.NDArray[np.int32] = np.full(size, -1, dtype=np.int32)
        self._doc_version: npt.NDArray[np.int64] = np.zeros(size, dtype=np.int64)
        self._doc_length: npt.NDArray[np.float32] = np.zeros(size, dtype=np.float32)
        self._live = 0
        self._stale = 0

    def _grow(self, pk: int) -> None:
        size = len(self._doc_part)
        if pk < size:
            return
        new = max(size * 2, pk + 1)
        self._doc_part = np.concatenate([self._doc_part, np.full(new - size, -1, dtype=np.int32)])
        self._doc_version = np.concatenate(
            [self._doc_version, np.zeros(new - size, dtype=np.int64)]
        )
        self._doc_length = np.concatenate(
            [self._doc_length, np.zeros(new - size, dtype=np.float32)]
        )

    def remove(self, pk: int) -> None:
        if pk >= len(self._doc_part) or self._doc_part[pk] < 0:
            return
        part = int(self._doc_part[pk])
        self._part_docs[part] -= 1
        self._part_length[part] -= float(self._doc_length[pk])
        self._doc_part[pk] = -1
        self._doc_version[pk] += 1
        self._doc_length[pk] = 0.0
        self._stale += 1

    def upsert(self, pk: int, key: PartitionKey, terms: dict[str, float]) -> None:
        self.remove(pk)
        self._grow(pk)
        part = self._part_ids.get(key)
        if part is None:
            part = self._part_ids[key] = len(self._part_docs)
            self._part_docs.append(0)
            self._part_length.append(0.0)
        length = float(sum(terms.values()))
        version = int(self._doc_version[pk])
        for term, count in terms.items():
            postings = self._postings.get(term)
            if postings is None:
                postings = self._postings[term] = _Postings()
            postings.pks.append(pk)
            postings.tfs.append(count)
            postings.versions.append(version)
        self._doc_part[pk] = part
        self._doc_length[pk] = length
        self._part_docs[part] += 1
        self._part_length[part] += length
        self._live += 1
        if self._stale > 50_000 and self._stale > self._live:
            self.compact()

    def compact(self) -> None:
        """Drop postings of removed or rewritten documents."""
        for term in list(self._postings):
            old = self._postings[term]
            pks = np.frombuffer(old.pks, dtype=np.int64)
            keep = self._doc_version[pks] == np.frombuffer(old.versions, dtype=np.int64)
            keep &= self._doc_part[pks] >= 0
            if not keep.any():
                del self._postings[term]
                continue
            fresh = _Postings()
            fresh.pks.frombytes(pks[keep].tobytes())
            fresh.tfs.frombytes(np.frombuffer(old.tfs, dtype=np.float32)[keep].tobytes())
            fresh.versions.frombytes(np.frombuffer(old.versions, dtype=np.int64)[keep].tobytes())
            self._postings[term] = fresh
        self._stale = 0

    def search(
        self, key: PartitionKey, terms: list[str], limit: int | None
    ) -> list[tuple[int, float]]:
        """(pk, BM25 score) pairs, best first, for documents holding any of ``terms``."""
        return self.scores(key, terms).top(limit)

    def scores(self, key: PartitionKey, terms: list[str]) -> KeywordScores:
        """Every document of the scope holding any of ``terms``, with its BM25 score."""
        part = self._part_ids.get(key)
        if part is None or self._part_docs[part] == 0 or not terms:
            return _EMPTY
        docs = self._part_docs[part]
        avg_length = max(self._part_length[part] / docs, 1e-9)
        all_pks: list[npt.NDArray[np.int64]] = []
        all_scores: list[npt.NDArray[np.float64]] = []
        idf_sum = 0.0
        for term in dict.fromkeys(terms):
            postings = self._postings.get(term)
            if postings is None:
                idf_sum += bm25_idf(docs, 1)  # an absent term weighs as a rare one
                continue
            pks = np.frombuffer(postings.pks, dtype=np.int64)
            valid = (self._doc_part[pks] == part) & (
                self._doc_version[pks] == np.frombuffer(postings.versions, dtype=np.int64)
            )
            pks = pks[valid]
            idf = bm25_idf(docs, max(len(pks), 1))
            idf_sum += idf
            if len(pks) == 0:
                continue
            # Double precision, as PostgreSQL computes it (store/postgres/memories.py), each
            # share rounded to the grid: the sums below are of integers, exact in any order.
            tfs = np.frombuffer(postings.tfs, dtype=np.float32)[valid].astype(np.float64)
            lengths = self._doc_length[pks].astype(np.float64)
            share = idf * tfs * (K1 + 1.0) / (tfs + K1 * ((1.0 - B) + B * lengths / avg_length))
            all_pks.append(pks)
            all_scores.append(np.rint(share * GRID))
        if not all_pks:
            return KeywordScores(_EMPTY.pks, _EMPTY.scores, idf_sum)
        unique, inverse = np.unique(np.concatenate(all_pks), return_inverse=True)
        scores: npt.NDArray[np.float64] = (
            np.bincount(inverse, weights=np.concatenate(all_scores)).astype(np.float64) / GRID
        )
        return KeywordScores(unique, scores, idf_sum)
