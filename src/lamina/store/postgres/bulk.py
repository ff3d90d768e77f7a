"""Bulk loading and tenant import on PostgreSQL (``lamina db copy``, benchmarks)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.ports import ImportWriter, StoredMemory
from lamina.store.postgres.db import POSTGRES, Database, run, translate
from lamina.store.postgres.filters import register_vectors, to_pg_vector
from lamina.store.sql.program import Lock, Program, Step
from lamina.store.sql.timing import HISTORY_NAMES
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


#: The triggers an atomic import turns off in its transaction (migration 0014's, renewing
#: the blocks of keyword postings a statement touched: a few thousand block reads and
#: writes per batch). The postings themselves and the scope statistics are kept as every
#: write keeps them (migration 0008's triggers); the blocks are made in one pass at the end.
_BLOCK_TRIGGERS = ("memory_terms_blocks_insert", "memory_terms_blocks_delete")

#: The blocks of every posting (what lamina_postings_renew makes of them, block by block:
#: the store had no memories before the import, and no other writer came in). Made batch
#: by batch during the import instead (every block below a batch's last seq is whole), they
#: took as long on the database's side as they saved at the end: at 100k memories the
#: rows' part grew from 15 to 20 s, the end shrank by 5 (measured 2026-11-25).
_BLOCKS = (
    "INSERT INTO memory_postings AS p (tenant_id, layer, scope_key, term, block, postings) "
    "SELECT tenant_id, layer, scope_key, term, memory_seq >> 9, "
    "string_agg(int8send(memory_seq) || float4send(tf) || float4send(doc_length), "
    "''::bytea ORDER BY memory_seq) "
    "FROM memory_terms GROUP BY 1, 2, 3, 4, 5"
)
#: What ``_BLOCKS`` adds where ``memory_postings`` held rows when the import began (blocks
#: no posting was left in; an empty store has none). Without it the blocks are plain
#: inserts, half the time of inserts that look for a conflict first (100k memories: 721k
#: blocks in 5.6 s instead of 11.1 s).
_BLOCKS_OVER = (
    " ON CONFLICT (tenant_id, layer, scope_key, term, block) "
    "DO UPDATE SET postings = excluded.postings"
)


class _Batches:
    """The batches of one atomic import (an ImportWriter), stored in order on its one
    transaction; once one fails, none after it is stored."""

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any],
        tenant_id: str,
        program: Callable[[str, list[StoredMemory], str | None, set[str]], Program[list[str]]],
    ) -> None:
        self._conn = conn
        self._tenant = tenant_id
        self._program = program
        self._present: set[str] = set()  # the ids stored: the store had none before
        self._turn = asyncio.Lock()  # the batches take the transaction one at a time, in order
        self._failed = False  # a batch failed: the transaction is lost

    async def __call__(self, memories: Sequence[StoredMemory], actor: str | None) -> list[str]:
        program = self._program(self._tenant, list(memories), actor, self._present)
        # The batch's work up to its first statement (plain memories: all their rows) is
        # done before its turn, while the batch before it is stored; an error in it is
        # raised in its turn, so that none after it is stored.
        first: Step | Lock | None = None
        early: Exception | None = None
        try:
            first = next(program)
        except StopIteration as done:  # nothing to store
            return list(done.value)
        except Exception as exc:
            early = exc
        try:
            async with self._turn:
                if self._failed:
                    raise LaminaError(
                        ErrorCode.INTERNAL_ERROR,
                        "import: not stored, a batch before it failed",
                    )
                try:
                    if early is not None:
                        raise early
                    return await run(self._conn, program, first)
                except BaseException as exc:
                    self._failed = True
                    if isinstance(exc, psycopg.Error):
                        raise translate(exc, "import") from exc
                    raise
        finally:
            program.close()


async def _finish_atomic(
    conn: psycopg.AsyncConnection[Any], atomic: _Atomic, index_build_memory: str
) -> None:
    """The end of an atomic import, before its commit: ``memory_terms``' key made again,
    the blocks of postings made in one pass, the triggers back on, the vector index built."""
    try:
        await conn.execute("RESET ROLE")
        await conn.execute(
            "SELECT set_config('maintenance_work_mem', %s, true)", (index_build_memory,)
        )
        for statement in atomic.terms_key:
            await conn.execute(statement)
        # The blocks read the postings in the key's order (term by term, each term's in seq
        # order: what the blocks group and concatenate), instead of sorting them all: made
        # after the key, 100k memories' 800k postings make their 721k blocks in 3.3 s
        # instead of 4.8, and 1M memories' 8M postings in 35 s instead of 55 (the key 18 s
        # either way; measured 2026-11-27).
        await conn.execute("SELECT set_config('work_mem', '256MB', true)")
        await conn.execute("SELECT set_config('enable_sort', 'off', true)")
        await conn.execute(_BLOCKS + _BLOCKS_OVER if atomic.leftover else _BLOCKS)
        await conn.execute("SET LOCAL enable_sort TO DEFAULT")
        for trigger in _BLOCK_TRIGGERS:
            await conn.execute(f"ALTER TABLE memory_terms ENABLE TRIGGER {trigger}")
        await conn.execute(
            "CREATE INDEX IF NOT EXISTS memories_embedding ON memories "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        await conn.commit()
    except psycopg.Error as exc:
        raise translate(exc, "import") from exc


class BulkLoading:
    """Loading many rows at once into the store's database (a mixin of PostgresStore)."""

    _db: Database
    #: The shared SQL of an import (lamina.store.sql.lifecycle).
    _import: Callable[[str, list[StoredMemory], str | None, set[str]], Program[list[str]]]

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
        made again, the blocks are made in one pass in its order (``_BLOCKS``: the same rows
        the triggers make) and the vector index is built if ``bulk_loading`` dropped it,
        before the commit: the rows, their postings and their index become visible
        together, and an import that fails or is cut short leaves nothing."""
        try:
            conn = await self._db.connect()
        except psycopg.Error as exc:
            raise translate(exc, "import") from exc
        async with conn:
            try:
                atomic = await _begin_atomic(conn, tenant_id)
            except psycopg.Error as exc:
                raise translate(exc, "import") from exc
            if atomic is None:
                yield None
                return

            batches = _Batches(conn, tenant_id, self._import)
            yield batches  # an error rolls back: the connection closes without a commit
            await _finish_atomic(conn, atomic, index_build_memory)

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


@dataclass(frozen=True)
class _Atomic:
    """What ``_begin_atomic`` changed in the transaction, to be undone before the commit."""

    #: ``memory_postings`` held rows all the same (it cannot gain any meanwhile: they are
    #: made of memories, locked against writers).
    leftover: bool
    #: The statement that makes ``memory_terms``' primary key again, as it was (none
    #: where it had none).
    terms_key: tuple[str, ...]


async def _begin_atomic(conn: psycopg.AsyncConnection[Any], tenant_id: str) -> _Atomic | None:
    """Start ``atomic_import``'s transaction on ``conn``, or None where it does not apply
    (the transaction is then rolled back).

    Besides the block triggers, ``memory_terms``' primary key is dropped in the
    transaction and made again at its end, from sorted rows: at 100k memories, 800k
    postings, kept up row by row it costs more than twice the 2 s of making it once. That
    locks ``memory_terms`` against every other session until the commit: only the write
    triggers read it (searches read the blocks), and writers wait for the lock on
    ``memories`` already; but a session outside lamina reading it (pg_dump, say) waits
    too, and where one holds it, the import goes batch by batch (``_lock_terms``)."""
    await register_vectors(conn)
    row = await (
        await conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    ).fetchone()
    if row and row[0]:
        await conn.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
        row = await (
            await conn.execute(
                "SELECT NOT EXISTS (SELECT 1 FROM memories), EXISTS (SELECT 1 FROM memory_postings)"
            )
        ).fetchone()
        if row and row[0] and await _lock_terms(conn):
            for trigger in _BLOCK_TRIGGERS:
                await conn.execute(f"ALTER TABLE memory_terms DISABLE TRIGGER {trigger}")
            terms_key = await _drop_terms_key(conn)
            await conn.execute("SELECT set_config('lamina.tenant_id', %s, true)", (tenant_id,))
            await conn.execute("SET LOCAL ROLE lamina_app")
            return _Atomic(bool(row[1]), terms_key)
    await conn.rollback()
    return None


#: How long ``_lock_terms`` waits for sessions reading ``memory_terms`` (while it waits,
#: the lock on ``memories`` holds every writer).
_TERMS_LOCK_WAIT = "2s"


async def _lock_terms(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Lock ``memory_terms`` against every other session, waiting ``_TERMS_LOCK_WAIT`` at
    most: False (the transaction then aborted) when another session holds it longer."""
    await conn.execute(f"SET LOCAL lock_timeout = '{_TERMS_LOCK_WAIT}'")
    try:
        await conn.execute("LOCK TABLE memory_terms IN ACCESS EXCLUSIVE MODE")
    except psycopg.errors.LockNotAvailable:
        return False
    await conn.execute("SET LOCAL lock_timeout TO DEFAULT")
    return True


async def _drop_terms_key(conn: psycopg.AsyncConnection[Any]) -> tuple[str, ...]:
    """Drop ``memory_terms``' primary key: the statement that makes it again. Its other
    index (by memory) stays: an import's conversation turns have their neighbourhoods
    renewed by updates, whose trigger deletes their old postings through it."""
    found = await (
        await conn.execute(
            "SELECT quote_ident(conname), pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'memory_terms'::regclass AND contype = 'p'"
        )
    ).fetchall()
    for name, _ in found:
        await conn.execute(f"ALTER TABLE memory_terms DROP CONSTRAINT {name}")
    return tuple(f"ALTER TABLE memory_terms ADD CONSTRAINT {n} {d}" for n, d in found)
