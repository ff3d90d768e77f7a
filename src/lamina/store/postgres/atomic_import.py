"""The transaction of an atomic import on PostgreSQL (the memory transfer repository's
``atomic_import``, from ``BulkLoading``): how it begins (locks, the block triggers off,
``memory_terms``' key dropped), how its batches are stored in order, and how it ends (the
key and the blocks of postings made in one pass, the vector index built) before its
commit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.ports import StoredMemory
from lamina.store.postgres.db import run, translate
from lamina.store.postgres.filters import register_vectors
from lamina.store.sql.program import Lock, Program, Step

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


class ImportBatches:
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


async def finish_atomic(
    conn: psycopg.AsyncConnection[Any], atomic: AtomicImport, index_build_memory: str
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


@dataclass(frozen=True)
class AtomicImport:
    """What ``begin_atomic`` changed in the transaction, to be undone before the commit."""

    #: ``memory_postings`` held rows all the same (it cannot gain any meanwhile: they are
    #: made of memories, locked against writers).
    leftover: bool
    #: The statement that makes ``memory_terms``' primary key again, as it was (none
    #: where it had none).
    terms_key: tuple[str, ...]


async def begin_atomic(conn: psycopg.AsyncConnection[Any], tenant_id: str) -> AtomicImport | None:
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
            return AtomicImport(bool(row[1]), terms_key)
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
