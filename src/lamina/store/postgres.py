"""The PostgreSQL store: pgvector (HNSW, cosine) for semantic search, tsvector + GIN for
keywords, JSONB filters, keyset pagination, row-level security per tenant.

Many processes and replicas may share one database. Every call is one transaction that first
sets ``lamina.tenant_id``; the row-level security policies then hide every other tenant.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from lamina.embeddings.base import Embedder
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import MetadataFilter
from lamina.memory.layers import MemoryLayer
from lamina.memory.models import (
    HistoryEvent,
    HistoryOperation,
    MemoryEntry,
    MemoryPage,
    SearchMode,
)
from lamina.memory.scoring import rank_fused
from lamina.store.base import (
    HealthStatus,
    LayerSearch,
    NewMemory,
    Scope,
    ScoredMemory,
    StoreCapabilities,
    Vector,
    decode_cursor,
    encode_cursor,
    updated_entry,
)
from lamina.store.pg_context import PostgresContextItems
from lamina.store.pg_filters import ANY_WORD_CAP, choose_keyword_level, filter_sql
from lamina.store.pg_filters import from_pg_vector as _vector
from lamina.store.pg_filters import to_pg_vector as _pg_vector
from lamina.store.pg_sessions import PostgresSessions
from lamina.store.pg_threads import PostgresThreads
from lamina.text import keyword_terms

log = logging.getLogger(__name__)

_COLUMNS = (
    "seq, id, tenant_id, layer, identifiers, content, metadata, embedding_model, "
    "created_at, updated_at, embedding"
)
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
_MIGRATION_LOCK = 72_616_201  # pg_advisory_xact_lock key for schema migrations
_TRANSIENT = (
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    pg_errors.QueryCanceled,
    pg_errors.AdminShutdown,
    pg_errors.CannotConnectNow,
)


def check_url(url: str) -> str:
    """CONFIGURATION_ERROR unless ``url`` is a well-formed PostgreSQL URL."""
    if not url.startswith(("postgresql://", "postgres://")):
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"not a PostgreSQL URL: {url!r} (expected postgresql://user@host:port/database)",
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        conninfo_to_dict(url)
    except ValueError as exc:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR, f"malformed PostgreSQL URL {url!r}: {exc}"
        ) from None
    except psycopg.ProgrammingError as exc:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR, f"malformed PostgreSQL URL: {exc}"
        ) from None
    return url


def translate(exc: Exception, operation: str) -> LaminaError:
    if isinstance(exc, LaminaError):
        return exc
    if isinstance(exc, (*_TRANSIENT, PoolTimeout, psycopg.OperationalError)):
        return LaminaError(
            ErrorCode.PROVIDER_ERROR, f"PostgreSQL unavailable during {operation}: {exc}"
        )
    if isinstance(exc, pg_errors.InsufficientPrivilege | pg_errors.InvalidSchemaName):
        return LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"the database user lacks a privilege (or a schema it may use) needed for "
            f"{operation}: {exc}",
        )
    if isinstance(exc, pg_errors.UniqueViolation):
        return LaminaError(ErrorCode.INVALID_ARGUMENT, "a memory with this id already exists")
    log.error("PostgreSQL error during %s: %s", operation, exc)
    return LaminaError(ErrorCode.INTERNAL_ERROR, f"database error during {operation}")


def _entry(row: tuple[Any, ...]) -> MemoryEntry:
    return MemoryEntry(
        id=row[1],
        tenant_id=row[2],
        layer=MemoryLayer(row[3]),
        identifiers=row[4],
        content=row[5],
        metadata=row[6],
        embedding_model=row[7],
        created_at=row[8],
        updated_at=row[9],
        embedding_generated=row[10] is not None,
    )


#: Every table holding tenant rows (what ``db copy`` moves and verifies).
TENANT_TABLES = (
    "memories",
    "memory_history",
    "embedding_cache",
    "hierarchy",
    "context_items",
    "session_messages",
    "observations",
    "reflections",
)


class PostgresStore:
    """The store protocol on PostgreSQL with pgvector."""

    def __init__(
        self,
        url: str,
        embedder: Embedder,
        *,
        pool_min: int = 1,
        pool_max: int = 10,
        statement_timeout_ms: int = 30_000,
        connect_timeout: float = 10.0,
        schema_target: int | None = None,
        ef_search: int = 200,
    ) -> None:
        self.url = check_url(url)
        self.embedder = embedder
        self._statement_timeout_ms = statement_timeout_ms
        self._connect_timeout = connect_timeout
        self._ef_search = max(1, min(1000, int(ef_search)))
        self._schema_target = schema_target  # None: the newest schema (tests pin older ones)
        self._pool_min, self._pool_max = pool_min, pool_max
        self._pool = self._new_pool()
        self.schema_version = 0
        self.context_items = PostgresContextItems(self._tx, self._ef_search)
        self.sessions = PostgresSessions(self._tx)
        self.threads = PostgresThreads(self._tx)

    def _new_pool(self) -> AsyncConnectionPool[Any]:
        return AsyncConnectionPool(
            self.url,
            min_size=self._pool_min,
            max_size=self._pool_max,
            open=False,
            timeout=self._connect_timeout,
            configure=self._configure,
            kwargs={"connect_timeout": max(1, int(self._connect_timeout))},
        )

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.set_autocommit(True)
        await register_vector_async(conn)
        await conn.execute("SET hnsw.iterative_scan = relaxed_order")
        await conn.execute("SET ROLE lamina_app")
        await conn.execute(f"SET statement_timeout = {int(self._statement_timeout_ms)}")
        await conn.set_autocommit(False)

    @asynccontextmanager
    async def _tx(self, tenant_id: str | None, operation: str) -> AsyncIterator[Any]:
        """One transaction as lamina_app, scoped to ``tenant_id``."""
        try:
            async with self._pool.connection() as conn, conn.transaction():
                if tenant_id is not None:
                    await conn.execute(
                        "SELECT set_config('lamina.tenant_id', %s, true)", (tenant_id,)
                    )
                yield conn
        except LaminaError:
            raise
        except (psycopg.Error, PoolTimeout) as exc:
            raise translate(exc, operation) from exc

    # -- lifecycle --------------------------------------------------------------------------

    async def initialize(self) -> None:
        try:
            await self._migrate()
            if self._pool.closed:
                self._pool = self._new_pool()
            try:
                await self._pool.open(wait=True, timeout=self._connect_timeout)
            except BaseException:
                await self._pool.close()
                raise
        except LaminaError:
            raise
        except (psycopg.Error, PoolTimeout) as exc:
            raise translate(exc, "initialize") from exc
        await self._check_model()

    async def _migrate(self) -> None:
        """Apply pending migrations as the connecting user, one process at a time."""
        async with await psycopg.AsyncConnection.connect(
            self.url, connect_timeout=max(1, int(self._connect_timeout))
        ) as conn:
            available = await (
                await conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
            ).fetchone()
            if available is None:
                raise LaminaError(
                    ErrorCode.CONFIGURATION_ERROR,
                    "the PostgreSQL extension 'vector' (pgvector) is not installed on the "
                    "server: install the postgresql-<version>-pgvector package, or build it "
                    "from source (scripts/pg-setup does this on Debian)",
                )
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
                    "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                )
                rows = await (
                    await conn.execute("SELECT version FROM schema_migrations")
                ).fetchall()
                done = {r[0] for r in rows}
                files = sorted(
                    (
                        f
                        for f in resources.files("lamina.store.migrations.postgres").iterdir()
                        if f.name.endswith(".sql")
                    ),
                    key=lambda f: f.name,
                )
                version = max(done, default=0)
                for migration in files:
                    number = int(migration.name.split("_", 1)[0])
                    if number in done or (
                        self._schema_target is not None and number > self._schema_target
                    ):
                        continue
                    log.info("applying migration %s", migration.name)
                    sql = migration.read_text(encoding="utf-8").replace(
                        "{dimensions}", str(int(self.embedder.dimensions))
                    )
                    await conn.execute(sql.encode())
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (number, migration.name),
                    )
                    version = max(version, number)
                self.schema_version = version
                existing = await (await conn.execute("SELECT key FROM store_meta")).fetchall()
                if ("embedding_model",) not in existing:
                    await conn.execute(
                        "INSERT INTO store_meta VALUES ('embedding_model', %s), "
                        "('embedding_dimensions', %s)",
                        (self.embedder.model_id, str(self.embedder.dimensions)),
                    )

    async def _check_model(self) -> None:
        async with self._tx(None, "initialize") as conn:
            rows = await (await conn.execute("SELECT key, value FROM store_meta")).fetchall()
        meta: dict[str, str] = {str(k): str(v) for k, v in rows}
        model, dims = self.embedder.model_id, self.embedder.dimensions
        if meta["embedding_model"] != model or meta["embedding_dimensions"] != str(dims):
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"the database was built with embedding model {meta['embedding_model']} "
                f"({meta['embedding_dimensions']}-d); the configured embedder is {model} "
                f"({dims}-d). Use the same model or another database.",
                details={
                    "store_model": meta["embedding_model"],
                    "store_dimensions": int(meta["embedding_dimensions"]),
                    "embedder_model": model,
                    "embedder_dimensions": dims,
                },
            )

    async def shutdown(self) -> None:
        await self._pool.close()

    async def health_check(self) -> HealthStatus:
        details: dict[str, Any] = {"store": "postgresql", "schema_version": self.schema_version}
        try:
            async with self._tx(None, "health_check") as conn:
                row = await (await conn.execute("SELECT version()")).fetchone()
            details["server"] = row[0] if row else None
        except LaminaError as exc:
            return HealthStatus(False, {**details, "error": exc.message})
        return HealthStatus(True, details)

    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(
            vector_search=True,
            keyword_search=True,
            embedding_dimensions=self.embedder.dimensions,
            distance_metrics=("cosine",),
            bulk_operations=True,
        )

    # -- embeddings -------------------------------------------------------------------------

    async def generate_embedding(
        self, tenant_id: str, texts: Sequence[str], *, cache: bool = True
    ) -> Vector:
        if not cache:
            return await self.embedder.embed(list(texts))
        hashes = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts]
        unique = dict(zip(hashes, texts, strict=True))
        model = self.embedder.model_id
        async with self._tx(tenant_id, "embedding cache") as conn:
            rows = await (
                await conn.execute(
                    "SELECT content_hash, vector FROM embedding_cache WHERE tenant_id = %s "
                    "AND model = %s AND content_hash = ANY(%s)",
                    (tenant_id, model, list(unique)),
                )
            ).fetchall()
        cached = {h: np.frombuffer(blob, dtype=np.float32) for h, blob in rows}
        missing = [h for h in unique if h not in cached]
        if missing:
            vectors = await self.embedder.embed([unique[h] for h in missing])
            fresh = dict(zip(missing, vectors, strict=True))
            now = datetime.now(UTC)
            async with self._tx(tenant_id, "embedding cache") as conn, conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO embedding_cache VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    [
                        (tenant_id, model, h, v.astype(np.float32).tobytes(), now)
                        for h, v in fresh.items()
                    ],
                )
            cached.update(fresh)
        out = np.empty((len(texts), self.embedder.dimensions), dtype=np.float32)
        for i, h in enumerate(hashes):
            out[i] = cached[h]
        return out

    # -- writes -----------------------------------------------------------------------------

    async def add(self, memory: NewMemory, *, actor: str | None = None) -> MemoryEntry:
        return (await self.bulk_add([memory], actor=actor))[0]

    async def bulk_add(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        if not memories:
            return []
        tenants = {m.tenant_id for m in memories}
        if len(tenants) != 1:
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, "bulk_add takes one tenant per call")
        tenant = tenants.pop()
        now = datetime.now(UTC)
        model = self.embedder.model_id
        async with self._tx(tenant, "bulk_add") as conn, conn.cursor() as cur:
            # COPY is refused under row-level security; executemany pipelines the inserts.
            await cur.executemany(
                "INSERT INTO memories (tenant_id, id, layer, scope_key, identifiers, content, "
                "metadata, embedding, embedding_model, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        m.tenant_id,
                        m.id,
                        m.scope.layer.value,
                        m.scope.key,
                        Jsonb(m.scope.identifiers),
                        m.content,
                        Jsonb(m.metadata),
                        None if m.embedding is None else _pg_vector(m.embedding),
                        None if m.embedding is None else model,
                        now,
                        now,
                    )
                    for m in memories
                ],
            )
            await cur.executemany(
                "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, "
                "new_content, new_metadata, actor, at) VALUES (%s, %s, 'add', %s, %s, %s, %s, %s)",
                [
                    (
                        m.tenant_id,
                        m.id,
                        m.scope.layer.value,
                        m.content,
                        Jsonb(m.metadata),
                        actor,
                        now,
                    )
                    for m in memories
                ],
            )
        return [
            MemoryEntry(
                id=m.id,
                tenant_id=m.tenant_id,
                layer=m.scope.layer,
                identifiers=m.scope.identifiers,
                content=m.content,
                metadata=m.metadata,
                created_at=now,
                updated_at=now,
                embedding_generated=m.embedding is not None,
                embedding_model=None if m.embedding is None else model,
            )
            for m in memories
        ]

    async def unembedded(self, tenant_id: str, limit: int) -> list[tuple[str, str]]:
        async with self._tx(tenant_id, "unembedded") as conn:
            rows = await (
                await conn.execute(
                    "SELECT id, content FROM memories WHERE tenant_id = %s "
                    "AND embedding IS NULL ORDER BY seq LIMIT %s",
                    (tenant_id, limit),
                )
            ).fetchall()
        return [(str(i), str(c)) for i, c in rows]

    async def set_embeddings(self, tenant_id: str, items: Sequence[tuple[str, str, Vector]]) -> int:
        model = self.embedder.model_id
        done = 0
        async with self._tx(tenant_id, "set embeddings") as conn:
            for memory_id, content, vector in items:
                cur = await conn.execute(
                    "UPDATE memories SET embedding = %s, embedding_model = %s WHERE "
                    "tenant_id = %s AND id = %s AND content = %s AND embedding IS NULL",
                    (_pg_vector(vector), model, tenant_id, memory_id, content),
                )
                done += cur.rowcount
        return done

    async def get(self, tenant_id: str, memory_id: str) -> MemoryEntry | None:
        async with self._tx(tenant_id, "get") as conn:
            row = await (
                await conn.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE tenant_id = %s AND id = %s",  # noqa: S608
                    (tenant_id, memory_id),
                )
            ).fetchone()
        return None if row is None else _entry(row)

    async def update(
        self,
        tenant_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        embedding: Vector | None = None,
        metadata_patch: dict[str, Any] | None = None,
        actor: str | None = None,
    ) -> MemoryEntry:
        async with self._tx(tenant_id, "update") as conn:
            row = await (
                await conn.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE tenant_id = %s AND id = %s "  # noqa: S608
                    "FOR UPDATE",
                    (tenant_id, memory_id),
                )
            ).fetchone()
            if row is None:
                raise LaminaError(
                    ErrorCode.MEMORY_NOT_FOUND,
                    f"memory {memory_id!r} not found",
                    details={"id": memory_id},
                )
            old = _entry(row)
            new = updated_entry(
                old,
                content=content,
                metadata_patch=metadata_patch,
                embedding_model=None if embedding is None else self.embedder.model_id,
            )
            await conn.execute(
                "UPDATE memories SET content = %s, metadata = %s, updated_at = %s, "
                "embedding = coalesce(%s, embedding), embedding_model = %s "
                "WHERE tenant_id = %s AND id = %s",
                (
                    new.content,
                    Jsonb(new.metadata),
                    new.updated_at,
                    None if embedding is None else _pg_vector(embedding),
                    new.embedding_model,
                    tenant_id,
                    memory_id,
                ),
            )
            await conn.execute(
                "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, old_content, "
                "new_content, old_metadata, new_metadata, actor, at) "
                "VALUES (%s, %s, 'update', %s, %s, %s, %s, %s, %s, %s)",
                (
                    tenant_id,
                    memory_id,
                    old.layer.value,
                    old.content,
                    new.content,
                    Jsonb(old.metadata),
                    Jsonb(new.metadata),
                    actor,
                    new.updated_at,
                ),
            )
        return new

    async def delete(self, tenant_id: str, memory_id: str, *, actor: str | None = None) -> bool:
        return await self.bulk_delete(tenant_id, [memory_id], actor=actor) == 1

    async def bulk_delete(
        self, tenant_id: str, memory_ids: Sequence[str], *, actor: str | None = None
    ) -> int:
        if not memory_ids:
            return 0
        now = datetime.now(UTC)
        async with self._tx(tenant_id, "delete") as conn:
            rows = await (
                await conn.execute(
                    "DELETE FROM memories WHERE tenant_id = %s AND id = ANY(%s) "
                    "RETURNING id, layer, content, metadata",
                    (tenant_id, list(dict.fromkeys(memory_ids))),
                )
            ).fetchall()
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, "
                    "old_content, old_metadata, actor, at) "
                    "VALUES (%s, %s, 'delete', %s, %s, %s, %s, %s)",
                    [(tenant_id, r[0], r[1], r[2], Jsonb(r[3]), actor, now) for r in rows],
                )
        return len(rows)

    # -- search -----------------------------------------------------------------------------

    async def search(self, request: LayerSearch) -> list[ScoredMemory]:
        req = request
        async with self._tx(req.tenant_id, "search") as conn:
            if req.mode is SearchMode.SEMANTIC:
                found = await self._semantic(conn, req, req.threshold, req.limit)
                return [ScoredMemory(_entry(r), s, s, None, _vector(r[10])) for r, s in found]
            if req.mode is SearchMode.KEYWORD:
                found = await self._keyword(conn, req, req.limit)
                return [
                    ScoredMemory(_entry(r), s, None, s, _vector(r[10]))
                    for r, s in found
                    if req.threshold is None or s >= req.threshold
                ]
            pool = max(req.limit * 5, 50)
            keyword = await self._keyword(conn, req, pool)
            semantic = await self._semantic(conn, req, None, pool)
        assert req.vector is not None
        bm25 = {r[0]: s for r, s in keyword}
        rows = {r[0]: r for r, _ in keyword}
        rows.update((r[0], r) for r, _ in semantic)
        vectors = {seq: _vector(row[10]) for seq, row in rows.items()}
        cosines = {seq: None if v is None else float(v @ req.vector) for seq, v in vectors.items()}
        top = rank_fused(
            cosines, bm25, weight=req.semantic_weight, threshold=req.threshold, limit=req.limit
        )
        return [
            ScoredMemory(_entry(rows[seq]), score, cosines[seq], bm25.get(seq), vectors[seq])
            for score, seq in top
        ]

    async def _semantic(
        self, conn: Any, req: LayerSearch, min_score: float | None, want: int
    ) -> list[tuple[tuple[Any, ...], float]]:
        assert req.vector is not None
        where, params = filter_sql(req.filter)
        query = _pg_vector(req.vector)
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
                f"SELECT {_M_COLUMNS}, 1 - c.d AS score FROM c JOIN memories m "
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

    async def _keyword(
        self, conn: Any, req: LayerSearch, want: int
    ) -> list[tuple[tuple[Any, ...], float]]:
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
                f"SELECT {_COLUMNS}, ts_rank(tsv, to_tsquery('english', %s), 1) AS score "  # noqa: S608
                f"FROM (SELECT * {base}AND tsv @@ to_tsquery('english', %s) AND {where}{cap}) m "
                "ORDER BY score DESC, seq LIMIT %s",
                (" | ".join(words), *scope, level, *params, want),
            )
        ).fetchall()
        return [(tuple(r[:-1]), float(r[-1])) for r in rows]

    # -- bulk loading and copying -----------------------------------------------------------

    @asynccontextmanager
    async def bulk_loading(self, index_build_memory: str = "1GB") -> AsyncIterator[bool]:
        """Load into an empty database fast: the HNSW index is built once, after the load.

        Inserting row by row into an HNSW index runs at under 1,000 rows/s on two cores; a
        parallel build afterwards is several times faster. Applies only when ``memories`` is
        empty and the connecting user is a superuser (it must see every tenant's rows to
        know); otherwise rows are indexed as they arrive. Yields whether the index was
        deferred. The table is locked against other writers while the index is rebuilt.
        """
        try:
            admin = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        except psycopg.Error as exc:
            raise translate(exc, "bulk load") from exc
        async with admin:
            row = await (
                await admin.execute(
                    "SELECT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) "
                    "AND NOT EXISTS (SELECT 1 FROM memories)"
                )
            ).fetchone()
            deferred = bool(row and row[0])
            if deferred:
                await admin.execute("DROP INDEX IF EXISTS memories_embedding")
            try:
                yield deferred
            finally:
                if deferred:
                    await admin.execute(
                        "SELECT set_config('maintenance_work_mem', %s, false)",
                        (index_build_memory,),
                    )
                    await admin.execute(
                        "CREATE INDEX IF NOT EXISTS memories_embedding ON memories "
                        "USING hnsw (embedding vector_cosine_ops)"
                    )

    # -- copying ----------------------------------------------------------------------------

    async def table_counts(self, tenant_id: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        async with self._tx(tenant_id, "count") as conn:
            for table in TENANT_TABLES:
                row = await (
                    await conn.execute(
                        f"SELECT count(*) FROM {table} WHERE tenant_id = %s",  # noqa: S608
                        (tenant_id,),
                    )
                ).fetchone()
                counts[table] = int(row[0]) if row else 0
        return counts

    async def import_tenant(self, tenant_id: str, rows: dict[str, list[tuple[Any, ...]]]) -> None:
        """Write exported rows of one tenant in one transaction (``lamina db copy``)."""
        async with self._tx(tenant_id, "import") as conn, conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO memories (tenant_id, id, layer, scope_key, identifiers, content, "
                "metadata, embedding, embedding_model, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        tenant_id,
                        r[0],
                        r[1],
                        r[2],
                        Jsonb(r[3]),
                        r[4],
                        Jsonb(r[5]),
                        None if r[6] is None else _pg_vector(r[6]),
                        r[7],
                        r[8],
                        r[9],
                    )
                    for r in rows["memories"]
                ],
            )
            await cur.executemany(
                "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, "
                "old_content, new_content, old_metadata, new_metadata, actor, at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        tenant_id,
                        r[0],
                        r[1],
                        r[2],
                        r[3],
                        r[4],
                        None if r[5] is None else Jsonb(r[5]),
                        None if r[6] is None else Jsonb(r[6]),
                        r[7],
                        r[8],
                    )
                    for r in rows["memory_history"]
                ],
            )
            await cur.executemany(
                "INSERT INTO embedding_cache VALUES (%s, %s, %s, %s, %s)",
                [(tenant_id, *r) for r in rows["embedding_cache"]],
            )
            await cur.executemany(
                "INSERT INTO hierarchy VALUES (%s, %s, %s, %s, %s)",
                [(tenant_id, *r) for r in rows["hierarchy"]],
            )
            await cur.executemany(
                "INSERT INTO context_items (tenant_id, kind, id, key, version, is_latest, "
                "category, content, data, tags, embedding, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        tenant_id,
                        *r[:7],
                        Jsonb(r[7]),
                        Jsonb(r[8]),
                        None if r[9] is None else _pg_vector(r[9]),
                        r[10],
                        r[11],
                    )
                    for r in rows.get("context_items", [])
                ],
            )
            await cur.executemany(
                "INSERT INTO session_messages (tenant_id, session_key, idx, role, content, "
                "tool_calls, token_count, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (tenant_id, *r[:4], Jsonb(r[4]), r[5], r[6])
                    for r in rows.get("session_messages", [])
                ],
            )
            await cur.executemany(
                "INSERT INTO observations (tenant_id, id, session_key, content, token_count, "
                "source_start, source_end, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [(tenant_id, *r) for r in rows.get("observations", [])],
            )
            await cur.executemany(
                "INSERT INTO reflections (tenant_id, id, session_key, content, token_count, "
                "generation, source_start, source_end, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(tenant_id, *r) for r in rows.get("reflections", [])],
            )

    # -- history, hierarchy, stats ----------------------------------------------------------

    async def history(self, tenant_id: str, memory_id: str) -> list[HistoryEvent]:
        async with self._tx(tenant_id, "history") as conn:
            rows = await (
                await conn.execute(
                    "SELECT memory_id, operation, at, layer, old_content, new_content, "
                    "old_metadata, new_metadata, actor FROM memory_history "
                    "WHERE tenant_id = %s AND memory_id = %s ORDER BY seq",
                    (tenant_id, memory_id),
                )
            ).fetchall()
        return [
            HistoryEvent(
                memory_id=r[0],
                operation=HistoryOperation(r[1]),
                at=r[2],
                layer=MemoryLayer(r[3]),
                old_content=r[4],
                new_content=r[5],
                old_metadata=r[6],
                new_metadata=r[7],
                actor=r[8],
            )
            for r in rows
        ]

    async def set_parent(self, tenant_id: str, level: str, child_id: str, parent_id: str) -> None:
        async with self._tx(tenant_id, "set_parent") as conn:
            await conn.execute(
                "INSERT INTO hierarchy VALUES (%s, %s, %s, %s, now()) ON CONFLICT "
                "(tenant_id, level, child_id) DO UPDATE SET parent_id = excluded.parent_id, "
                "updated_at = excluded.updated_at",
                (tenant_id, level, child_id, parent_id),
            )

    async def get_parent(self, tenant_id: str, level: str, child_id: str) -> str | None:
        async with self._tx(tenant_id, "get_parent") as conn:
            row = await (
                await conn.execute(
                    "SELECT parent_id FROM hierarchy WHERE tenant_id = %s AND level = %s "
                    "AND child_id IN (%s, '*') ORDER BY child_id = '*' LIMIT 1",
                    (tenant_id, level, child_id),
                )
            ).fetchone()
        return None if row is None else str(row[0])

    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]:
        async with self._tx(tenant_id, "count_by_layer") as conn:
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

    async def list(
        self,
        tenant_id: str,
        scopes: Sequence[Scope],
        flt: MetadataFilter,
        *,
        limit: int,
        cursor: str | None,
    ) -> MemoryPage:
        before = decode_cursor(cursor) if cursor else None
        if not scopes:
            return MemoryPage(items=[], next_cursor=None, total_count=0)
        pairs = " OR ".join(["(layer = %s AND scope_key = %s)"] * len(scopes))
        scope_params: list[Any] = []
        for scope in scopes:
            scope_params += [scope.layer.value, scope.key]
        where_filter, filter_params = filter_sql(flt)
        where = f"tenant_id = %s AND ({pairs}) AND {where_filter}"
        params = [tenant_id, *scope_params, *filter_params]
        async with self._tx(tenant_id, "list") as conn:
            total = (
                await (
                    await conn.execute(f"SELECT count(*) FROM memories WHERE {where}", params)  # noqa: S608
                ).fetchone()
            )[0]
            page_where = where + ("" if before is None else " AND seq < %s")
            page_params = params + ([] if before is None else [before])
            rows = await (
                await conn.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE {page_where} "  # noqa: S608
                    "ORDER BY seq DESC LIMIT %s",
                    (*page_params, limit + 1),
                )
            ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        return MemoryPage(
            items=[_entry(r) for r in rows],
            next_cursor=encode_cursor(rows[-1][0]) if more else None,
            total_count=total,
        )
