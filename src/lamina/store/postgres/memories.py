"""Memories in PostgreSQL: the shared SQL; pgvector (HNSW, cosine) for semantic search,
BM25 over postings kept by triggers (``memory_terms``, ``memory_scope_stats``: migration
0008) for keywords, JSONB metadata filters (filters.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina.embeddings.base import Embedder
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import MetadataFilter
from lamina.memory.models import MemoryEntry, SearchMode
from lamina.memory.ports import LayerHits, LayerSearch, NewMemory
from lamina.memory.scoring import BM25_B, BM25_GRID, BM25_K1, bm25_idf, keyword_part
from lamina.store.postgres.db import POSTGRES, Database
from lamina.store.postgres.filters import filter_sql
from lamina.store.sql.memories import ENTRY, Row, SqlMemories

_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in f"seq, {ENTRY}".split(","))


class PostgresMemories(SqlMemories):
    # Row-level security hides every tenant from a transaction without one: a function
    # (migration 0011) names the tenants with expired memories.
    expired_tenants_sql = "SELECT tenant_id FROM lamina_expired_tenants(%s, %s)"

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
        """Candidates: the ``pool`` nearest by vector (HNSW) and the ``pool`` best by BM25
        (postings in ``memory_terms``), scored by lamina.memory.scoring exactly as the
        embedded store scores them (same terms, same BM25 statistics of the scope)."""
        req = self._searchable(request)
        pool = max(req.limit * 5, 50)
        found: dict[Any, Row] = {}
        keywords: dict[Any, float] = {}
        async with self._db.transaction(req.tenant_id, "search") as conn:
            if req.mode is not SearchMode.KEYWORD:
                found.update((r[0], r) for r, _ in await self._semantic(conn, req, None, pool))
            if req.mode is not SearchMode.SEMANTIC:
                keywords = await self._bm25(conn, req, pool, found)
        return self._ranked(req, found, keywords)

    def _conditions(self, req: LayerSearch) -> tuple[str, list[Any]]:
        """The metadata filter and the time window of a search, over ``memories``."""
        where, params = filter_sql(req.filter)
        timing, times = self._candidates(req)
        return f"{where} AND {timing}", [*params, *times]

    async def _bm25(
        self, conn: Any, req: LayerSearch, pool: int, found: dict[Any, Row]
    ) -> dict[Any, float]:
        """The keyword part of every candidate: the ``pool`` best BM25 matches that pass the
        filter and the time window are added to ``found`` (rows read), and those already
        there get theirs. Without a metadata filter the best are ranked first and their
        rows checked; only when some fail (invalid or expired memories among them) is the
        ranking joined with the rows."""
        terms = list(dict.fromkeys(req.terms))
        if not terms:
            return {}
        joined = not req.filter.empty
        while True:
            scored = await self._bm25_scores(conn, req, terms, pool, found, joined)
            documents = next((int(r[2]) for r in scored if r[0] == 3), 0)
            if not documents:
                return {}
            top = [r[1] for r in scored if r[0] == 1 and r[1] not in found]
            rows = await self._candidate_rows(conn, req, top)
            ranked = sum(1 for r in scored if r[0] == 1)
            if joined or ranked < pool or ranked - len(top) + len(rows) >= pool:
                break
            joined = True
        found.update(rows)
        frequency = {str(r[3]): int(r[2]) for r in scored if r[0] == 0}
        idf_sum = sum(bm25_idf(documents, max(frequency.get(t, 0), 1)) for t in terms)
        bm25 = {r[1]: float(r[2]) for r in scored if r[0] in (1, 2)}
        return {seq: keyword_part(bm25.get(seq, 0.0), idf_sum) for seq in found}

    async def _candidate_rows(self, conn: Any, req: LayerSearch, seqs: list[Any]) -> dict[Any, Row]:
        """The rows of ``seqs`` within the search's time window."""
        if not seqs:
            return {}
        timing, params = self._candidates(req)
        rows = await (
            await conn.execute(
                f"SELECT {self._columns}, context_embedding, context FROM memories "  # noqa: S608
                f"WHERE tenant_id = %s AND seq = ANY(%s) AND {timing}",
                (req.tenant_id, seqs, *params),
                binary=True,  # vectors as float32 bytes, not text to parse
            )
        ).fetchall()
        return {r[0]: tuple(r) for r in rows}

    async def _bm25_scores(
        self,
        conn: Any,
        req: LayerSearch,
        terms: list[str],
        pool: int,
        found: dict[Any, Row],
        joined: bool,
    ) -> list[tuple[Any, ...]]:
        """BM25 in one statement (``joined``: the ``pool`` best passing the filter and the
        time window, else the ``pool`` best)."""
        scope = (req.tenant_id, req.scope.layer.value, req.scope.key)
        where, params = self._conditions(req)
        join = (
            f"JOIN memories m ON m.tenant_id = %s AND m.seq = s.memory_seq WHERE {where} "
            if joined
            else ""
        )
        join_params = [req.tenant_id, *params] if joined else []
        # One pass over the query terms' postings (one index range per term whatever the
        # statistics say; OFFSET 0 keeps it so): document frequencies, then BM25 per memory,
        # each term's share computed as the embedded store computes it (the same IDF: ln of
        # the same doubles) and summed on the BM25_GRID in integers, exact in any order: the
        # same bits. Rows: (0, -, frequency, term),
        # then (1, seq, score) for the best ``pool`` that pass the filter, then (2, seq,
        # score) for the candidates already found, and (3, -, documents).
        scored = await (
            await conn.execute(
                "WITH st AS (SELECT docs::float8 AS n, greatest(length / docs, 1e-9) AS avg "  # noqa: S608
                "FROM memory_scope_stats WHERE tenant_id = %s AND layer = %s "
                "AND scope_key = %s AND docs > 0), "
                "p AS MATERIALIZED (SELECT t.* FROM unnest(%s::text[]) AS q(term) "
                "CROSS JOIN LATERAL (SELECT x.term, x.memory_seq, x.tf, x.doc_length "
                "FROM memory_terms x WHERE x.tenant_id = %s AND x.layer = %s "
                "AND x.scope_key = %s AND x.term = q.term OFFSET 0) t "
                "WHERE EXISTS (SELECT 1 FROM st)), "
                "d AS (SELECT term, count(*)::float8 AS df FROM p GROUP BY term), "
                "w AS (SELECT term, df, ln(1.0 + (st.n - df + 0.5) / (df + 0.5)) AS idf "
                "FROM d CROSS JOIN st), "
                "s AS MATERIALIZED (SELECT p.memory_seq, (sum(round(w.idf * p.tf * %s / "
                "(p.tf + %s * (%s + %s * p.doc_length / st.avg)) * %s)::bigint)::float8 / %s) "
                "AS score FROM p JOIN w USING (term) CROSS JOIN st GROUP BY p.memory_seq) "
                "(SELECT 0, NULL::bigint, d.df, d.term FROM d) UNION ALL "
                f"(SELECT 1, s.memory_seq, s.score, NULL FROM s {join}"
                "ORDER BY s.score DESC, s.memory_seq LIMIT %s) UNION ALL "
                "(SELECT 2, memory_seq, score, NULL FROM s WHERE memory_seq = ANY(%s)) "
                "UNION ALL (SELECT 3, NULL, st.n, NULL FROM st)",
                (
                    *scope,
                    terms,
                    *scope,
                    BM25_K1 + 1.0,
                    BM25_K1,
                    1.0 - BM25_B,
                    BM25_B,
                    BM25_GRID,
                    BM25_GRID,
                    *join_params,
                    pool,
                    list(found),
                ),
            )
        ).fetchall()
        return list(scored)

    async def _semantic(
        self, conn: Any, req: LayerSearch, min_score: float | None, want: int
    ) -> list[tuple[Row, float]]:
        assert req.vector is not None
        where, params = self._conditions(req)
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
                binary=True,  # vectors as float32 bytes, not text to parse
            )
        ).fetchall()
        return [(tuple(r[:-1]), float(r[-1])) for r in rows]
