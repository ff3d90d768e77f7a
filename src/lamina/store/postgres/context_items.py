"""Context items (lamina.memory.ports) in PostgreSQL: the shared SQL, searched with HNSW and
tsvector + GIN over the latest versions (partial indexes), row-level security on tenant_id."""

from __future__ import annotations

from typing import Any

from lamina.memory.items import ContextRecord, ItemQuery
from lamina.memory.models import SearchMode
from lamina.store.postgres.db import POSTGRES, Database
from lamina.store.postgres.filters import (
    ANY_WORD_CAP,
    choose_keyword_level,
    from_pg_vector,
    to_pg_vector,
)
from lamina.store.sql.context_items import SqlContextItems, rank
from lamina.store.sql.meta import EmbeddingState
from lamina.store.sql.rows import RecordRow
from lamina.text import keyword_terms


class PostgresContextItems(SqlContextItems):
    """The ContextItemStore protocol on the PostgreSQL store's pool and transactions."""

    def __init__(self, db: Database, ef_search: int, embedding: EmbeddingState) -> None:
        super().__init__(db, POSTGRES, embedding)
        self._db = db
        self._ef_search = ef_search

    async def search_items(self, query: ItemQuery) -> list[tuple[ContextRecord, float]]:
        q = self._searchable(query)
        filtered = q.category is not None or bool(q.tags)
        pool = max(q.limit * (10 if filtered else 1), 50)
        where, params = self.latest_where(q.tenant_id, q.kind, q.category, q.tags)
        columns = self._columns
        rows: dict[int, Any] = {}
        keyword: dict[int, float] = {}
        cosines: dict[int, float | None] = {}
        async with self._db.transaction(q.tenant_id, "search") as conn:
            words = keyword_terms(q.text)
            if q.mode is not SearchMode.SEMANTIC and words:
                level, any_word = await choose_keyword_level(
                    conn,
                    f"SELECT count(*) FROM (SELECT 1 FROM context_items WHERE {where} "  # noqa: S608
                    "AND tsv @@ to_tsquery('english', %s) LIMIT %s) s",
                    tuple(params),
                    (),
                    words,
                    pool,
                )
                cap = f" LIMIT {ANY_WORD_CAP}" if any_word else ""
                for r in await (
                    await conn.execute(
                        f"SELECT {columns}, ts_rank(tsv, to_tsquery('english', %s), 1) "  # noqa: S608
                        f"FROM (SELECT * FROM context_items WHERE {where} "
                        f"AND tsv @@ to_tsquery('english', %s){cap}) c "
                        "ORDER BY 15 DESC, seq LIMIT %s",
                        (" | ".join(words), *params, level, pool),
                    )
                ).fetchall():
                    rows[r[0]] = r
                    keyword[r[0]] = float(RecordRow(*r).score)
            if q.mode is not SearchMode.KEYWORD and q.vector is not None:
                vector = to_pg_vector(q.vector)
                await conn.execute(f"SET LOCAL hnsw.ef_search = {max(self._ef_search, pool)}")
                for r in await (
                    await conn.execute(
                        f"SELECT {columns}, 1 - (embedding <=> %s) FROM context_items "  # noqa: S608
                        f"WHERE {where} AND embedding IS NOT NULL "
                        "ORDER BY embedding <=> %s LIMIT %s",
                        (vector, *params, vector, pool),
                    )
                ).fetchall():
                    rows[r[0]] = r
                    cosines[r[0]] = float(RecordRow(*r).score)
        if q.mode is SearchMode.HYBRID:
            assert q.vector is not None
            for seq in keyword.keys() - cosines.keys():
                vector_value = from_pg_vector(RecordRow(*rows[seq]).embedding)
                cosines[seq] = None if vector_value is None else float(vector_value @ q.vector)
        return [
            (self.record_of_row(rows[seq]), max(0.0, min(1.0, float(score))))
            for score, seq in rank(q, keyword, cosines, q.limit)[: q.limit]
        ]
