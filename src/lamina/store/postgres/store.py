"""The PostgreSQL store: every port on one database that many processes and replicas share.

It is the memory port itself (memories.py) and hands out the other domains' ports: context
items, sessions and threads. Every call is one transaction as lamina_app that first sets
``lamina.tenant_id``; the row-level security policies then hide every other tenant.
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
from lamina.store.postgres.memories import PostgresMemories
from lamina.store.postgres.threads import PostgresThreads
from lamina.store.postgres.vectors import VectorColumns
from lamina.store.sql.meta import capabilities
from lamina.store.sql.sessions import SqlSessions


class PostgresStore(PostgresMemories, BulkLoading, VectorColumns):
    """Every port on PostgreSQL with pgvector."""

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
        super().__init__(db, embedder, ef_search)
        self.url = db.url
        self._schema_target = schema_target  # None: the newest schema (tests pin older ones)
        self.schema_version = 0
        self.context_items = PostgresContextItems(db, ef_search, self.embedding)
        self.sessions = SqlSessions(db, POSTGRES)
        self.threads = PostgresThreads(db)
        # One object per concern is the goal (issue 34); for now the store is each of them.
        self.memories = MemoryPorts(self, self, self, self, self, self)

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
