"""The write path of memories in SQL, for both backends: add, bulk add, conversation
messages (numbered and given their neighbourhood) and update, each with its history."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Unpack

from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.layers import scope_key
from lamina.memory.models import (
    HistoryEvent,
    MemoryEntry,
)
from lamina.memory.ports import (
    MemoryChange,
    NewMemory,
    updated_entry,
)
from lamina.memory.timing import content_key
from lamina.store.sql.conversations import (
    CONVERSATION,
    NEIGHBOURS,
    ConversationScope,
    Neighbourhood,
    SqlConversations,
    place_of,
)
from lamina.store.sql.embedding_cache import SqlEmbeddingCache, drop_held
from lamina.store.sql.program import Program, count, row
from lamina.store.sql.timing import HISTORY, HISTORY_NAMES, SqlTiming, conflict, missing


class SqlMemoryWrites(SqlConversations, SqlEmbeddingCache, SqlTiming):
    """add, bulk_add, add_messages and update."""

    async def add(self, memory: NewMemory, *, actor: str | None = None) -> MemoryEntry:
        return (await self._exec.write(memory.tenant_id, "add", self._insert([memory], actor)))[0]

    async def bulk_add(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        return await self._write_all("bulk_add", memories, lambda m: self._insert(m, actor))

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
        vectors = [m.embedding for m in self._storable(numbered)]
        neighbourhoods = yield from self._new_turns(numbered, vectors)
        entries = yield from self._insert(numbered, actor, neighbourhoods)
        return entries

    def _insert(
        self,
        memories: list[NewMemory],
        actor: str | None,
        neighbourhoods: Sequence[Neighbourhood | None] | None = None,
    ) -> Program[list[MemoryEntry]]:
        """Insert ``memories`` (times: theirs, else now), each with one ``add`` event. Those
        asking for dedup that have an exact duplicate stored, or earlier in the list, return
        that one instead."""
        now = datetime.now(UTC)
        model = self.embedder.model_id
        memories = self._storable(memories)
        around: list[Neighbourhood | None] = (
            list(neighbourhoods) if neighbourhoods else [None] * len(memories)
        )
        same = yield from self._duplicates(memories, now)
        fresh = [i for i in range(len(memories)) if i not in same]
        yield from self._write_rows(
            [memories[i] for i in fresh], actor, now, [around[i] for i in fresh]
        )
        entries: dict[int, MemoryEntry] = {
            i: MemoryEntry(
                id=m.id,
                tenant_id=m.tenant_id,
                layer=m.scope.layer,
                identifiers=m.scope.identifiers,
                content=m.content,
                metadata=m.metadata,
                created_at=m.created_at or now,
                updated_at=m.updated_at or m.created_at or now,
                embedding_generated=m.embedding is not None,
                embedding_model=None if m.embedding is None else model,
                event_at=m.lifetime.event_at or m.created_at or now,
                valid_from=m.lifetime.valid_from,
                valid_until=m.lifetime.valid_until,
                expires_at=m.lifetime.expires_at,
            )
            for i, m in ((i, memories[i]) for i in fresh)
        }
        out = []
        for i in range(len(memories)):
            dup = same.get(i)
            if dup is None:
                out.append(entries[i])
            elif isinstance(dup, int):  # a duplicate of an earlier one of this call
                out.append(entries[dup].model_copy(update={"deduplicated": True}))
            else:
                out.append(dup)
        return out

    def _storable(self, memories: list[NewMemory]) -> list[NewMemory]:
        """``memories`` as they are stored: while the store needs re-embedding, new vectors
        wait (pending) for ``reembed``."""
        if self.embedding.stale:
            return [replace(m, embedding=None) for m in memories]
        return memories

    def _write_rows(
        self,
        memories: list[NewMemory],
        actor: str | None,
        now: datetime,
        around: Sequence[Neighbourhood | None],
        histories: Sequence[list[HistoryEvent] | None] | None = None,
    ) -> Program[None]:
        """Insert the rows of ``memories`` (``around``: their neighbourhoods) and their
        history: the events given (``histories``, by memory; an import), else one ``add``
        event each. One statement per table on PostgreSQL (Dialect.insert)."""
        if not memories:
            return
        d = self._d
        stored = [self._row(m, n, now) for m, n in zip(memories, around, strict=True)]
        names = list(dict.fromkeys(k for values in stored for k in values))
        if any(len(values) != len(names) for values in stored):  # messages among memories
            stored = [{k: values.get(k) for k in names} for values in stored]
        memories_insert = d.insert("memories", names, [tuple(values.values()) for values in stored])
        # Every value is made before the first statement (an atomic import makes a batch's
        # values while the batch before it is stored).
        events: list[tuple[Any, ...]] = []
        for n, v in enumerate(stored):
            given = None if histories is None else histories[n]
            if given is None:
                events.append(
                    (
                        *(v["tenant_id"], v["id"], "add", v["layer"], None, v["content"]),
                        *(None, v["metadata"], actor, v["created_at"]),
                    )
                )
                continue
            events += [
                (
                    *(v["tenant_id"], v["id"], e.operation.value, e.layer.value),
                    *(e.old_content, e.new_content),
                    *(None if e.old_metadata is None else d.json(e.old_metadata),),
                    *(None if e.new_metadata is None else d.json(e.new_metadata),),
                    *(e.actor, d.time(e.at)),
                )
                for e in given
            ]
        yield memories_insert
        if events:
            yield d.insert("memory_history", HISTORY_NAMES, events)
        held = [m.content for m in memories if m.embedding is not None]
        if held:  # the memories hold these vectors now: no second copy in the cache
            yield from drop_held(d, memories[0].tenant_id, self.embedder.model_id, held)

    def _row(self, m: NewMemory, n: Neighbourhood | None, now: datetime) -> dict[str, Any]:
        """The columns of a new memory's row."""
        d = self._d
        life = m.lifetime
        created = m.created_at or now
        updated = m.updated_at or created
        event = life.event_at or created
        created_at = d.time(created)
        return {
            "tenant_id": m.tenant_id,
            "id": m.id,
            "layer": m.scope.layer.value,
            "scope_key": m.scope.key,
            "identifiers": d.json(m.scope.identifiers),
            "content": m.content,
            "metadata": d.json(m.metadata),
            "embedding": None if m.embedding is None else d.vector(m.embedding),
            **self._neighbourhood_columns(m.content, n),
            "embedding_model": None if m.embedding is None else self.embedder.model_id,
            "created_at": created_at,
            # The same time is converted once (an import's three times usually are).
            "updated_at": created_at if _same_time(updated, created) else d.time(updated),
            "event_at": created_at if _same_time(event, created) else d.time(event),
            "valid_from": self._param(life.valid_from),
            "valid_until": self._param(life.valid_until),
            "expires_at": self._param(life.expires_at),
            "content_key": None if m.keyed or place_of(m.metadata) else content_key(m.content),
        }

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
            yield from self._lock_conversations(tenant_id, {place[0]})
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
            f"SELECT {self._columns} FROM memories WHERE tenant_id = %s AND id = %s"  # noqa: S608
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
        old = self._entry(found)
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
            yield from self._drop_vectors(tenant_id, {old.content})
        place = place_of(old.metadata)
        if place is not None and (content is not None or embedding is not None):
            # Its own neighbourhood vector holds its vector; the turns around it hold its
            # words (and their vectors its vector).
            key = scope_key(old.layer, old.identifiers)
            thread = ConversationScope(tenant_id, place[0], old.layer.value, key)
            yield from self._renew(thread, place[1] - 1, NEIGHBOURS + 1)


def _same_time(a: datetime, b: datetime) -> bool:
    """Whether two times are written the same (the same instant at the same offset)."""
    return a is b or (a == b and a.utcoffset() == b.utcoffset())
