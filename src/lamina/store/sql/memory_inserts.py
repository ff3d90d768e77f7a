"""New rows of memories in SQL, for both backends (``MemoryInserts``, a part the writes and
imports hold): each row's columns, its history, exact duplicates found under a lock, and
the vectors held back while the store waits for re-embedding."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from lamina.memory.models import HistoryEvent, MemoryEntry
from lamina.memory.ports import NewMemory
from lamina.memory.timing import TimeWindow, content_key
from lamina.store.sql.conversations import Conversations, Neighbourhood, place_of
from lamina.store.sql.embedding_cache import drop_held
from lamina.store.sql.memory_rows import MemoryRows
from lamina.store.sql.program import Lock, Program, rows
from lamina.store.sql.timing import HISTORY_NAMES, window_sql

#: The lock space of exact-duplicate checks (sessions use 1, context items 0), and the
#: buckets of content keys per scope: a write takes at most this many locks per scope.
_DEDUP_LOCK = 2
_BUCKETS = 64


class MemoryInserts:
    """Inserting memories: ``insert`` (with dedup, returning entries), ``write_rows`` (as
    they are: an import), ``storable``."""

    def __init__(self, rows: MemoryRows, conversations: Conversations) -> None:
        self._rows = rows
        self._d = rows.dialect
        self.embedder = rows.embedder
        self.embedding = rows.embedding
        self._conversations = conversations

    def insert(
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
        memories = self.storable(memories)
        around: list[Neighbourhood | None] = (
            list(neighbourhoods) if neighbourhoods else [None] * len(memories)
        )
        same = yield from self._duplicates(memories, now)
        fresh = [i for i in range(len(memories)) if i not in same]
        yield from self.write_rows(
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

    def storable(self, memories: list[NewMemory]) -> list[NewMemory]:
        """``memories`` as they are stored: while the store needs re-embedding, new vectors
        wait (pending) for ``reembed``."""
        if self.embedding.stale:
            return [replace(m, embedding=None) for m in memories]
        return memories

    def write_rows(
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
            **self._conversations.neighbourhood_columns(m.content, n),
            "embedding_model": None if m.embedding is None else self.embedder.model_id,
            "created_at": created_at,
            # The same time is converted once (an import's three times usually are).
            "updated_at": created_at if _same_time(updated, created) else d.time(updated),
            "event_at": created_at if _same_time(event, created) else d.time(event),
            "valid_from": self._rows.param(life.valid_from),
            "valid_until": self._rows.param(life.valid_until),
            "expires_at": self._rows.param(life.expires_at),
            "content_key": None if m.keyed or place_of(m.metadata) else content_key(m.content),
        }

    def _duplicates(
        self, memories: Sequence[NewMemory], now: datetime
    ) -> Program[dict[int, MemoryEntry | int]]:
        """For each memory asking for dedup that has an exact duplicate: the stored one (valid
        and not expired at ``now``), else the index of an earlier one of ``memories``. Each
        content key's lock bucket is taken first, in one order: concurrent writers of one
        content wait for each other, and the second finds the first's row."""
        keys = {
            i: (m.tenant_id, m.scope.layer.value, m.scope.key, content_key(m.content))
            for i, m in enumerate(memories)
            if m.dedup
        }
        if not keys:
            return {}
        for bucket in sorted({(*k[:3], int(k[3][:8], 16) % _BUCKETS) for k in keys.values()}):
            yield Lock("\n".join(map(str, bucket)), _DEDUP_LOCK)
        condition, params = window_sql(self._d, TimeWindow(now))
        by_scope: dict[tuple[str, str, str], list[str]] = {}
        for key in sorted(set(keys.values())):
            by_scope.setdefault(key[:3], []).append(key[3])
        stored: dict[tuple[str, str, str, str], MemoryEntry] = {}
        for scope, hashes in by_scope.items():
            for chunk, values in self._d.any_of_chunks("content_key", hashes):
                found = yield rows(
                    f"SELECT {self._rows.columns}, content_key FROM memories WHERE tenant_id = %s "  # noqa: S608
                    f"AND layer = %s AND scope_key = %s AND {chunk} AND {condition} "
                    f"ORDER BY {self._d.seq}",
                    *scope,
                    *values,
                    *params,
                )
                for r in found:
                    entry = self._rows.entry(r).model_copy(update={"deduplicated": True})
                    stored.setdefault((*scope, str(r[-1])), entry)
        out: dict[int, MemoryEntry | int] = {}
        first: dict[tuple[str, str, str, str], int] = {}
        for i, key in keys.items():
            if key in stored:
                out[i] = stored[key]
            elif key in first:
                out[i] = first[key]
            else:
                first[key] = i
        return out


def _same_time(a: datetime, b: datetime) -> bool:
    """Whether two times are written the same (the same instant at the same offset)."""
    return a is b or (a == b and a.utcoffset() == b.utcoffset())
