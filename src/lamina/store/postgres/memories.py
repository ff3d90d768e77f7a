"""Memories in PostgreSQL: the shared SQL; pgvector (HNSW, cosine) for semantic search,
tsvector + GIN for keywords, JSONB metadata filters (filters.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.embeddings.base import Embedder
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import MetadataFilter
from lamina.memory.models import MemoryEntry, SearchMode
from lamina.memory.ports import LayerHits, LayerSearch, NewMemory
from lamina.memory.scoring import CONTEXT_TERM_WEIGHT
from lamina.store.postgres.db import POSTGRES, Database
from lamina.store.postgres.filters import ANY_WORD_CAP, choose_keyword_level, filter_sql
from lamina.store.sql.memories import ENTRY, Row, SqlMemories
from lamina.text import keyword_terms, weighted_terms

_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in f"seq, {ENTRY}".split(","))


class PostgresMemories(SqlMemories):
    def __init__(self, db: Database, embedder: Embedder, ef_search: int) -> None:
        super().__init__(db, POSTGRES, embedder)
        self._db = db
        self._ef_search = ef_search

    def _filter(self, flt: MetadataFilter) -> tuple[str, list[Any]]:
        return filter_sql(flt)

    async def bulk_add(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        if len({m.tenant_id for m in memories}) > 1:
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, "bulk_add takes one tenant per call")
        return await super().bulk_add(memories, actor=actor)

    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]:
        async with self._db.transaction(tenant_id, "count_by_layer") as conn:
            if tenant_id is None:
                rows = await (await conn.execute("SELECT * FROM lamina_layer_counts()")).fetchall()
            else:
                rows = await (
                    await conn.execute(
                        "SELECT layer, count(*) FROM memories WHERE tenant_id = %s GROUP BY layer",
                        (tenant_id,),
                    )
                ).fetchall()
        return {str(layer): int(n) for layer, n in rows}

    # -- search -----------------------------------------------------------------------------

    async def search(self, request: LayerSearch) -> LayerHits:
        """Candidates: the ``pool`` nearest by vector (HNSW) and the ``pool`` best keyword
        matches (GIN, ts_rank order), scored by lamina.memory.scoring. The keyword part is
        the share of the query's terms a memory holds (its own words count fully, its
        neighbourhood's half), not yet the embedded store's BM25."""
        req = self._searchable(request)
        pool = max(req.limit * 5, 50)
        found: dict[Any, Row] = {}
        async with self._db.transaction(req.tenant_id, "search") as conn:
            if req.mode is not SearchMode.KEYWORD:
                found.update((r[0], r) for r, _ in await self._semantic(conn, req, None, pool))
            if req.mode is not SearchMode.SEMANTIC:
                found.update((r[0], r) for r, _ in await self._keyword(conn, req, pool))
        cosines: dict[Any, float | None] = {}
        contexts: dict[Any, float | None] = {}
        query = req.vector
        if query is not None and req.mode is not SearchMode.KEYWORD:
            for seq, r in found.items():
                vector = self._d.from_vector(r[10])
                cosines[seq] = None if vector is None else float(vector @ query)
                context = None if r[11] is None else np.frombuffer(r[11], dtype=np.float32)
                usable = context is not None and vector is not None and len(context) == len(vector)
                contexts[seq] = float(context @ query) if usable and context is not None else None
        keywords: dict[Any, float] = {}
        if req.mode is not SearchMode.SEMANTIC and req.terms:
            wanted = set(req.terms)
            for seq, r in found.items():
                terms = weighted_terms(r[5], r[12], CONTEXT_TERM_WEIGHT)
                held = sum(min(terms.get(t, 0.0), 1.0) for t in wanted)
                keywords[seq] = held / len(wanted)
        return self._ranked(req, found, cosines, contexts, keywords)

    async def _semantic(
        self, conn: Any, req: LayerSearch, min_score: float | None, want: int
    ) -> list[tuple[Row, float]]:
        assert req.vector is not None
        where, params = filter_sql(req.filter)
        query = self._d.vector(req.vector)
        threshold = "" if min_score is None else " AND 1 - (embedding <=> %s) >= %s"
        extra: list[Any] = [] if min_score is None else [query, min_score]
        # Iterative scans return rows in relaxed order: fetch more than wanted, sort, cut.
        # Measured at 1M memories (benchmarks/pg_hnsw_sweep.py, 40 rows fetched): recall@10
        # 0.970 at ef_search 100, 0.980 at 200 (the default), 0.982 at 400.
        fetch = min(1000, max(40, want * 2))
        await conn.execute(f"SET LOCAL hnsw.ef_search = {max(self._ef_search, fetch)}")
        # The index scan yields ``fetch`` candidates (ids and distances only); whole rows are
        # read for the ``want`` nearest of them.
        rows = await (
            await conn.execute(
                "WITH c AS MATERIALIZED (SELECT id, embedding <=> %s AS d FROM memories "  # noqa: S608
                "WHERE tenant_id = %s AND layer = %s AND scope_key = %s "
                f"AND embedding IS NOT NULL AND {where}{threshold} "
                "ORDER BY embedding <=> %s LIMIT %s) "
                f"SELECT {_M_COLUMNS}, m.context_embedding, m.context, 1 - c.d AS score "
                "FROM c JOIN memories m "
                "ON m.tenant_id = %s AND m.id = c.id ORDER BY c.d, m.seq LIMIT %s",
                (
                    query,
                    req.tenant_id,
                    req.scope.layer.value,
                    req.scope.key,
                    *params,
                    *extra,
                    query,
                    fetch,
                    req.tenant_id,
                    want,
                ),
            )
        ).fetchall()
        return [(tuple(r[:-1]), float(r[-1])) for r in rows]

    async def _keyword(self, conn: Any, req: LayerSearch, want: int) -> list[tuple[Row, float]]:
        words = keyword_terms(req.text)
        if not words:
            return []
        where, params = filter_sql(req.filter)
        scope = (req.tenant_id, req.scope.layer.value, req.scope.key)
        base = "FROM memories WHERE tenant_id = %s AND layer = %s AND scope_key = %s "
        level, any_word = await choose_keyword_level(
            conn,
            f"SELECT count(*) FROM (SELECT 1 {base}AND tsv @@ to_tsquery('english', %s) "  # noqa: S608
            f"AND {where} LIMIT %s) s",
            scope,
            tuple(params),
            words,
            want,
        )
        cap = f" LIMIT {ANY_WORD_CAP}" if any_word else ""
        rows = await (
            await conn.execute(
                f"SELECT {self._columns}, context_embedding, context, "  # noqa: S608
                "ts_rank(tsv, to_tsquery('english', %s), 1) AS score "
                f"FROM (SELECT * {base}AND tsv @@ to_tsquery('english', %s) AND {where}{cap}) m "
                "ORDER BY score DESC, seq LIMIT %s",
                (" | ".join(words), *scope, level, *params, want),
            )
        ).fetchall()
        return [(tuple(r[:-1]), float(r[-1])) for r in rows]
