"""An in-process BM25 keyword index, partitioned by (tenant, layer, scope key).

Every posting carries the version of the document it was made from; updating or deleting a
document bumps its version, so stale postings are skipped at query time and dropped when the
postings are merged. BM25 statistics (document count, average length, document frequency)
are those of the searched scope alone.

Memory: terms are numbered once (a dict from term to id), and the postings sit in a few flat
arrays, never in an object per term (most terms of a real vocabulary, and every number or
name, are held by a few documents: with three arrays per term, the index of 100k memories
of the benchmark corpus took 63 MB, now 25 MB). The postings read since the last merge are
grouped by term in contiguous arrays (``_starts``: term ``t``'s are at ``_starts[t]:
_starts[t + 1]``); those written since are appended to flat arrays (``_recent``), and merged
into the grouped ones when a search finds them more than ``MERGE_SHARE`` of the whole
(``merge``: a stable sort by term, which also drops the stale). A posting takes 12 bytes
(pk, count, version), and 16 while recent. Keys (row ids) must fit in 31 bits, as the
per-document arrays indexed by them already require.

Scores are computed by lamina.memory.bm25 (one BM25 for every store).
"""

from __future__ import annotations

from array import array

import numpy as np
import numpy.typing as npt

from lamina.memory.bm25 import NO_SCORES, KeywordScores, Postings, keyword_scores

PartitionKey = tuple[str, str, str]
I32 = npt.NDArray[np.int32]
#: Recent postings are merged into the grouped ones past this share of all postings...
MERGE_SHARE = 1 / 16
#: ... and past this many.
MERGE_MIN = 8192


class _Recent:
    """Postings appended since the last merge, in order, one entry in each array."""

    __slots__ = ("pks", "terms", "tfs", "versions")

    def __init__(self) -> None:
        self.terms = array("i")
        self.pks = array("i")
        self.tfs = array("f")
        self.versions = array("i")

    def __len__(self) -> int:
        return len(self.terms)


class LexicalIndex:
    """Not thread-safe by itself: the owning store serialises access."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._term_ids: dict[str, int] = {}
        self._starts: npt.NDArray[np.int64] = np.zeros(1, dtype=np.int64)
        self._pks: I32 = np.empty(0, dtype=np.int32)
        self._tfs: npt.NDArray[np.float32] = np.empty(0, dtype=np.float32)
        self._versions: I32 = np.empty(0, dtype=np.int32)
        self._recent = _Recent()
        self._part_ids: dict[PartitionKey, int] = {}
        self._part_docs: list[int] = []
        self._part_length: list[float] = []
        size = 1024
        self._doc_part: I32 = np.full(size, -1, dtype=np.int32)
        self._doc_version: I32 = np.zeros(size, dtype=np.int32)
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
            [self._doc_version, np.zeros(new - size, dtype=np.int32)]
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
        self._live -= 1
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
        ids = self._term_ids
        recent = self._recent
        for term, count in terms.items():
            term_id = ids.get(term)
            if term_id is None:
                term_id = ids[term] = len(ids)
            recent.terms.append(term_id)
            recent.pks.append(pk)
            recent.tfs.append(count)
            recent.versions.append(version)
        self._doc_part[pk] = part
        self._doc_length[pk] = length
        self._part_docs[part] += 1
        self._part_length[part] += length
        self._live += 1
        if self._stale > 50_000 and self._stale > self._live:
            self.compact()

    def merge(self) -> None:
        """Group the recent postings with the others by term, dropping the stale ones."""
        recent = self._recent
        terms = np.concatenate(
            [
                np.repeat(np.arange(len(self._starts) - 1, dtype=np.int32), np.diff(self._starts)),
                np.frombuffer(recent.terms, dtype=np.int32),
            ]
        )
        pks = np.concatenate([self._pks, np.frombuffer(recent.pks, dtype=np.int32)])
        tfs = np.concatenate([self._tfs, np.frombuffer(recent.tfs, dtype=np.float32)])
        versions = np.concatenate([self._versions, np.frombuffer(recent.versions, dtype=np.int32)])
        self._recent = _Recent()
        keep = (self._doc_version[pks] == versions) & (self._doc_part[pks] >= 0)
        terms, pks, tfs, versions = terms[keep], pks[keep], tfs[keep], versions[keep]
        order = np.argsort(terms, kind="stable")
        self._pks, self._tfs, self._versions = pks[order], tfs[order], versions[order]
        counts = np.bincount(terms, minlength=len(self._term_ids))
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    @property
    def term_count(self) -> int:
        """Terms the index holds, those only removed documents held included until the
        next compaction."""
        return len(self._term_ids)

    def compact(self) -> None:
        """Drop postings of removed or rewritten documents, and terms no document holds."""
        self.merge()
        held = np.flatnonzero(np.diff(self._starts))
        if len(held) < len(self._term_ids):
            names = list(self._term_ids)
            self._term_ids = {names[t]: i for i, t in enumerate(held.tolist())}
            self._starts = np.concatenate([[0], np.cumsum(np.diff(self._starts)[held])])
        self._stale = 0

    def search(
        self, key: PartitionKey, terms: list[str], limit: int | None
    ) -> list[tuple[int, float]]:
        """(pk, BM25 score) pairs, best first, for documents holding any of ``terms``."""
        return self.scores(key, terms).top(limit)

    def _postings(self, term_id: int, recent_at: I32) -> tuple[I32, npt.NDArray[np.float32], I32]:
        """One term's postings (pks, counts, versions): grouped, then recent (``recent_at``:
        positions in the recent arrays of the query's terms)."""
        lo, hi = int(self._starts[term_id]), int(self._starts[term_id + 1])
        if not len(recent_at):
            return self._pks[lo:hi], self._tfs[lo:hi], self._versions[lo:hi]
        recent = self._recent
        mine = recent_at[np.frombuffer(recent.terms, dtype=np.int32)[recent_at] == term_id]
        return (
            np.concatenate([self._pks[lo:hi], np.frombuffer(recent.pks, dtype=np.int32)[mine]]),
            np.concatenate([self._tfs[lo:hi], np.frombuffer(recent.tfs, dtype=np.float32)[mine]]),
            np.concatenate(
                [self._versions[lo:hi], np.frombuffer(recent.versions, dtype=np.int32)[mine]]
            ),
        )

    def scores(self, key: PartitionKey, terms: list[str]) -> KeywordScores:
        """Every document of the scope holding any of ``terms``, with its BM25 score."""
        part = self._part_ids.get(key)
        if part is None or self._part_docs[part] == 0 or not terms:
            return NO_SCORES
        if len(self._recent) > max(MERGE_MIN, MERGE_SHARE * len(self._pks)):
            self.merge()
        if len(self._starts) <= len(self._term_ids):  # terms new since the merge: none grouped
            grown = np.full(len(self._term_ids) + 1 - len(self._starts), self._starts[-1])
            self._starts = np.concatenate([self._starts, grown])
        ids = [self._term_ids.get(term) for term in dict.fromkeys(terms)]
        recent_at: I32 = np.empty(0, dtype=np.int32)
        if len(self._recent):
            wanted = np.array([t for t in ids if t is not None], dtype=np.int32)
            held = np.isin(np.frombuffer(self._recent.terms, dtype=np.int32), wanted)
            recent_at = np.flatnonzero(held).astype(np.int32)
        found: list[Postings | None] = []
        for term_id in ids:
            if term_id is None:
                found.append(None)
                continue
            pks, tfs, versions = self._postings(term_id, recent_at)
            valid = (self._doc_part[pks] == part) & (self._doc_version[pks] == versions)
            pks = pks[valid]
            found.append(
                Postings(
                    pks.astype(np.int64),
                    tfs[valid].astype(np.float64),
                    self._doc_length[pks].astype(np.float64),
                )
            )
        return keyword_scores(self._part_docs[part], self._part_length[part], found)
