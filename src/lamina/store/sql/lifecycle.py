"""A memory's whole life in SQL, for both backends: deleting every memory of a scope,
exporting memories page by page (with vectors and history when asked) and importing them
with their ids, times and history. Built on the shared memory SQL (memories.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Unpack

from lamina.memory.layers import MemoryLayer, scope_key
from lamina.memory.models import ForgetResult, HistoryEvent
from lamina.memory.ports import ExportPage, Forgetting, NewMemory, Scope, Selection, StoredMemory
from lamina.memory.timing import Lifetime
from lamina.store.cursors import decode_cursor, encode_cursor
from lamina.store.sql.conversations import place_of
from lamina.store.sql.memories import SqlMemories
from lamina.store.sql.program import Lock, Program, count, row, rows
from lamina.store.sql.rows import HISTORY_COLUMNS, EntryRow, HistoryRow
from lamina.store.sql.task_forgetting import forget_in_tasks

#: The tables holding a session's observational memory, by session key (what ``forget``
#: deletes beside the memories; graph entities no relation uses any more go with them).
SESSION_TABLES = ("session_messages", "observations", "reflections", "graph_relations")


class SqlMemoryLifecycle(SqlMemories):
    """``count_where``, ``count_scopes``, ``delete_where``, ``export_page`` and
    ``import_memories`` over the shared SQL."""

    # -- delete_all -------------------------------------------------------------------------

    async def count_where(self, tenant_id: str, selection: Selection) -> int:
        # One count per layer, added: each uses the scope index, where one OR of them has
        # the planner scan the tenant.
        terms = self._selected_terms(selection)
        if not terms:
            return 0
        counts = " + ".join(
            f"(SELECT count(*) FROM memories WHERE tenant_id = %s AND {term})"  # noqa: S608
            for term, _ in terms
        )
        params = [p for _, values in terms for p in (tenant_id, *values)]
        read = row(f"SELECT {counts}", *params)

        def counted() -> Program[int]:
            found = yield read
            return int(found[0])

        return await self._exec.read(tenant_id, "count_all", counted())

    async def count_scopes(
        self,
        tenant_id: str,
        layer: MemoryLayer,
        selection: Selection,
        *,
        after: str | None,
        limit: int,
    ) -> list[tuple[str, int]]:
        terms = self._selected_terms(Selection((layer,), selection.identifiers))
        if not terms:
            return []
        ((term, params),) = terms
        later = "" if after is None else " AND scope_key > %s"
        read = rows(
            f"SELECT scope_key, count(*) FROM memories WHERE tenant_id = %s AND {term}{later} "  # noqa: S608
            "GROUP BY scope_key ORDER BY scope_key LIMIT %s",
            tenant_id,
            *params,
            *([] if after is None else [after]),
            limit,
        )

        def counted() -> Program[list[tuple[str, int]]]:
            found = yield read
            return [(str(r[0]), int(r[1])) for r in found]

        return await self._exec.read(tenant_id, "owners", counted())

    async def delete_where(
        self, tenant_id: str, selection: Selection, *, actor: str | None = None
    ) -> int:
        def write() -> Program[int]:
            deleted, _ = yield from self._delete_selected(tenant_id, selection, actor)
            return deleted

        return await self._exec.write(tenant_id, "delete_all", write())

    async def forget_where(
        self, tenant_id: str, selection: Selection, **forgetting: Unpack[Forgetting]
    ) -> ForgetResult:
        def write() -> Program[ForgetResult]:
            actor = forgetting.get("actor")
            deleted, identifiers = yield from self._delete_selected(tenant_id, selection, actor)
            keys = dict.fromkeys(forgetting.get("session_keys", ()))
            for stored in identifiers:
                session = self._d.from_json(stored).get("session_id")
                if isinstance(session, str):
                    keys.setdefault(session, None)
            counts = yield from self._forget_sessions(tenant_id, sorted(keys))
            return ForgetResult(memories=deleted, sessions=sorted(keys), **counts)

        return await self._exec.write(tenant_id, "forget", write())

    def _delete_selected(
        self, tenant_id: str, selection: Selection, actor: str | None
    ) -> Program[tuple[int, list[Any]]]:
        """Delete the memories ``selection`` chooses (each as ``delete`` forgets one): how
        many, and the identifiers of each as stored (``delete_all`` and ``forget``)."""
        where, params = self._selected(selection, tenant_id)
        found = yield rows(
            f"SELECT id, identifiers FROM memories WHERE {where}",  # noqa: S608
            *params,
        )
        if not found:
            return 0, []
        deleted = yield from self._delete(tenant_id, [str(r[0]) for r in found], actor)
        return deleted, [r[1] for r in found]

    def _forget_sessions(self, tenant_id: str, keys: list[str]) -> Program[dict[str, int]]:
        """Delete the observational memory of the sessions ``keys`` (under each session's
        lock, as every session write takes it) and rewrite the A2A tasks naming them; the
        rows deleted per table."""
        counts = dict.fromkeys(SESSION_TABLES, 0)
        d = self._d
        for key in keys:
            yield Lock(f"{tenant_id}\n{key}", 1)
        for chunk, params in d.any_of_chunks("session_key", keys):
            for table in ("session_messages", "observations", "reflections"):
                counts[table] += yield count(
                    f"DELETE FROM {table} WHERE tenant_id = %s AND {chunk}",  # noqa: S608
                    tenant_id,
                    *params,
                )
            for table in ("session_leases", "session_prompts"):
                yield count(
                    f"DELETE FROM {table} WHERE tenant_id = %s AND {chunk}",  # noqa: S608
                    tenant_id,
                    *params,
                )
            ends = yield rows(
                f"DELETE FROM graph_relations WHERE tenant_id = %s AND {chunk} "  # noqa: S608
                f"RETURNING source_{d.graph_id}, target_{d.graph_id}",
                tenant_id,
                *params,
            )
            counts["graph_relations"] += len(ends)
            entities = sorted({e for r in ends for e in r})
            for ids, values in d.any_of_chunks(d.graph_id, entities):
                yield count(
                    f"DELETE FROM graph_entities WHERE tenant_id = %s AND {ids} AND NOT EXISTS "  # noqa: S608
                    "(SELECT 1 FROM graph_relations r WHERE r.tenant_id = graph_entities.tenant_id "
                    f"AND graph_entities.{d.graph_id} IN (r.source_{d.graph_id}, "
                    f"r.target_{d.graph_id}))",
                    tenant_id,
                    *values,
                )
        if keys:
            yield from forget_in_tasks(d, tenant_id, sessions=keys)
        return counts

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
        where, params = self._selected(selection)
        after = decode_cursor(cursor) if cursor else 0
        seq = self._d.seq
        # The vector is NULL when not asked for (never read, never parsed).
        columns = self._columns if vectors else self._columns.replace(", embedding,", ", NULL,")

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
                    events.setdefault(HistoryRow(*r).memory_id, []).append(self._event(r))
            page = [
                StoredMemory(
                    self._entry(r),
                    self._vector_of(r.embedding, r.embedding_model) if vectors else None,
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
            tenant_id, "import", self._import(tenant_id, list(memories), actor)
        )

    def _import(
        self,
        tenant_id: str,
        memories: list[StoredMemory],
        actor: str | None,
        present: set[str] | None = None,
    ) -> Program[list[str]]:
        """Skip the ids the tenant has (and repeats), advance each conversation past the
        positions imported, and insert: conversation turns with their neighbourhoods, the
        stored turns they become neighbours of renewed (``_new_turns``).
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
        storable = self._storable(new)
        around = yield from self._new_turns(storable, [m.embedding for m in storable])
        yield from self._write_rows(storable, actor, now, around, histories)
        return [m.id for m in new]
