"""Export and import of memories in SQL, for both backends (``SqlMemoryTransfer``, the
transfer repository): memories page by page (with vectors and history when asked), and
stored again with their ids, times and history (``MemoryImport``, the program an atomic
import runs batch by batch too). How a backend loads many rows at once (``Loading``) is
its own: PostgreSQL defers its vector index and may import in one transaction
(postgres/bulk.py), SQLite has nothing to defer (``LoadingInPlace``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from typing import Protocol, Unpack

from lamina.memory.layers import scope_key
from lamina.memory.models import HistoryEvent
from lamina.memory.ports import ExportPage, ImportWriter, NewMemory, Scope, Selection, StoredMemory
from lamina.memory.timing import Lifetime
from lamina.store.cursors import decode_cursor, encode_cursor
from lamina.store.sql.conversations import place_of
from lamina.store.sql.memory_parts import MemoryParts
from lamina.store.sql.program import Program, row, rows
from lamina.store.sql.rows import HISTORY_COLUMNS, EntryRow, HistoryRow


class Loading(Protocol):
    """A backend's way of loading many memories (lamina.memory.ports.MemoryTransferStore's
    ``bulk_loading`` and ``atomic_import``)."""

    def bulk_loading(self) -> AbstractAsyncContextManager[bool]: ...

    def atomic_import(self, tenant_id: str) -> AbstractAsyncContextManager[ImportWriter | None]: ...


class LoadingInPlace:
    """Loading with nothing to put off (SQLite: the in-process indexes catch up on the
    next search) and no import in one transaction (each batch is one)."""

    @asynccontextmanager
    async def bulk_loading(self) -> AsyncIterator[bool]:
        yield False

    @asynccontextmanager
    async def atomic_import(self, tenant_id: str) -> AsyncIterator[ImportWriter | None]:
        yield None


class MemoryImport:
    """The program storing a batch of exported memories (``import_memories``, and each
    batch of PostgreSQL's atomic import)."""

    def __init__(self, parts: MemoryParts) -> None:
        self._d = parts.rows.dialect
        self._conversations = parts.conversations
        self._inserts = parts.inserts

    def program(
        self,
        tenant_id: str,
        memories: list[StoredMemory],
        actor: str | None,
        present: set[str] | None = None,
    ) -> Program[list[str]]:
        """Skip the ids the tenant has (and repeats), advance each conversation past the
        positions imported, and insert: conversation turns with their neighbourhoods, the
        stored turns they become neighbours of renewed (``Conversations.new_turns``).
        ``present``: every id the tenant has, when the caller knows them (an atomic import
        into an empty store); the ids stored are added to it."""
        ids = [] if present is not None else list(dict.fromkeys(m.entry.id for m in memories))
        present = set() if present is None else present
        for chunk, params in self._d.any_of_chunks("id", ids):
            found = yield rows(
                f"SELECT id FROM memories WHERE tenant_id = %s AND {chunk}",  # noqa: S608
                tenant_id,
                *params,
            )
            present.update(str(r[0]) for r in found)
        fresh: list[StoredMemory] = []
        for m in memories:
            if m.entry.id not in present:
                present.add(m.entry.id)
                fresh.append(m)
        if not fresh:
            return []
        ends: dict[str, int] = {}
        for m in fresh:
            place = place_of(m.entry.metadata)
            if place is not None:
                ends[place[0]] = max(ends.get(place[0], 0), place[1] + 1)
        for conversation_id, end in sorted(ends.items()):
            yield row(
                "INSERT INTO conversations (tenant_id, conversation_id, next_position) "  # noqa: S608
                "VALUES (%s, %s, %s) ON CONFLICT (tenant_id, conversation_id) DO UPDATE SET "
                f"next_position = {self._d.greatest}(conversations.next_position, "
                "excluded.next_position) RETURNING next_position",
                tenant_id,
                conversation_id,
                end,
            )
        new = [
            NewMemory(
                m.entry.id,
                tenant_id,
                Scope(
                    m.entry.layer,
                    m.entry.identifiers,
                    scope_key(m.entry.layer, m.entry.identifiers),
                ),
                m.entry.content,
                m.entry.metadata,
                m.vector,
                m.entry.created_at,
                m.entry.updated_at,
                lifetime=Lifetime(
                    m.entry.event_at, m.entry.valid_from, m.entry.valid_until, m.entry.expires_at
                ),
            )
            for m in fresh
        ]
        # No entries are made of them (the caller wants the ids), and an import never
        # deduplicates: the rows are written as they are.
        now = datetime.now(UTC)
        histories = [m.history for m in fresh]
        storable = self._inserts.storable(new)
        around = yield from self._conversations.new_turns(storable, [m.embedding for m in storable])
        yield from self._inserts.write_rows(storable, actor, now, around, histories)
        return [m.id for m in new]


class SqlMemoryTransfer:
    """export_page, import_memories, bulk_loading and atomic_import
    (lamina.memory.ports.MemoryTransferStore); the last two are the backend's ``Loading``."""

    def __init__(self, parts: MemoryParts, importing: MemoryImport, loading: Loading) -> None:
        self._rows = parts.rows
        self._exec = parts.rows.executor
        self._d = parts.rows.dialect
        self._conversations = parts.conversations
        self._importing = importing
        self._loading = loading

    def bulk_loading(self) -> AbstractAsyncContextManager[bool]:
        return self._loading.bulk_loading()

    def atomic_import(self, tenant_id: str) -> AbstractAsyncContextManager[ImportWriter | None]:
        return self._loading.atomic_import(tenant_id)

    # -- export -----------------------------------------------------------------------------

    async def export_page(
        self, tenant_id: str, selection: Selection, **page: Unpack[ExportPage]
    ) -> tuple[list[StoredMemory], str | None]:
        cursor, limit, vectors, history = (
            page["cursor"],
            page["limit"],
            page["vectors"],
            page["history"],
        )
        where, params = self._rows.selected(selection)
        after = decode_cursor(cursor) if cursor else 0
        seq = self._d.seq
        # The vector is NULL when not asked for (never read, never parsed).
        columns = self._rows.columns
        if not vectors:
            columns = columns.replace(", embedding,", ", NULL,")

        def read() -> Program[tuple[list[StoredMemory], str | None]]:
            read = yield rows(
                f"SELECT {columns} FROM memories WHERE {self._d.tenant_in_seq_order} = %s "  # noqa: S608
                # An expired memory is as good as deleted: never exported.
                f"AND {where} AND (expires_at IS NULL OR expires_at > %s) "
                f"AND {seq} > %s ORDER BY {seq} LIMIT %s",
                tenant_id,
                *params,
                self._d.time(datetime.now(UTC)),
                after,
                limit,
                binary=True,
            )
            found = [EntryRow(*r) for r in read]
            events: dict[str, list[HistoryEvent]] = {}
            if history and found:
                ids, values = self._d.any_of("memory_id", [r.id for r in found])
                for r in (
                    yield rows(
                        f"SELECT {HISTORY_COLUMNS} FROM memory_history WHERE tenant_id = %s "  # noqa: S608
                        f"AND {ids} ORDER BY seq",
                        tenant_id,
                        *values,
                        binary=True,
                    )
                ):
                    events.setdefault(HistoryRow(*r).memory_id, []).append(self._rows.event(r))
            page = [
                StoredMemory(
                    self._rows.entry(r),
                    self._conversations.vector_of(r.embedding, r.embedding_model)
                    if vectors
                    else None,
                    events.get(r.id, []) if history else None,
                )
                for r in found
            ]
            more = encode_cursor(int(found[-1].seq)) if len(found) == limit else None
            return page, more

        return await self._exec.read(tenant_id, "export", read(), snapshot=True)

    # -- import -----------------------------------------------------------------------------

    async def import_memories(
        self, tenant_id: str, memories: Sequence[StoredMemory], *, actor: str | None = None
    ) -> list[str]:
        if not memories:
            return []
        return await self._exec.write(
            tenant_id, "import", self._importing.program(tenant_id, list(memories), actor)
        )
