"""The PostgreSQL store: every port on one database that many processes and replicas share.

It opens, checks and closes the database, and hands out every domain's repositories: the
memory repositories (``memories``: one per memory port, built from the shared SQL's parts
with PostgreSQL's search, counts and filters: memories.py, vectors.py, bulk.py), context
items, sessions, threads, and ``bulk`` (loading many rows: ``lamina db copy``). Every
call is one transaction as lamina_app that first sets ``lamina.tenant_id``; the
row-level security policies then hide every other tenant.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from lamina.backend import HealthStatus, StoreCapabilities
from lamina.embeddings.base import Embedder
from lamina.errors import LaminaError
from lamina.memory.ports import MemoryPorts
from lamina.store.postgres.bulk import BulkLoading
from lamina.store.postgres.context_items import PostgresContextItems
from lamina.store.postgres.db import POSTGRES, Database, translate
from lamina.store.postgres.filters import filter_sql
from lamina.store.postgres.memories import (
    EXPIRED_TENANTS,
    PostgresMemoryReads,
    PostgresMemoryWrites,
    PostgresOwners,
)
from lamina.store.postgres.threads import PostgresThreads
from lamina.store.postgres.vectors import VectorColumns
from lamina.store.sql.deletion import nothing_to_settle
from lamina.store.sql.forgetting import SqlMemoryForgetting
from lamina.store.sql.memory_parts import MemoryParts
from lamina.store.sql.meta import EmbeddingState, capabilities
from lamina.store.sql.sessions import SqlSessions
from lamina.store.sql.transfer import MemoryImport, SqlMemoryTransfer


class PostgresStore:
    """Every repository on PostgreSQL with pgvector."""

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
        db = Database(
            url,
            pool_min=pool_min,
            pool_max=pool_max,
            statement_timeout_ms=statement_timeout_ms,
            connect_timeout=connect_timeout,
        )
        ef_search = max(1, min(1000, int(ef_search)))
        self._db = db
        self.url = db.url
        self.embedder = embedder
        #: The model of the stored vectors against the embedder's (read when the store opens).
        self.embedding = EmbeddingState(embedder)
        self._schema_target = schema_target  # None: the newest schema (tests pin older ones)
        self.schema_version = 0
        self.context_items = PostgresContextItems(db, ef_search, self.embedding)
        self.sessions = SqlSessions(db, POSTGRES)
        self.threads = PostgresThreads(db)
        parts = MemoryParts.build(
            db,
            POSTGRES,
            embedder,
            self.embedding,
            metadata_filter=filter_sql,
            settle=nothing_to_settle,
        )
        importing = MemoryImport(parts)
        #: Loading many rows at once (``lamina db copy``, benchmarks).
        self.bulk = BulkLoading(db, importing)
        self.memories = MemoryPorts(
            reads=PostgresMemoryReads(parts.rows, db, ef_search),
            writes=PostgresMemoryWrites(parts),
            forgetting=SqlMemoryForgetting(parts, expired_tenants_sql=EXPIRED_TENANTS),
            transfer=SqlMemoryTransfer(parts, importing, self.bulk),
            embeddings=VectorColumns(parts, self.context_items, db),
            owners=PostgresOwners(parts.rows, db),
        )

    async def initialize(self) -> None:
        try:
            self.schema_version = await self._db.migrate(
                self._schema_target, self.embedder.dimensions, self.embedder.model_id
            )
            await self._db.open()
        except LaminaError:
            raise
        except (psycopg.Error, PoolTimeout) as exc:
            raise translate(exc, "initialize") from exc
        async with self._db.transaction(None, "initialize") as conn:
            rows = await (await conn.execute("SELECT key, value FROM store_meta")).fetchall()
        meta: dict[str, str] = {str(k): str(v) for k, v in rows}
        self.embedding.load(meta)  # another model: opens, needing ``reembed``

    async def shutdown(self) -> None:
        await self._db.close()

    async def health_check(self) -> HealthStatus:
        details: dict[str, Any] = {"store": "postgresql", "schema_version": self.schema_version}
        try:
            async with self._db.transaction(None, "health_check") as conn:
                row = await (await conn.execute("SELECT version()")).fetchone()
            details["server"] = row[0] if row else None
            details["embedding"] = self.embedding.status.to_dict()
        except LaminaError as exc:
            return HealthStatus(False, {**details, "error": exc.message})
        return HealthStatus(True, details)

    def capabilities(self) -> StoreCapabilities:
        return capabilities(self.embedder)
