"""Memories in PostgreSQL: the shared SQL; pgvector (HNSW, cosine) for semantic search,
BM25 over postings kept by triggers (``memory_terms``, ``memory_scope_stats``: migration
0008) for keywords, JSONB metadata filters (filters.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.embeddings.base import Embedder
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.bm25 import KeywordScores, Postings, keyword_scores
from lamina.memory.filters import MetadataFilter
from lamina.memory.models import MemoryEntry, SearchMode
from lamina.memory.ports import LayerHits, LayerSearch, NewMemory
from lamina.store.postgres.db import POSTGRES, Database
from lamina.store.postgres.filters import filter_sql
from lamina.store.sql.lifecycle import SqlMemoryLifecycle
from lamina.store.sql.memory_rows import Row

#: Candidates checked against a metadata filter per round trip.
_CHUNK = 500


#: One posting in a block of ``memory_postings``: memory seq, term count, memory length.
_POSTING = np.dtype([("seq", ">i8"), ("tf", ">f4"), ("length", ">f4")])


def _postings(packed: bytes) -> Postings:
    rows = np.frombuffer(packed, dtype=_POSTING)
    return Postings(
        rows["seq"].astype(np.int64),
        rows["tf"].astype(np.float64),
        rows["length"].astype(np.float64),
    )


class PostgresMemories(SqlMemoryLifecycle):
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
        (postings in ``memory_postings``), scored by lamina.memory.scoring exactly as the
        embedded store scores them (same terms, same BM25 statistics of the scope); then the
        whole rows of the hits."""
        req = self._searchable(request)
        pool = max(req.limit * 5, 50)
        found: dict[Any, Row] = {}
        terms = list(dict.fromkeys(req.terms))
        scores = None
        if req.mode is SearchMode.HYBRID and terms:
            # The keyword candidates while the query is still being embedded, in a
            # transaction of their own (BEGIN, the tenant and the postings in one round
            # trip): no connection waits on the embedder.
            async with self._db.transaction(req.tenant_id, "search", pipeline=True) as conn:
                scores = await self._bm25(conn, req, pool, found, terms)
        req = await req.resolved()
        async with self._db.transaction(req.tenant_id, "search", pipeline=True) as conn:
            if req.mode is SearchMode.KEYWORD and terms:
                scores = await self._bm25(conn, req, pool, found, terms)
            if req.mode is not SearchMode.KEYWORD:
                found.update((r[0], tuple(r)) for r in await self._nearest(conn, req, pool))
            keywords = {} if scores is None else scores.parts(found)
            ranked = self._rank(req, found, keywords)
            keys = [key for _, key in ranked.hits]
            rows: dict[Any, Row] = {}
            if keys:
                sql, params = self._hit_rows(req, keys)
                found_rows = await (await conn.execute(sql, params, binary=True)).fetchall()
                rows = {row[0]: tuple(row) for row in found_rows}
        return self._hits(ranked, rows)

    def _conditions(self, req: LayerSearch) -> tuple[str, list[Any]]:
        """The metadata filter and the time window of a search, over ``memories``."""
        where, params = filter_sql(req.filter)
        timing, times = self._candidates(req)
        return f"{where} AND {timing}", [*params, *times]

    async def _bm25(
        self, conn: Any, req: LayerSearch, pool: int, found: dict[Any, Row], terms: list[str]
    ) -> KeywordScores | None:
        """The BM25 scores of the scope's documents holding a query term (None: the scope is
        empty); the ``pool`` best matches that pass the filter and the time window are added
        to ``found`` (rows read).

        The query terms' postings come back in one round trip, each term's as one byte
        string: its blocks (``memory_postings``, migration 0014) joined in sequence order,
        16 bytes a posting. They are scored by lamina.memory.bm25: the code and the stored
        floats the embedded store scores with."""
        rows = await (
            await conn.execute(
                # One index range scan per term, its rows already in block order.
                "SELECT s.docs, s.length, t.term, (SELECT string_agg(b.postings, ''::bytea "
                "ORDER BY b.block) FROM memory_postings b WHERE b.tenant_id = s.tenant_id "
                "AND b.layer = s.layer AND b.scope_key = s.scope_key AND b.term = t.term) "
                "FROM memory_scope_stats s CROSS JOIN unnest(%s::text[]) AS t(term) "
                "WHERE s.tenant_id = %s AND s.layer = %s AND s.scope_key = %s AND s.docs > 0",
                (terms, req.tenant_id, req.scope.layer.value, req.scope.key),
                binary=True,
            )
        ).fetchall()
        if not rows:
            return None
        held = {str(r[2]): _postings(r[3]) for r in rows if r[3] is not None}
        scores = keyword_scores(int(rows[0][0]), float(rows[0][1]), [held.get(t) for t in terms])

        def best(cap: int | None) -> list[int]:
            return [seq for seq, _ in scores.top(cap)]

        found.update(await self._passing(conn, req, best, pool, found))
        return scores

    async def _passing(
        self,
        conn: Any,
        req: LayerSearch,
        ranking: Callable[[int | None], list[int]],
        want: int,
        found: dict[Any, Row],
    ) -> dict[Any, Row]:
        """Rows of the first ``want`` of the ranking (best first) that pass the filter and
        the time window (rows already ``found`` pass: the semantic search applied both).
        ``ranking(cap)`` gives the ``cap`` best (None: all): the first ``want`` are read, and
        more only when some of them did not pass (as the embedded store reads them)."""
        where, params = self._conditions(req)
        out: dict[Any, Row] = {}
        kept = 0
        cap: int | None = want if req.filter.empty else None
        done = 0
        while True:
            ranked = ranking(cap)
            step = max(want - kept, _CHUNK if done else want)
            for start in range(done, len(ranked), step):
                chunk = ranked[start : start + step]
                missing = [seq for seq in chunk if seq not in found]
                rows: dict[Any, Row] = {}
                if missing:
                    fetched = await (
                        await conn.execute(
                            f"SELECT seq, {self._scoring_columns()} FROM memories "  # noqa: S608
                            f"WHERE tenant_id = %s AND seq = ANY(%s) AND {where}",
                            (req.tenant_id, missing, *params),
                            binary=True,  # vectors as float32 bytes, not text to parse
                        )
                    ).fetchall()
                    rows = {r[0]: tuple(r) for r in fetched}
                for seq in chunk:
                    if kept < want and (seq in found or seq in rows):
                        kept += 1
                        if seq in rows:
                            out[seq] = rows[seq]
                done = start + len(chunk)
                if kept >= want:
                    return out
            if cap is None or len(ranked) < cap:
                return out  # every candidate was read
            cap *= 8

    async def _nearest(self, conn: Any, req: LayerSearch, want: int) -> list[Any]:
        """The rows (key, then ``_scoring_columns``) of the ``want`` nearest candidates."""
        assert req.vector is not None
        where, params = self._conditions(req)
        query = self._d.vector(req.vector)
        # Iterative scans return rows in relaxed order: fetch more than wanted, sort, cut.
        # Measured at 1M memories (benchmarks/pg_hnsw_sweep.py, 40 rows fetched): recall@10
        # 0.970 at ef_search 100, 0.980 at 200 (the default), 0.982 at 400.
        fetch = min(1000, max(40, want * 2))
        await conn.execute(f"SET LOCAL hnsw.ef_search = {max(self._ef_search, fetch)}")
        # The index scan yields ``fetch`` candidates (ids and distances only); the ranking's
        # columns are read for the ``want`` nearest of them.
        cursor = await conn.execute(
            "WITH c AS MATERIALIZED (SELECT id, embedding <=> %s AS d FROM memories "  # noqa: S608
            "WHERE tenant_id = %s AND layer = %s AND scope_key = %s "
            f"AND embedding IS NOT NULL AND {where} "
            "ORDER BY embedding <=> %s LIMIT %s) "
            f"SELECT m.seq, {self._scoring_columns('m')} "
            "FROM c JOIN memories m "
            "ON m.tenant_id = %s AND m.id = c.id ORDER BY c.d, m.seq LIMIT %s",
            (
                query,
                req.tenant_id,
                req.scope.layer.value,
                req.scope.key,
                *params,
                query,
                fetch,
                req.tenant_id,
                want,
            ),
            binary=True,  # vectors as float32 bytes, not text to parse
        )
        return list(await cursor.fetchall())
