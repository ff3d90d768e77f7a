"""Context items (lamina.memory.ports) in the SQLite file: the shared SQL, searched through
the same in-process vector and BM25 indexes as memories (partition: tenant, kind)."""

from __future__ import annotations

from collections.abc import Sequence

from lamina.memory.items import ContextRecord, ItemQuery
from lamina.memory.models import SearchMode
from lamina.store.sql.context_items import SqlContextItems, rank
from lamina.store.sql.meta import EmbeddingState
from lamina.store.sqlite.db import SQLITE, Database
from lamina.store.sqlite.indexes import SyncedIndexes


def _tag_match(tags: Sequence[str], wanted: Sequence[str]) -> bool:
    return not wanted or bool(set(tags) & set(wanted))


class SQLiteContextItems(SqlContextItems):
    """The ContextItemStore protocol on the embedded store's file."""

    def __init__(self, db: Database, indexes: SyncedIndexes, embedding: EmbeddingState) -> None:
        super().__init__(db, SQLITE, embedding)
        self._db = db
        self._indexes = indexes

    async def search_items(self, query: ItemQuery) -> list[tuple[ContextRecord, float]]:
        return await self._db.call("search", self._search, self._searchable(query))

    def _search(self, q: ItemQuery) -> list[tuple[ContextRecord, float]]:
        self._indexes.sync()
        part = (q.tenant_id, q.kind.value, "")
        filtered = q.category is not None or bool(q.tags)
        # With filters, rank a wider pool from the indexes and filter the rows read.
        pool = max(q.limit * 10 if filtered else q.limit, 50)
        keyword: dict[int, float] = {}
        cosines: dict[int, float | None] = {}
        if q.mode is not SearchMode.SEMANTIC and q.terms:
            keyword = dict(self._indexes.keyword_hits(part, list(q.terms), pool))
        if q.mode is not SearchMode.KEYWORD and q.vector is not None:
            cosines = dict(self._indexes.vector_hits(part, q.vector, None, pool))
        if q.mode is SearchMode.HYBRID:
            assert q.vector is not None
            cosines.update(self._indexes.cosines(keyword.keys() - cosines.keys(), q.vector))
        # Without filters the first ``limit`` are the answer: read only their rows.
        ranked = rank(q, keyword, cosines, pool)[: pool if filtered else q.limit]
        if not ranked:
            return []
        pks = [pk for _, pk in ranked]
        with self._db.snapshot() as conn:
            rows = {
                r[0]: r
                for lo in range(0, len(pks), 500)
                for r in conn.execute(
                    f"SELECT {self._columns} FROM context_items WHERE pk IN "  # noqa: S608
                    f"({', '.join('?' * len(pks[lo : lo + 500]))}) AND is_latest = 1",
                    pks[lo : lo + 500],
                )
            }
        out = []
        for score, pk in ranked:
            row = rows.get(pk)
            if row is None:
                continue
            record = self.record_of_row(row)
            if q.category is not None and record.category != q.category:
                continue
            if not _tag_match(record.tags, q.tags):
                continue
            out.append((record, max(0.0, min(1.0, float(score)))))
            if len(out) == q.limit:
                break
        return out
