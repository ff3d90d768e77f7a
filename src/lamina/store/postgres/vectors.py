"""PostgreSQL's part of re-embedding (lamina.store.sql.reembed): what lamina_app may not do.

It runs on a connection of its own as the connecting user (the one that applies migrations
and owns the tables): listing every tenant and the final checks read across tenants
(``row_security = off``: a superuser or a role with BYPASSRLS; otherwise PostgreSQL refuses
and the error says so), ``store_meta`` is written, and a change of dimensions alters the
vector columns. ``vector(n)`` columns take only n-d vectors and HNSW indexes need a
dimension: a re-embedding to another dimension drops both HNSW indexes and makes the
columns (memories' own and neighbourhood vectors, context items' vectors) dimensionless while
it writes, then types them ``vector(new)`` and rebuilds the indexes in the transaction that
records the new model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from lamina.store.postgres.db import MIGRATION_LOCK, Database, translate
from lamina.store.sql.context_items import SqlContextItems
from lamina.store.sql.memory_parts import MemoryParts
from lamina.store.sql.meta import REEMBED_ITEMS_CLEARED, REEMBED_TARGET
from lamina.store.sql.reembed import Reembedding

#: Every vector column: (table, column).
_COLUMNS = (
    ("memories", "embedding"),
    ("memories", "context_embedding"),
    ("context_items", "embedding"),
)
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS memories_embedding ON memories "
    "USING hnsw (embedding vector_cosine_ops)",
    "CREATE INDEX IF NOT EXISTS context_items_embedding ON context_items "
    "USING hnsw (embedding vector_cosine_ops) WHERE is_latest",
)


class VectorColumns(Reembedding):
    """The embeddings repository of the PostgreSQL store."""

    _VECTOR_DIMS = "vector_dims(embedding)"

    def __init__(self, parts: MemoryParts, context_items: SqlContextItems, db: Database) -> None:
        super().__init__(parts, context_items)
        self._db = db

    @asynccontextmanager
    async def _owner(self, operation: str) -> AsyncIterator[Any]:
        """One transaction as the connecting user, across tenants, under the schema lock."""
        try:
            async with await self._db.connect() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                await conn.execute("SET LOCAL row_security = off")
                yield conn
        except (psycopg.Error, PoolTimeout) as exc:
            raise translate(exc, operation) from exc

    async def _tenants(self) -> list[str]:
        async with self._owner("reembed") as conn:
            found = await (
                await conn.execute(
                    "SELECT tenant_id FROM memories UNION SELECT tenant_id FROM context_items "
                    "UNION SELECT tenant_id FROM embedding_cache ORDER BY 1"
                )
            ).fetchall()
        return [str(r[0]) for r in found]

    async def _write_meta(self, values: dict[str, str], remove: Sequence[str]) -> None:
        async with self._owner("reembed") as conn:
            await _set_meta(conn, values, remove)

    async def _prepare_vectors(self) -> None:
        async with self._owner("reembed") as conn:
            await conn.execute("DROP INDEX IF EXISTS memories_embedding")
            await conn.execute("DROP INDEX IF EXISTS context_items_embedding")
            for table, column in _COLUMNS:
                await conn.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector")
        await self._reconnect()

    async def _finish(self, model: str, dims: int, resized: bool) -> bool:
        async with self._owner("reembed") as conn:
            left = await (await conn.execute(self._remaining_sql(), (model, dims))).fetchone()
            if left is None or left[0]:
                return False
            # What the columns and indexes are, not what store_meta says: a resize interrupted
            # before (columns dimensionless, indexes dropped) is finished whatever the target.
            resized = await _needs_typing(conn, dims)
            if resized:
                # Every neighbourhood was cleared and renewed from the new vectors; one left
                # of the old size (an interrupted run) goes, as its renewal would.
                await conn.execute(
                    "UPDATE memories SET context_embedding = NULL WHERE "
                    "context_embedding IS NOT NULL AND vector_dims(context_embedding) <> %s",
                    (dims,),
                )
                for table, column in _COLUMNS:
                    await conn.execute(
                        f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector({int(dims)})"
                    )
                for index in _INDEXES:
                    await conn.execute(index)
            await conn.execute(
                "DELETE FROM embedding_cache WHERE model <> %s OR length(vector) <> %s",
                (model, 4 * dims),
            )
            await _set_meta(
                conn,
                {"embedding_model": model, "embedding_dimensions": str(dims)},
                (REEMBED_TARGET, REEMBED_ITEMS_CLEARED),
            )
        if resized:
            await self._reconnect()
        return True

    async def _reconnect(self) -> None:
        """New pooled connections: plans prepared before a column changed type are stale."""
        await self._db.close()
        await self._db.open()


async def _needs_typing(conn: Any, dims: int) -> bool:
    """Whether a vector column is not ``vector(dims)`` or an HNSW index is missing."""
    found = await (
        await conn.execute(
            "SELECT (SELECT count(*) FROM pg_attribute WHERE ((attrelid = 'memories'::regclass "
            "AND attname IN ('embedding', 'context_embedding')) OR (attrelid = "
            "'context_items'::regclass AND attname = 'embedding')) "
            "AND format_type(atttypid, atttypmod) = %s), "
            "(SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname IN ('memories_embedding', 'context_items_embedding'))",
            (f"vector({int(dims)})",),
        )
    ).fetchone()
    return found is None or tuple(found) != (len(_COLUMNS), 2)


async def _set_meta(conn: Any, values: dict[str, str], remove: Sequence[str]) -> None:
    for key, value in values.items():
        await conn.execute(
            "INSERT INTO store_meta VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )
    for key in remove:
        await conn.execute("DELETE FROM store_meta WHERE key = %s", (key,))
