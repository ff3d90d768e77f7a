"""Bulk loading and tenant import on PostgreSQL (``lamina db copy``, benchmarks): the
store's ``bulk`` repository, and the ``Loading`` of its memory transfer repository
(lamina.store.sql.transfer)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from lamina.memory.ports import ImportWriter
from lamina.store.postgres.atomic_import import ImportBatches, begin_atomic, finish_atomic
from lamina.store.postgres.db import POSTGRES, Database, translate
from lamina.store.postgres.filters import to_pg_vector
from lamina.store.sql.timing import HISTORY_NAMES
from lamina.store.sql.transfer import MemoryImport
from lamina.text import decode_terms

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
    "conversations",
    "session_prompts",
)

#: The tables a bulk load fills, analyzed when it ends.
_ANALYZED = ("memories", "memory_terms", "memory_postings", "memory_scope_stats")

#: The memories columns ``import_tenant`` writes, in the order of ``lamina db copy``'s rows.
_MEMORY_COLUMNS = (
    "tenant_id",
    "id",
    "layer",
    "scope_key",
    "identifiers",
    "content",
    "metadata",
    "embedding",
    "embedding_model",
    "created_at",
    "updated_at",
    "conversation_id",
    "conversation_position",
    "context",
    "context_embedding",
    "lexicon",
    "term_count",
    "event_at",
    "valid_from",
    "valid_until",
    "expires_at",
    "content_key",
)


#: The other tables ``import_tenant`` writes, in this order: their columns after
#: ``tenant_id``, in the order of ``lamina db copy``'s rows, one ``executemany`` each.
_ROW_COLUMNS = {
    "embedding_cache": "model, content_hash, vector, created_at",
    "hierarchy": "level, child_id, parent_id, updated_at",
    "conversations": "conversation_id, next_position",
    "context_items": "kind, id, key, version, is_latest, category, content, data, tags, "
    "embedding, created_at, updated_at",
    "session_messages": "session_key, idx, role, content, tool_calls, token_count, created_at",
    "observations": "id, session_key, content, token_count, source_start, source_end, created_at",
    "reflections": "id, session_key, content, token_count, generation, source_start, "
    "source_end, created_at",
    "session_prompts": "session_key, content, updated_at",
}


def _vector(value: Any) -> Any:
    return None if value is None else to_pg_vector(value)


#: How a value of these columns of ``_ROW_COLUMNS`` is passed (the others: as they come).
_ADAPT: dict[str, Callable[[Any], Any]] = {
    "data": Jsonb,
    "tags": Jsonb,
    "tool_calls": Jsonb,
    "embedding": _vector,
}


class BulkLoading:
    """Loading many rows at once into the store's database (``PostgresStore.bulk``)."""

    def __init__(self, db: Database, importing: MemoryImport) -> None:
        self._db = db
        #: The shared SQL of an import's batch (lamina.store.sql.transfer).
        self._importing = importing

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
            admin = await psycopg.AsyncConnection.connect(self._db.url, autocommit=True)
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
                    # Statistics now, not when autovacuum comes by: until then the planner
                    # takes a freshly loaded scope for one row and reads all of it instead
                    # of the vector index (10k memories: 18 ms a search instead of 7).
                    await admin.execute(f"ANALYZE {', '.join(_ANALYZED)}")

    @asynccontextmanager
    async def atomic_import(
        self, tenant_id: str, index_build_memory: str = "1GB"
    ) -> AsyncIterator[ImportWriter | None]:
        """An import into an empty database as one transaction (the memory port's
        ``atomic_import``), on a connection of its own as the connecting user.

        Applies when that user is a superuser (it must see every tenant's rows, and turn
        triggers off) and ``memories`` is empty once it is locked against other writers
        (SHARE ROW EXCLUSIVE: readers go on, writers wait for the commit); otherwise yields
        None. Meanwhile the triggers renewing blocks of keyword postings are off in this
        transaction only (the ALTER TABLE is rolled back, or undone before the commit: no
        other transaction sees them off), and the batches are written as lamina_app under
        the tenant, as ``import_memories`` writes them. At the end ``memory_terms``' key is
        made again, the blocks are made in one pass in its order (the same rows the
        triggers make) and the vector index is built if ``bulk_loading`` dropped it, before
        the commit (lamina.store.postgres.atomic_import): the rows, their postings and their
        index become visible together, and an import that fails or is cut short leaves
        nothing."""
        try:
            conn = await self._db.connect()
        except psycopg.Error as exc:
            raise translate(exc, "import") from exc
        async with conn:
            try:
                atomic = await begin_atomic(conn, tenant_id)
            except psycopg.Error as exc:
                raise translate(exc, "import") from exc
            if atomic is None:
                yield None
                return

            batches = ImportBatches(conn, tenant_id, self._importing.program)
            yield batches  # an error rolls back: the connection closes without a commit
            await finish_atomic(conn, atomic, index_build_memory)

    async def table_counts(self, tenant_id: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        async with self._db.transaction(tenant_id, "count") as conn:
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
        memories = [
            (
                tenant_id,
                *r[:3],
                Jsonb(r[3]),
                r[4],
                Jsonb(r[5]),
                _vector(r[6]),
                *r[7:13],
                _vector(r[13]),  # the neighbourhood vector
                r[14],
                float(sum(decode_terms(r[14] or "").values())),
                *r[15:20],
            )
            for r in rows["memories"]
        ]
        history = [
            (
                tenant_id,
                *r[:5],
                None if r[5] is None else Jsonb(r[5]),
                None if r[6] is None else Jsonb(r[6]),
                *r[7:9],
            )
            for r in rows["memory_history"]
        ]
        async with self._db.transaction(tenant_id, "import") as conn, conn.cursor() as cur:
            # Memories and their history in one statement each (the keyword postings'
            # statement triggers then run once, not once per row).
            for table, names, values in (
                ("memories", _MEMORY_COLUMNS, memories),
                ("memory_history", HISTORY_NAMES, history),
            ):
                if values:
                    step = POSTGRES.insert(table, names, values)
                    await cur.execute(step.sql, step.params)
            for table, columns in _ROW_COLUMNS.items():
                adapt = [_ADAPT.get(name) for name in columns.split(", ")]
                marks = ", ".join(["%s"] * (len(adapt) + 1))
                await cur.executemany(
                    f"INSERT INTO {table} (tenant_id, {columns}) VALUES ({marks})",  # noqa: S608
                    [
                        (
                            tenant_id,
                            *(v if f is None else f(v) for f, v in zip(adapt, r, strict=True)),
                        )
                        for r in rows.get(table, [])
                    ],
                )
