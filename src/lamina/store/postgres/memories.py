"""Memories in PostgreSQL: what differs from the shared SQL (lamina.store.sql). The reads
repository searches with pgvector (HNSW, cosine) and BM25 over postings kept by triggers
(``memory_terms``, ``memory_scope_stats``: migration 0008), with JSONB metadata filters
(filters.py); the owners repository counts in SQL; the writes repository takes one
tenant per ``bulk_add``; row-level security has expired tenants named by a function."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.bm25 import KeywordScores, Postings, keyword_scores
from lamina.memory.models import MemoryEntry, SearchMode
from lamina.memory.ports import LayerHits, LayerSearch, NewMemory
from lamina.memory.scoring import Candidate, Ranked, exact_needed
from lamina.store.postgres.db import Database
from lamina.store.postgres.filters import filter_sql
from lamina.store.sql.memory_reads import SqlMemoryReads, cosines, ranked_chunks
from lamina.store.sql.memory_rows import MemoryRows, Row
from lamina.store.sql.memory_writes import SqlMemoryWrites
from lamina.store.sql.owners import SqlMemoryOwners
from lamina.store.sql.rows import EntryRow, ScoringRow

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


#: Tenants with expired memories (the forgetting repository's ``expired_tenants``): row-level
#: security hides every tenant from a transaction without one, so a function (migration
#: 0011) names them.
EXPIRED_TENANTS = "SELECT tenant_id FROM lamina_expired_tenants(%s, %s)"


class PostgresMemoryWrites(SqlMemoryWrites):
    """The writes repository; a ``bulk_add`` writes one tenant's memories (one tenant per
    transaction, as row-level security sets it)."""

    async def bulk_add(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        if len({m.tenant_id for m in memories}) > 1:
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, "bulk_add takes one tenant per call")
        return await super().bulk_add(memories, actor=actor)


class PostgresOwners(SqlMemoryOwners):
    """The owners repository; the counts by layer in SQL (across tenants: a function)."""

    def __init__(self, rows: MemoryRows, db: Database) -> None:
        super().__init__(rows)
        self._db = db

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


class PostgresMemoryReads(SqlMemoryReads):
    """The reads repository, searching with pgvector and the BM25 postings."""

    def __init__(self, rows: MemoryRows, db: Database, ef_search: int) -> None:
        super().__init__(rows)
        self._db = db
        self._ef_search = ef_search

    async def search(self, request: LayerSearch) -> LayerHits:
        """Candidates: the ``pool`` nearest by vector (HNSW, or the scope's rows when the
        planner finds that cheaper) and the ``pool`` best by BM25 (postings in
        ``memory_postings``), scored by lamina.memory.scoring exactly as the embedded store
        scores them (same terms, same BM25 statistics of the scope, same floats).

        The database computes each candidate's two cosines, so a candidate costs a few
        floats instead of its two vectors (~3 kB). Its float order is not NumPy's: the
        cosines are exact only to a bound, and ``scoring.exact_needed`` names the
        candidates whose exact cosines can change the result (the hits and a few near
        them); their whole rows, vectors included, are read, their cosines computed as the
        embedded store computes them, and they are ranked again: the same hits, order and
        scores to the last bit."""
        req = self._searchable(request)
        pool = max(req.limit * 5, 50)
        terms = list(dict.fromkeys(req.terms))
        scores = None
        if req.mode is SearchMode.HYBRID and terms:
            # The keyword postings while the query is still being embedded, in a
            # transaction of their own: no connection waits on the embedder.
            async with self._db.transaction(req.tenant_id, "search", pipeline=True) as conn:
                scores = await self._bm25(conn, req, terms)
        req = await req.resolved()
        query = None if req.mode is SearchMode.KEYWORD else req.vector
        # One snapshot: the rows whose vectors are read again are the candidates ranked.
        async with self._db.transaction(
            req.tenant_id, "search", pipeline=True, snapshot=True
        ) as conn:
            if req.mode is SearchMode.KEYWORD and terms:
                scores = await self._bm25(conn, req, terms)
            # Both candidate reads go out before either is waited for: one round trip.
            nearest = None if query is None else await self._nearest(conn, req, pool, query)
            found: dict[Any, Row] = {}
            if scores is not None:
                ranking = scores.top
                found.update(
                    await self._passing(
                        conn, req, lambda cap: [seq for seq, _ in ranking(cap)], pool, query
                    )
                )
            if nearest is not None:
                found.update((r[0], tuple(r)) for r in await nearest.fetchall())
            keywords = {} if scores is None else scores.parts(found)
            keys = list(found)
            scoring = [ScoringRow(*found[k]) for k in keys]
            candidates = [
                self._candidate(r, r.own, r.around, keywords.get(r.key, 0.0)) for r in scoring
            ]
            if query is None:  # no cosines: this ranking is exact as it is
                ranked = self._ranked(req, candidates)
                if not ranked.hits:
                    return LayerHits([], ranked.below_threshold)
                sql, params = self._hit_rows(req, [key for _, key in ranked.hits])
                hits = await (await conn.execute(sql, params, binary=True)).fetchall()
                return self._hits(ranked, {row[0]: tuple(row) for row in hits})
            needed, below = exact_needed(
                candidates,
                _cosine_errors(query, [r.bound for r in scoring]),
                req.signals,
                mode=req.mode,
                weight=req.semantic_weight,
                threshold=req.threshold,
                limit=req.limit,
            )
            rows: dict[Any, Row] = {}
            if needed:
                sql, params = self._hit_rows(req, [keys[i] for i in needed], ", context_embedding")
                fetched = await (await conn.execute(sql, params, binary=True)).fetchall()
                rows = {row[0]: tuple(row) for row in fetched}
        return self._exactly_ranked(req, query, candidates, keys, needed, rows, below)

    def _exactly_ranked(
        self,
        req: LayerSearch,
        query: Vector,
        candidates: list[Candidate],
        keys: list[Any],
        needed: Sequence[int],
        rows: dict[Any, Row],
        below: int,
    ) -> LayerHits:
        """The ``needed`` candidates (those whose exact cosines can change the result) still
        in ``rows``, their cosines computed from their vectors as the embedded store
        computes them, ranked again (``below``: those the bound already put under the
        threshold)."""
        kept = [i for i in needed if keys[i] in rows]
        d = self._d
        whole = [EntryRow(*rows[keys[i]]) for i in kept]
        own = cosines(query, [d.from_vector(r.embedding) for r in whole])
        around = cosines(query, [d.from_vector(r.extra) for r in whole])
        exact = [
            candidates[i]._replace(
                cosine=own[n], context_cosine=None if own[n] is None else around[n]
            )
            for n, i in enumerate(kept)
        ]
        ranked = self._ranked(req, exact)
        return self._hits(Ranked(ranked.hits, ranked.below_threshold + below), rows)

    def _conditions(self, req: LayerSearch) -> tuple[str, list[Any]]:
        """The metadata filter and the time window of a search, over ``memories``."""
        where, params = filter_sql(req.filter)
        timing, times = self._rows.candidates(req)
        return f"{where} AND {timing}", [*params, *times]

    def _cosine_columns(self, table: str, query: Vector | None) -> tuple[str, list[Any]]:
        """The scoring columns with the two cosines and their bound (the larger of the two
        vectors' norms, for ``_cosine_errors``) computed here instead of the vectors; with
        no query, NULLs."""
        t = f"{table}." if table else ""
        if query is None:
            return f"{self._scoring_columns(table, 'NULL, NULL')}, NULL", []
        cosines = f"-({t}embedding <#> %s), -({t}context_embedding <#> %s)"
        norms = f"GREATEST(vector_norm({t}embedding), vector_norm({t}context_embedding))"
        vector = self._d.vector(query)
        return f"{self._scoring_columns(table, cosines)}, {norms}", [vector, vector]

    async def _bm25(self, conn: Any, req: LayerSearch, terms: list[str]) -> KeywordScores | None:
        """The BM25 scores of the scope's documents holding a query term (None: the scope is
        empty).

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
        return keyword_scores(int(rows[0][0]), float(rows[0][1]), [held.get(t) for t in terms])

    async def _passing(
        self,
        conn: Any,
        req: LayerSearch,
        ranking: Callable[[int | None], list[int]],
        want: int,
        query: Vector | None,
    ) -> dict[Any, Row]:
        """Candidate rows (``_cosine_columns``) of the first ``want`` of the keyword ranking
        (best first) that pass the filter and the time window, read as ``ranked_chunks``
        says (as the embedded store reads them)."""
        where, params = self._conditions(req)
        columns, vectors = self._cosine_columns("", query)
        out: dict[Any, Row] = {}
        for chunk in ranked_chunks(ranking, want, not req.filter.empty, out, _CHUNK):
            fetched = await (
                await conn.execute(
                    f"SELECT seq, {columns} FROM memories "  # noqa: S608
                    f"WHERE tenant_id = %s AND seq = ANY(%s) AND {where}",
                    (*vectors, req.tenant_id, chunk, *params),
                    binary=True,
                )
            ).fetchall()
            rows = {r[0]: tuple(r) for r in fetched}
            for seq in chunk:
                if len(out) < want and seq in rows:
                    out[seq] = rows[seq]
        return out

    async def _nearest(self, conn: Any, req: LayerSearch, want: int, query: Vector) -> Any:
        """Send the statement reading the candidate rows (``_cosine_columns``) of the
        ``want`` nearest memories; returns its cursor, to be read."""
        where, params = self._conditions(req)
        vector = self._d.vector(query)
        columns, vectors = self._cosine_columns("m", query)
        # Iterative scans return rows in relaxed order: fetch more than wanted, sort, cut.
        # Measured at 1M memories (benchmarks/pg_hnsw_sweep.py, 40 rows fetched): recall@10
        # 0.970 at ef_search 100, 0.980 at 200 (the default), 0.982 at 400.
        fetch = min(1000, max(40, want * 2))
        await conn.execute(f"SET LOCAL hnsw.ef_search = {max(self._ef_search, fetch)}")
        # The scan yields ``fetch`` candidates (keys and distances only: a scope searched
        # row by row sorts narrow rows); the ranking's columns are computed for the
        # ``want`` nearest of them only, each row read again where the scan found it (its
        # ctid, in this statement's snapshot: a TID scan, whatever the statistics say).
        # Joined by seq, a tenant that came after the table's statistics, estimated at
        # one row, had its rows read again for every candidate (1,094 memories beside 100k
        # of another tenant: 38 ms for the statement instead of 2). The lateral subquery's
        # LIMIT keeps it from being flattened into a join.
        return await conn.execute(
            "WITH c AS MATERIALIZED (SELECT seq, ctid AS t, embedding <=> %s AS d "  # noqa: S608
            "FROM memories WHERE tenant_id = %s AND layer = %s AND scope_key = %s "
            f"AND embedding IS NOT NULL AND {where} "
            "ORDER BY embedding <=> %s LIMIT %s), "
            "n AS MATERIALIZED (SELECT seq, t, d FROM c ORDER BY d, seq LIMIT %s) "
            f"SELECT n.seq, r.* FROM n CROSS JOIN LATERAL (SELECT {columns} FROM memories m "
            "WHERE m.ctid = n.t AND m.tenant_id = %s LIMIT 1) r ORDER BY n.d, n.seq",
            (
                vector,
                req.tenant_id,
                req.scope.layer.value,
                req.scope.key,
                *params,
                vector,
                fetch,
                want,
                *vectors,
                req.tenant_id,
            ),
            binary=True,
        )


def _cosine_errors(query: Vector, norms: Sequence[float | None]) -> list[float]:
    """A bound, for each candidate, of how far a cosine the database computed (pgvector:
    float32 products summed in its order) can lie from the one NumPy computes from the same
    floats in another order: each within n·2⁻²⁴/(1 - n·2⁻²⁴) of the exact product's
    |a|·|q| (n the dimensions), so twice that apart; doubled again for margin."""
    n = len(query)
    unit = n * 2.0**-24
    scale = 4.0 * unit / (1.0 - unit) * float(np.linalg.norm(np.asarray(query, np.float64)))
    return [scale * (norm or 0.0) for norm in norms]
