"""The write path of memories in SQL, for both backends (``SqlMemoryWrites``, the writes
repository): add, bulk add, conversation messages (numbered and given their
neighbourhood), update, delete by id, invalidation and consolidation's one transaction,
each with its history."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Unpack

from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.layers import scope_key
from lamina.memory.models import MemoryEntry
from lamina.memory.ports import (
    Consolidated,
    Consolidation,
    Invalidation,
    MemoryChange,
    NewMemory,
    updated_entry,
)
from lamina.memory.timing import content_key
from lamina.store.sql.conversations import (
    CONVERSATION,
    NEIGHBOURS,
    ConversationScope,
    place_of,
)
from lamina.store.sql.embedding_cache import drop_held
from lamina.store.sql.memory_parts import MemoryParts
from lamina.store.sql.program import Program, count, row
from lamina.store.sql.timing import HISTORY, conflict, missing


class SqlMemoryWrites:
    """add, bulk_add, add_messages, update, delete, bulk_delete, invalidate and
    consolidate (lamina.memory.ports.MemoryWriteStore)."""

    def __init__(self, parts: MemoryParts) -> None:
        self._rows = parts.rows
        self._exec = parts.rows.executor
        self._d = parts.rows.dialect
        self.embedder = parts.rows.embedder
        self.embedding = parts.rows.embedding
        self._conversations = parts.conversations
        self._cache = parts.cache
        self._inserts = parts.inserts
        self._deletion = parts.deletion

    async def add(self, memory: NewMemory, *, actor: str | None = None) -> MemoryEntry:
        program = self._inserts.insert([memory], actor)
        return (await self._exec.write(memory.tenant_id, "add", program))[0]

    async def bulk_add(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        return await self._write_all("bulk_add", memories, lambda m: self._inserts.insert(m, actor))

    async def add_messages(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        return await self._write_all(
            "add_messages", memories, lambda m: self._add_messages(m, actor)
        )

    async def _write_all(
        self,
        operation: str,
        memories: Sequence[NewMemory],
        program: Callable[[list[NewMemory]], Program[list[MemoryEntry]]],
    ) -> list[MemoryEntry]:
        """Run ``program`` over ``memories`` (one tenant's) in one transaction; none: none."""
        if not memories:
            return []
        return await self._exec.write(memories[0].tenant_id, operation, program(list(memories)))

    def _add_messages(
        self, memories: list[NewMemory], actor: str | None
    ) -> Program[list[MemoryEntry]]:
        """Positions from ``conversations`` (one UPSERT per conversation, its row locked until
        the transaction ends: neighbourhood work on a conversation never interleaves), each
        message's neighbourhood (the two turns of the same scope before it, stored or in this
        call, and the two after it in this call), then the inserts, and the neighbourhoods
        of the stored turns the new ones follow (they gain next turns), all in one
        transaction."""
        sizes: dict[tuple[str, str], int] = {}
        for m in memories:
            key = (m.tenant_id, str(m.metadata[CONVERSATION]["id"]))
            sizes[key] = sizes.get(key, 0) + 1
        nxt: dict[tuple[str, str], int] = {}
        for (tenant_id, conversation_id), size in sorted(sizes.items()):
            end = yield row(
                "INSERT INTO conversations (tenant_id, conversation_id, next_position) "
                "VALUES (%s, %s, %s) ON CONFLICT (tenant_id, conversation_id) DO UPDATE SET "
                "next_position = conversations.next_position + excluded.next_position "
                "RETURNING next_position",
                tenant_id,
                conversation_id,
                size,
            )
            nxt[(tenant_id, conversation_id)] = int(end[0]) - size
        numbered: list[NewMemory] = []
        for m in memories:
            conversation = m.metadata[CONVERSATION]
            key = (m.tenant_id, str(conversation["id"]))
            metadata = {**m.metadata, CONVERSATION: {**conversation, "position": nxt[key]}}
            nxt[key] += 1
            numbered.append(replace(m, metadata=metadata))
        # Each message's neighbourhood from the stored turns before it and the call's own;
        # the last stored turns gain next turns (renewed). The vectors as they are stored
        # (none while the store waits for re-embedding).
        vectors = [m.embedding for m in self._inserts.storable(numbered)]
        neighbourhoods = yield from self._conversations.new_turns(numbered, vectors)
        entries = yield from self._inserts.insert(numbered, actor, neighbourhoods)
        return entries

    async def update(
        self, tenant_id: str, memory_id: str, **change: Unpack[MemoryChange]
    ) -> MemoryEntry:
        content, embedding = change.get("content"), change.get("embedding")
        patch, actor = change.get("metadata_patch"), change.get("actor")
        return await self._exec.write(
            tenant_id,
            "update",
            self._update(tenant_id, memory_id, content, embedding, patch, actor),
        )

    def _before_change(self, tenant_id: str, memory_id: str) -> Program[bool]:
        """Before a memory's content or vector changes: its conversation locked (when it is a
        message: its neighbours change too); whether it has no content key (a conversation
        message or a keyed item, never a duplicate: it stays without one)."""
        before = yield row(
            "SELECT metadata, content_key FROM memories WHERE tenant_id = %s AND id = %s",
            tenant_id,
            memory_id,
        )
        if before is None:
            return False
        place = place_of(self._d.from_json(before[0]))
        if place is not None:
            yield from self._conversations.lock(tenant_id, {place[0]})
        return before[1] is None

    def _update(
        self,
        tenant_id: str,
        memory_id: str,
        content: str | None,
        embedding: Vector | None,
        patch: dict[str, Any] | None,
        actor: str | None,
        seen: datetime | None = None,
        *,
        event_at: datetime | None = None,
    ) -> Program[MemoryEntry]:
        """``seen``: the memory's updated_at when the caller read it (CONFLICT if it changed
        since); ``event_at``: its new event time (None: kept). An expired memory is
        MEMORY_NOT_FOUND."""
        old, keyless = yield from self._read_for_update(
            tenant_id, memory_id, seen, content is not None or embedding is not None
        )
        stale = self.embedding.stale and embedding is not None
        if stale:  # the new content's vector waits for ``reembed``; the old one is wrong
            embedding = None
        new = updated_entry(
            old,
            content=content,
            metadata_patch=patch,
            embedding_model=None if embedding is None else self.embedder.model_id,
        )
        if stale:
            new = new.model_copy(update={"embedding_model": None, "embedding_generated": False})
        if event_at is not None:
            new = new.model_copy(update={"event_at": event_at})
        sets = self._changed_columns(
            old, new, content, embedding, stale=stale, event_at=event_at, keyless=keyless
        )
        assignments = ", ".join(f"{column} = %s" for column in sets)
        yield count(
            f"UPDATE memories SET {assignments} WHERE tenant_id = %s AND id = %s",  # noqa: S608
            *sets.values(),
            tenant_id,
            memory_id,
        )
        yield count(
            HISTORY,
            tenant_id,
            memory_id,
            "update",
            old.layer.value,
            old.content,
            new.content,
            self._d.json(old.metadata),
            sets["metadata"],
            actor,
            sets["updated_at"],
        )
        if embedding is not None:  # the memory holds its text's vector now
            yield from drop_held(self._d, tenant_id, self.embedder.model_id, [new.content])
        yield from self._after_update(tenant_id, old, content, embedding)
        return new

    def _read_for_update(
        self, tenant_id: str, memory_id: str, seen: datetime | None, locks_conversation: bool
    ) -> Program[tuple[MemoryEntry, bool]]:
        """The memory, locked for the update (and its conversation first, when its words or
        vector change), and whether it has no content key (see ``_before_change``):
        MEMORY_NOT_FOUND when missing or expired, CONFLICT when it changed since ``seen``."""
        d = self._d
        keyless = False
        if locks_conversation:
            keyless = yield from self._before_change(tenant_id, memory_id)
        found = yield row(
            f"SELECT {self._rows.columns} FROM memories WHERE tenant_id = %s AND id = %s"  # noqa: S608
            f"{d.for_update}",
            tenant_id,
            memory_id,
        )
        if found is None:
            raise LaminaError(
                ErrorCode.MEMORY_NOT_FOUND,
                f"memory {memory_id!r} not found",
                details={"id": memory_id},
            )
        old = self._rows.entry(found)
        if old.expires_at is not None and old.expires_at <= datetime.now(UTC):
            raise missing(memory_id, " (its time to live is over)")
        if seen is not None and old.updated_at != seen:
            raise conflict(memory_id)
        return old, keyless

    def _changed_columns(
        self,
        old: MemoryEntry,
        new: MemoryEntry,
        content: str | None,
        embedding: Vector | None,
        *,
        stale: bool,
        event_at: datetime | None,
        keyless: bool,
    ) -> dict[str, Any]:
        """The columns an update sets (``stale``: the vectors are of another model, so the
        memory's vector is cleared for ``reembed``; ``keyless``: the memory has no content
        key and keeps none)."""
        d = self._d
        sets: dict[str, Any] = {
            "metadata": d.json(new.metadata),
            "updated_at": d.time(new.updated_at),
        }
        if event_at is not None:
            sets["event_at"] = d.time(event_at)
        if content is not None:
            sets["content"] = content
            sets.update(d.memory_terms(content))
            keyless = keyless or place_of(old.metadata) is not None
            sets["content_key"] = None if keyless else content_key(content)
        if embedding is not None:
            sets["embedding"] = d.vector(embedding)
            sets["embedding_model"] = self.embedder.model_id
        elif stale:
            sets["embedding"] = None
            sets["embedding_model"] = None
        return sets

    def _after_update(
        self, tenant_id: str, old: MemoryEntry, content: str | None, embedding: Vector | None
    ) -> Program[None]:
        """Drop the cached vectors of replaced content; renew the neighbourhoods around a
        conversation message whose words or vector changed."""
        if content is not None and content != old.content:
            yield from self._cache.drop_vectors(tenant_id, {old.content})
        place = place_of(old.metadata)
        if place is not None and (content is not None or embedding is not None):
            # Its own neighbourhood vector holds its vector; the turns around it hold its
            # words (and their vectors its vector).
            key = scope_key(old.layer, old.identifiers)
            thread = ConversationScope(tenant_id, place[0], old.layer.value, key)
            yield from self._conversations.renew(thread, place[1] - 1, NEIGHBOURS + 1)

    # -- deletes by id (lamina.store.sql.forgetting) ----------------------------------------

    async def delete(self, tenant_id: str, memory_id: str, *, actor: str | None = None) -> bool:
        program = self._deletion.delete(tenant_id, [memory_id], actor)
        deleted = await self._exec.write(tenant_id, "delete", program)
        await self._deletion.settle(deleted)
        return deleted == 1

    async def bulk_delete(
        self, tenant_id: str, memory_ids: Sequence[str], *, actor: str | None = None
    ) -> int:
        program = self._deletion.delete(tenant_id, list(memory_ids), actor)
        deleted = await self._exec.write(tenant_id, "bulk_delete", program)
        await self._deletion.settle(deleted)
        return deleted

    # -- invalidation and consolidation -----------------------------------------------------

    async def invalidate(
        self, tenant_id: str, invalidations: Sequence[Invalidation], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        return await self._exec.write(
            tenant_id, "invalidate", self._invalidate(tenant_id, list(invalidations), actor)
        )

    def _invalidate(
        self, tenant_id: str, invalidations: list[Invalidation], actor: str | None
    ) -> Program[list[MemoryEntry]]:
        d = self._d
        out = []
        for inv in invalidations:
            found = yield row(
                f"SELECT {self._rows.columns} FROM memories WHERE tenant_id = %s AND id = %s"  # noqa: S608
                f"{d.for_update}",
                tenant_id,
                inv.memory_id,
            )
            if found is None:
                raise missing(inv.memory_id)
            old = self._rows.entry(found)
            if old.expires_at is not None and old.expires_at <= datetime.now(UTC):
                raise missing(inv.memory_id)
            if inv.seen is not None and old.updated_at != inv.seen:
                raise conflict(inv.memory_id)
            if old.valid_until is not None and old.valid_until <= inv.at:
                out.append(old)  # no longer valid by then already: nothing changes
                continue
            updated = max(datetime.now(UTC), old.updated_at + timedelta(microseconds=1))
            yield count(
                "UPDATE memories SET valid_until = %s, updated_at = %s "
                "WHERE tenant_id = %s AND id = %s",
                d.time(inv.at),
                d.time(updated),
                tenant_id,
                inv.memory_id,
            )
            metadata = d.json(old.metadata)
            yield count(
                HISTORY,
                *(tenant_id, old.id, "invalidate", old.layer.value, old.content, old.content),
                *(metadata, metadata, actor, d.time(updated)),
            )
            out.append(old.model_copy(update={"valid_until": inv.at, "updated_at": updated}))
        return out

    async def consolidate(self, change: Consolidation, *, actor: str | None = None) -> Consolidated:
        return await self._exec.write(
            change.tenant_id, "consolidate", self._consolidate(change, actor)
        )

    def _consolidate(self, change: Consolidation, actor: str | None) -> Program[Consolidated]:
        tenant = change.tenant_id
        messages = (
            (yield from self._add_messages(list(change.messages), actor))
            if (change.messages)
            else []
        )
        revised = []
        for r in change.revised:
            revised.append(
                (
                    yield from self._update(
                        tenant,
                        r.memory_id,
                        r.content,
                        r.embedding,
                        r.metadata_patch,
                        actor,
                        r.seen,
                        event_at=r.event_at,
                    )
                )
            )
        invalidated = yield from self._invalidate(tenant, list(change.invalidated), actor)
        added = (yield from self._inserts.insert(list(change.added), actor)) if change.added else []
        return Consolidated(messages, added, revised, invalidated)
