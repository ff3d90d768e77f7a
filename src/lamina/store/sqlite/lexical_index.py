"""An in-process BM25 keyword index, partitioned by (tenant, layer, scope key).

Postings are append-only arrays per term. Every posting carries the version of the document
it was made from; updating or deleting a document bumps its version, so stale postings are
skipped at query time and dropped by compaction. BM25 statistics (document count, average
length, document frequency) are those of the searched scope alone.

Scores are computed by lamina.memory.bm25 (one BM25 for every store).
"""

from __future__ import annotations

from array import array

import numpy as np
import numpy.typing as npt

from lamina.memory.bm25 import NO_SCORES, KeywordScores, Postings, keyword_scores

PartitionKey = tuple[str, str, str]


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
            return NO_SCORES
        docs = self._part_docs[part]
        found: list[Postings | None] = []
        for term in dict.fromkeys(terms):
            postings = self._postings.get(term)
            if postings is None:
                found.append(None)
                continue
            pks = np.frombuffer(postings.pks, dtype=np.int64)
            valid = (self._doc_part[pks] == part) & (
                self._doc_version[pks] == np.frombuffer(postings.versions, dtype=np.int64)
            )
            pks = pks[valid]
            found.append(
                Postings(
                    pks,
                    np.frombuffer(postings.tfs, dtype=np.float32)[valid].astype(np.float64),
                    self._doc_length[pks].astype(np.float64),
                )
            )
        return keyword_scores(docs, self._part_length[part], found)
