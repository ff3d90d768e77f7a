"""Memories (lamina.memory.ports.MemoryStore) in SQL, for both backends.

Writes, reads, history, the hierarchy, listing and the embedding cache are shared; search
and the per-layer counts are the backend's own (in-process indexes on SQLite, pgvector and
tsvector on PostgreSQL), and so is the metadata filter's SQL.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from lamina.embeddings.base import Embedder, Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import MetadataFilter
from lamina.memory.layers import MemoryLayer, scope_key
from lamina.memory.models import (
    HistoryEvent,
    HistoryOperation,
    MemoryEntry,
    MemoryPage,
    ScoreParts,
    SearchMode,
)
from lamina.memory.ports import (
    EmbeddingStatus,
    LayerHits,
    LayerSearch,
    NewMemory,
    Scope,
    ScoredMemory,
    updated_entry,
)
from lamina.memory.scoring import Candidate, neighbourhood_terms, neighbourhood_vector, rank
from lamina.memory.timing import TimeWindow, content_key
from lamina.store.cursors import decode_cursor, encode_cursor
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.meta import EmbeddingState
from lamina.store.sql.program import Executor, Program, count, first, many, row, rows
from lamina.store.sql.timing import HISTORY, SqlTiming, conflict, missing

#: The columns of an entry, after the row sequence (``{seq}``): the embedding is the tenth,
#: the time fields (lamina.memory.timing) come last.
ENTRY = (
    "id, tenant_id, layer, identifiers, content, metadata, embedding_model, created_at, "
    "updated_at, embedding, event_at, valid_from, valid_until, expires_at"
)
#: The columns of a history event.
HISTORY_COLUMNS = (
    "memory_id, operation, at, layer, old_content, new_content, old_metadata, new_metadata, actor"
)
#: Where a search row's neighbourhood vector is (after ``{seq}, ENTRY``).
_AROUND = 15
#: A row as the driver returns it.
Row = tuple[Any, ...]
#: Keys per statement where a statement lists them (SQLite allows 32,766 parameters).
_CHUNK = 500
#: The metadata key of a conversation message (``lamina.memory.messages``).
_CONVERSATION = "conversation"
#: Previous turns in a message's neighbourhood (lamina.memory.scoring).
NEIGHBOURS = 2


#: The indexed expression finding the memories holding a text (migrations 0008 / 0010).
_PREFIX = "substr(content, 1, 64)"


def content_hash(text: str) -> str:
    """The embedding cache's key of a text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, order=True)
class ConversationScope:
    """The turns of one conversation in one scope (layer and scope key): the only turns a
    message's neighbourhood is made of."""

    tenant_id: str
    conversation_id: str
    layer: str
    scope_key: str

    def __iter__(self) -> Iterator[str]:
        return iter((self.tenant_id, self.conversation_id, self.layer, self.scope_key))


@dataclass(frozen=True)
class Neighbourhood:
    conversation_id: str
    position: int
    context: str
    vector: Vector | None


def place_of(metadata: dict[str, Any]) -> tuple[str, int] | None:
    """(conversation id, position) of a conversation message (add_messages), else None."""
    conversation = metadata.get(_CONVERSATION)
    if not isinstance(conversation, dict):
        return None
    cid, position = conversation.get("id"), conversation.get("position")
    if isinstance(cid, str) and isinstance(position, int) and not isinstance(position, bool):
        return cid, position
    return None


def _neighbourhood(
    conversation_id: str,
    position: int,
    content: str,
    conversation: dict[str, Any],
    own: Vector | None,
    previous: Sequence[tuple[str, Vector | None]],
) -> Neighbourhood:
    speaker = conversation.get("speaker")
    when = conversation.get("timestamp")
    return Neighbourhood(
        conversation_id,
        position,
        neighbourhood_terms(
            [c for c, _ in previous],
            speaker if isinstance(speaker, str) else None,
            when if isinstance(when, str) else None,
        ),
        neighbourhood_vector(own, [v for _, v in previous]),
    )


class SqlMemories(SqlTiming):
    """The MemoryStore protocol but search and counts, which each backend adds."""

    def __init__(self, executor: Executor, dialect: Dialect, embedder: Embedder) -> None:
        self._exec = executor
        self._d = dialect
        self.embedder = embedder
        #: The model of the stored vectors against the embedder's (set when the store opens).
        self.embedding = EmbeddingState(embedder)
        #: Every column a query reads: the row sequence, then ``ENTRY``.
        self._columns = f"{dialect.seq}, {ENTRY}"

    @abstractmethod
    async def search(self, request: LayerSearch) -> LayerHits: ...

    @abstractmethod
    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]: ...

    @abstractmethod
    def _filter(self, flt: MetadataFilter) -> tuple[str, list[Any]]:
        """The SQL condition of a non-empty metadata filter, and its parameters."""

    def _entry(self, values: Sequence[Any]) -> MemoryEntry:
        d = self._d
        return MemoryEntry(
            id=values[1],
            tenant_id=values[2],
            layer=MemoryLayer(values[3]),
            identifiers=d.from_json(values[4]),
            content=values[5],
            metadata=d.from_json(values[6]),
            embedding_model=values[7],
            created_at=d.from_time(values[8]),
            updated_at=d.from_time(values[9]),
            embedding_generated=values[10] is not None,
            event_at=d.from_time(values[11] or values[8]),
            valid_from=self._time(values[12]),
            valid_until=self._time(values[13]),
            expires_at=self._time(values[14]),
        )

    def _time(self, value: Any) -> datetime | None:
        return None if value is None else self._d.from_time(value)

    def _scored(self, values: Sequence[Any], parts: ScoreParts) -> ScoredMemory:
        # Vectors of two models must never meet (near-duplicate checks compare them).
        vector = None if self.embedding.stale else self._d.from_vector(values[10])
        return ScoredMemory(self._entry(values), parts, vector)

    def _ranked(
        self, req: LayerSearch, found: dict[Any, Row], keyword: dict[Any, float]
    ) -> LayerHits:
        """Score the candidate rows ``found`` (by row key; each row is ``ENTRY`` then the
        neighbourhood vector and words) with lamina.memory.scoring. Both stores read the
        same stored floats and compute the same way: the same scores."""
        d = self._d
        query = req.vector if req.mode is not SearchMode.KEYWORD else None
        candidates = []
        for key, values in found.items():
            cosine = context = None
            if query is not None and not self.embedding.stale:
                own = d.from_vector(values[10])
                if own is not None and len(own) == len(query):
                    cosine = float(own @ query)
                    blob = values[_AROUND]
                    around = None if blob is None else np.frombuffer(blob, np.float32)
                    if around is not None and len(around) == len(query):
                        context = float(around @ query)
            candidates.append(
                Candidate(
                    key,
                    cosine,
                    context,
                    keyword.get(key, 0.0),
                    values[5],
                    d.from_json(values[6]),
                    d.from_time(values[8]),
                )
            )
        ranked = rank(
            candidates,
            req.signals,
            mode=req.mode,
            weight=req.semantic_weight,
            threshold=req.threshold,
            limit=req.limit,
        )
        return LayerHits(
            [self._scored(found[key], parts) for parts, key in ranked.hits],
            ranked.below_threshold,
        )

    def embedding_status(self) -> EmbeddingStatus:
        return self.embedding.status

    def _searchable(self, request: LayerSearch) -> LayerSearch:
        """While the vectors are of another model: semantic search is refused, hybrid search
        runs on keywords only (the service already asks for that; this keeps the port safe)."""
        if not self.embedding.stale or request.mode is SearchMode.KEYWORD:
            return request
        if request.mode is SearchMode.SEMANTIC:
            raise self.embedding.refuse("semantic search")
        return replace(request, mode=SearchMode.KEYWORD, vector=None)

    # -- embeddings -------------------------------------------------------------------------

    async def generate_embedding(
        self, tenant_id: str, texts: Sequence[str], *, cache: bool = True
    ) -> Vector:
        if not cache:
            return await self.embedder.embed(list(texts))
        hashes = [content_hash(t) for t in texts]
        unique = dict(zip(hashes, texts, strict=True))
        cached = await self._exec.read(
            tenant_id, "embedding cache", self._cached(tenant_id, list(unique))
        )
        missing = [h for h in unique if h not in cached]
        if missing:
            vectors = await self.embedder.embed([unique[h] for h in missing])
            fresh = dict(zip(missing, vectors, strict=True))
            await self._exec.write(tenant_id, "embedding cache", self._cache(tenant_id, fresh))
            cached.update(fresh)
        out = np.empty((len(texts), self.embedder.dimensions), dtype=np.float32)
        for i, h in enumerate(hashes):
            out[i] = cached[h]
        return out

    def _cached(self, tenant_id: str, hashes: list[str]) -> Program[dict[str, Vector]]:
        found: dict[str, Vector] = {}
        for start in range(0, len(hashes), _CHUNK):
            chunk, params = self._d.any_of("content_hash", hashes[start : start + _CHUNK])
            for h, blob in (
                yield rows(
                    "SELECT content_hash, vector FROM embedding_cache WHERE tenant_id = %s "  # noqa: S608
                    f"AND model = %s AND length(vector) = %s AND {chunk}",
                    tenant_id,
                    self.embedder.model_id,
                    4 * self.embedder.dimensions,  # one model id, several dimensions (OpenAI)
                    *params,
                )
            ):
                found[h] = np.frombuffer(blob, dtype=np.float32)
        return found

    def _cache(self, tenant_id: str, vectors: dict[str, Vector]) -> Program[None]:
        now = self._d.time(datetime.now(UTC))
        model = self.embedder.model_id
        yield many(
            # A vector of other dimensions under the same model id is replaced.
            "INSERT INTO embedding_cache VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (tenant_id, model, content_hash) DO UPDATE SET vector = excluded.vector, "
            "created_at = excluded.created_at WHERE length(embedding_cache.vector) <> "
            "length(excluded.vector)",
            [
                (tenant_id, model, h, v.astype(np.float32).tobytes(), now)
                for h, v in vectors.items()
            ],
        )

    async def unembedded(self, tenant_id: str, limit: int) -> list[tuple[str, str]]:
        def read() -> Program[list[tuple[str, str]]]:
            found = yield rows(
                "SELECT id, content FROM memories WHERE tenant_id = %s AND embedding IS NULL "  # noqa: S608
                f"ORDER BY {self._d.seq} LIMIT %s",
                tenant_id,
                limit,
            )
            return [(str(i), str(c)) for i, c in found]

        return await self._exec.read(tenant_id, "unembedded", read())

    async def set_embeddings(self, tenant_id: str, items: Sequence[tuple[str, str, Vector]]) -> int:
        if self.embedding.stale:  # pending until ``reembed``, which embeds them too
            return 0
        model = self.embedder.model_id

        def write() -> Program[int]:
            done = 0
            for memory_id, content, vector in items:
                done += yield count(
                    "UPDATE memories SET embedding = %s, embedding_model = %s WHERE "
                    "tenant_id = %s AND id = %s AND content = %s AND embedding IS NULL",
                    self._d.vector(vector),
                    model,
                    tenant_id,
                    memory_id,
                    content,
                )
            return done

        return await self._exec.write(tenant_id, "set embeddings", write())

    # -- writes -----------------------------------------------------------------------------

    async def add(self, memory: NewMemory, *, actor: str | None = None) -> MemoryEntry:
        return (await self._exec.write(memory.tenant_id, "add", self._insert([memory], actor)))[0]

    async def bulk_add(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        if not memories:
            return []
        return await self._exec.write(
            memories[0].tenant_id, "bulk_add", self._insert(list(memories), actor)
        )

    async def add_messages(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        if not memories:
            return []
        return await self._exec.write(
            memories[0].tenant_id, "add_messages", self._add_messages(list(memories), actor)
        )

    def _add_messages(
        self, memories: list[NewMemory], actor: str | None
    ) -> Program[list[MemoryEntry]]:
        """Positions from ``conversations`` (one UPSERT per conversation, its row locked until
        the transaction ends: neighbourhood work on a conversation never interleaves), each
        message's neighbourhood (its two previous turns of the same scope, stored or in this
        call), then the inserts, all in one transaction."""
        sizes: dict[tuple[str, str], int] = {}
        for m in memories:
            key = (m.tenant_id, str(m.metadata[_CONVERSATION]["id"]))
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
        window: dict[ConversationScope, list[tuple[str, Vector | None]]] = {}
        numbered: list[NewMemory] = []
        neighbourhoods: list[Neighbourhood] = []
        for m in memories:
            conversation = m.metadata[_CONVERSATION]
            key = (m.tenant_id, str(conversation["id"]))
            position = nxt[key]
            nxt[key] += 1
            thread = ConversationScope(m.tenant_id, key[1], m.scope.layer.value, m.scope.key)
            if thread not in window:
                window[thread] = yield from self._previous_turns(thread, position)
            metadata = {**m.metadata, _CONVERSATION: {**conversation, "position": position}}
            numbered.append(replace(m, metadata=metadata))
            previous = window[thread][-NEIGHBOURS:]
            neighbourhoods.append(
                _neighbourhood(key[1], position, m.content, conversation, m.embedding, previous)
            )
            window[thread].append((m.content, m.embedding))
        return (yield from self._insert(numbered, actor, neighbourhoods))

    def _previous_turns(
        self, thread: ConversationScope, before: int
    ) -> Program[list[tuple[str, Vector | None]]]:
        """(content, vector) of the ``NEIGHBOURS`` stored turns of ``thread`` before position
        ``before``, oldest first. Only turns of the same scope count: a conversation id
        another user also used never lends that user's words."""
        found = yield rows(
            "SELECT content, embedding, embedding_model FROM memories WHERE tenant_id = %s "
            "AND conversation_id = %s AND layer = %s AND scope_key = %s "
            "AND conversation_position < %s ORDER BY conversation_position DESC LIMIT %s",
            *thread,
            before,
            NEIGHBOURS,
        )
        return [(str(c), self._vector_of(v, m)) for c, v, m in reversed(found)]

    def _lock_conversations(self, tenant_id: str, conversation_ids: set[str]) -> Program[None]:
        """Hold the ``conversations`` rows (as ``add_messages`` does) before changing turns,
        in one order: no neighbourhood is computed from turns that change meanwhile."""
        for conversation_id in sorted(conversation_ids):
            yield row(
                "SELECT next_position FROM conversations WHERE tenant_id = %s "  # noqa: S608
                f"AND conversation_id = %s{self._d.for_update}",
                tenant_id,
                conversation_id,
            )

    def _vector_of(self, value: Any, model: str | None) -> Vector | None:
        """A stored vector if it is of the configured model and size, else None (vectors of
        two models never meet)."""
        if value is None or model != self.embedder.model_id:
            return None
        vector = self._d.from_vector(value)
        return vector if vector is not None and len(vector) == self.embedder.dimensions else None

    def _renew(self, thread: ConversationScope, after: int, count_: int | None) -> Program[None]:
        """Recompute the neighbourhood of the ``count_`` turns (None: all) of ``thread``
        after position ``after`` from the turns now before them: after a turn was deleted
        or rewritten, no neighbour keeps its old words or vector."""
        window = yield from self._previous_turns(thread, after + 1)
        limit = "" if count_ is None else f" LIMIT {int(count_)}"
        targets = yield rows(
            "SELECT id, conversation_position, content, metadata, embedding, embedding_model "  # noqa: S608
            "FROM memories WHERE tenant_id = %s AND conversation_id = %s AND layer = %s "
            "AND scope_key = %s AND conversation_position > %s "
            f"ORDER BY conversation_position{limit}",
            *thread,
            after,
        )
        tenant_id, conversation_id = thread.tenant_id, thread.conversation_id
        updates = []
        for memory_id, position, content, metadata, embedding, model in targets:
            conversation = self._d.from_json(metadata).get(_CONVERSATION, {})
            own = self._vector_of(embedding, model)
            n = _neighbourhood(
                conversation_id, position, content, conversation, own, window[-NEIGHBOURS:]
            )
            window.append((content, own))
            columns = self._neighbourhood_columns(content, n)
            names = ", ".join(f"{c} = %s" for c in columns)
            updates.append((*columns.values(), tenant_id, memory_id))
        if updates:
            yield many(
                f"UPDATE memories SET {names} WHERE tenant_id = %s AND id = %s",  # noqa: S608
                updates,
            )

    def _neighbourhood_columns(self, content: str, n: Neighbourhood | None) -> dict[str, Any]:
        """The index columns of a row; a conversation message's also name its place and
        neighbourhood (other rows leave those columns out: stores of an older schema, which
        tests fill, lack them)."""
        if n is None:
            return self._d.memory_terms(content)
        return {
            "conversation_id": n.conversation_id,
            "conversation_position": n.position,
            "context": n.context,
            "context_embedding": None if n.vector is None else self._d.blob(n.vector),
            **self._d.memory_terms(content, n.context),
        }

    def _insert(
        self,
        memories: list[NewMemory],
        actor: str | None,
        neighbourhoods: Sequence[Neighbourhood | None] | None = None,
        histories: Sequence[list[HistoryEvent] | None] | None = None,
    ) -> Program[list[MemoryEntry]]:
        """Insert ``memories`` (times: theirs, else now) and their history: the events
        given (``histories``, by memory; an import), else one ``add`` event each. Those
        asking for dedup that have an exact duplicate stored, or earlier in the list,
        return that one instead."""
        d = self._d
        now = datetime.now(UTC)
        model = self.embedder.model_id
        # While the store needs re-embedding, new vectors wait (pending) for ``reembed``.
        if self.embedding.stale:
            memories = [replace(m, embedding=None) for m in memories]
        around: list[Neighbourhood | None] = (
            list(neighbourhoods) if neighbourhoods else [None] * len(memories)
        )
        same = yield from self._duplicates(memories, now)
        fresh = [(i, m, n) for i, (m, n) in enumerate(zip(memories, around, strict=True))]
        fresh = [(i, m, n) for i, m, n in fresh if i not in same]
        stored = [self._row(m, n, now) for _, m, n in fresh]
        names = list(dict.fromkeys(k for values in stored for k in values))
        if any(len(values) != len(names) for values in stored):  # messages among memories
            stored = [{k: values.get(k) for k in names} for values in stored]
        # COPY is refused under row-level security: pipelined INSERTs of d.rows_per_insert
        # rows each (the last one shorter).
        per = d.rows_per_insert
        full = len(stored) - len(stored) % per
        for part, size in ((stored[:full], per), (stored[full:], len(stored) - full)):
            if part:
                shape = f"({', '.join(['%s'] * len(part[0]))})"
                yield many(
                    f"INSERT INTO memories ({', '.join(part[0])}) VALUES "  # noqa: S608
                    + ", ".join([shape] * size),
                    [
                        tuple(v for values in part[i : i + size] for v in values.values())
                        for i in range(0, len(part), size)
                    ],
                )
        given_all = histories or [None] * len(memories)
        events: list[tuple[Any, ...]] = []
        for (i, _, _), v in zip(fresh, stored, strict=True):
            given = given_all[i]
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
        if events:
            yield many(HISTORY, events)
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
            for i, m, _ in fresh
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

    def _row(self, m: NewMemory, n: Neighbourhood | None, now: datetime) -> dict[str, Any]:
        """The columns of a new memory's row."""
        d = self._d
        life = m.lifetime
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
            "created_at": d.time(m.created_at or now),
            "updated_at": d.time(m.updated_at or m.created_at or now),
            "event_at": d.time(life.event_at or m.created_at or now),
            "valid_from": self._param(life.valid_from),
            "valid_until": self._param(life.valid_until),
            "expires_at": self._param(life.expires_at),
            "content_key": None if place_of(m.metadata) else content_key(m.content),
        }

    async def update(
        self,
        tenant_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        embedding: Vector | None = None,
        metadata_patch: dict[str, Any] | None = None,
        actor: str | None = None,
    ) -> MemoryEntry:
        return await self._exec.write(
            tenant_id,
            "update",
            self._update(tenant_id, memory_id, content, embedding, metadata_patch, actor),
        )

    def _update(
        self,
        tenant_id: str,
        memory_id: str,
        content: str | None,
        embedding: Vector | None,
        patch: dict[str, Any] | None,
        actor: str | None,
        seen: datetime | None = None,
    ) -> Program[MemoryEntry]:
        """``seen``: the memory's updated_at when the caller read it (CONFLICT if it changed
        since). An expired memory is MEMORY_NOT_FOUND."""
        d = self._d
        if content is not None or embedding is not None:
            before = yield row(
                "SELECT metadata FROM memories WHERE tenant_id = %s AND id = %s",
                tenant_id,
                memory_id,
            )
            place = None if before is None else place_of(d.from_json(before[0]))
            if place is not None:
                yield from self._lock_conversations(tenant_id, {place[0]})
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
        sets: dict[str, Any] = {
            "metadata": d.json(new.metadata),
            "updated_at": d.time(new.updated_at),
        }
        if content is not None:
            sets["content"] = content
            sets.update(d.memory_terms(content))
            sets["content_key"] = None if place_of(old.metadata) else content_key(content)
        if embedding is not None:
            sets["embedding"] = d.vector(embedding)
            sets["embedding_model"] = self.embedder.model_id
        elif stale:
            sets["embedding"] = None
            sets["embedding_model"] = None
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
            d.json(old.metadata),
            sets["metadata"],
            actor,
            sets["updated_at"],
        )
        if content is not None and content != old.content:
            yield from self._drop_vectors(tenant_id, {old.content})
        place = place_of(old.metadata)
        if place is not None and (content is not None or embedding is not None):
            # Its own neighbourhood vector holds its vector; the next turns hold its words.
            key = scope_key(old.layer, old.identifiers)
            thread = ConversationScope(tenant_id, place[0], old.layer.value, key)
            yield from self._renew(thread, place[1] - 1, NEIGHBOURS + 1)
        return new

    async def delete(self, tenant_id: str, memory_id: str, *, actor: str | None = None) -> bool:
        return (
            await self._exec.write(tenant_id, "delete", self._delete(tenant_id, [memory_id], actor))
            == 1
        )

    async def bulk_delete(
        self, tenant_id: str, memory_ids: Sequence[str], *, actor: str | None = None
    ) -> int:
        return await self._exec.write(
            tenant_id, "bulk_delete", self._delete(tenant_id, list(memory_ids), actor)
        )

    def _delete(self, tenant_id: str, memory_ids: list[str], actor: str | None) -> Program[int]:
        d = self._d
        now = d.time(datetime.now(UTC))
        ids = list(dict.fromkeys(memory_ids))
        removed = 0
        for start in range(0, len(ids), _CHUNK):
            chunk, params = d.any_of("id", ids[start : start + _CHUNK])
            going = yield rows(
                f"SELECT metadata FROM memories WHERE tenant_id = %s AND {chunk}",  # noqa: S608
                tenant_id,
                *params,
            )
            talks = {p[0] for r in going if (p := place_of(d.from_json(r[0]))) is not None}
            yield from self._lock_conversations(tenant_id, talks)
            deleted = yield rows(
                f"DELETE FROM memories WHERE tenant_id = %s AND {chunk} "  # noqa: S608
                "RETURNING id, layer, content, metadata, scope_key",
                tenant_id,
                *params,
            )
            places = set()
            for r in deleted:
                place = place_of(d.from_json(r[3]))
                if place is not None:
                    places.add((ConversationScope(tenant_id, place[0], r[1], r[4]), place[1]))
            for thread, position in sorted(places):
                yield from self._renew(thread, position, NEIGHBOURS)
            if deleted:
                yield from self._forget([r[0] for r in deleted], tenant_id, [r[2] for r in deleted])
                yield many(
                    HISTORY,
                    [
                        (tenant_id, r[0], "delete", r[1], None, None, None, None, actor, now)
                        for r in deleted
                    ],
                )
            removed += len(deleted)
        return removed

    def _forget(self, memory_ids: list[str], tenant_id: str, contents: list[str]) -> Program[None]:
        """Forget deleted memories: their history keeps what happened, when and by whom but
        no text or metadata, and the embedding cache drops the vectors of every text they
        ever held that no memory of the tenant still holds."""
        chunk, params = self._d.any_of("memory_id", memory_ids)
        held = yield rows(
            "SELECT old_content, new_content FROM memory_history "  # noqa: S608
            f"WHERE tenant_id = %s AND {chunk}",
            tenant_id,
            *params,
        )
        yield count(
            "UPDATE memory_history SET old_content = NULL, new_content = NULL, "  # noqa: S608
            f"old_metadata = NULL, new_metadata = NULL WHERE tenant_id = %s AND {chunk}",
            tenant_id,
            *params,
        )
        texts = set(contents) | {t for r in held for t in r if t is not None}
        yield from self._drop_vectors(tenant_id, texts)

    def _drop_vectors(self, tenant_id: str, texts: set[str]) -> Program[None]:
        """Drop the cached vectors of ``texts`` that no memory of the tenant holds (found by
        the ``memories_content_prefix`` index, then compared whole)."""
        ordered = sorted(texts)
        for start in range(0, len(ordered), _CHUNK):
            part = ordered[start : start + _CHUNK]
            prefix, params = self._d.any_of(_PREFIX, list({t[:64] for t in part}))
            kept = yield rows(
                f"SELECT content FROM memories WHERE tenant_id = %s AND {prefix}",  # noqa: S608
                tenant_id,
                *params,
            )
            still = {r[0] for r in kept}
            unused = [content_hash(t) for t in part if t not in still]
            if unused:
                hashes, values = self._d.any_of("content_hash", unused)
                yield count(
                    f"DELETE FROM embedding_cache WHERE tenant_id = %s AND {hashes}",  # noqa: S608
                    tenant_id,
                    *values,
                )

    # -- reads ------------------------------------------------------------------------------

    async def get(self, tenant_id: str, memory_id: str) -> MemoryEntry | None:
        """The memory (also once invalidated), None when absent or expired."""
        get = first(
            self._entry,
            f"SELECT {self._columns} FROM memories WHERE tenant_id = %s AND id = %s "  # noqa: S608
            "AND (expires_at IS NULL OR expires_at > %s)",
            tenant_id,
            memory_id,
            self._d.time(datetime.now(UTC)),
        )
        return await self._exec.read(tenant_id, "get", get)

    async def history(self, tenant_id: str, memory_id: str) -> list[HistoryEvent]:
        def read() -> Program[list[HistoryEvent]]:
            found = yield rows(
                f"SELECT {HISTORY_COLUMNS} FROM memory_history WHERE tenant_id = %s "  # noqa: S608
                "AND memory_id = %s ORDER BY seq",
                tenant_id,
                memory_id,
            )
            return [self._event(r) for r in found]

        return await self._exec.read(tenant_id, "history", read())

    def _event(self, r: Sequence[Any]) -> HistoryEvent:
        """A history event of its row (``HISTORY`` columns)."""
        d = self._d
        return HistoryEvent(
            memory_id=r[0],
            operation=HistoryOperation(r[1]),
            at=d.from_time(r[2]),
            layer=MemoryLayer(r[3]),
            old_content=r[4],
            new_content=r[5],
            old_metadata=None if r[6] is None else d.from_json(r[6]),
            new_metadata=None if r[7] is None else d.from_json(r[7]),
            actor=r[8],
        )

    async def list(
        self,
        tenant_id: str,
        scopes: Sequence[Scope],
        flt: MetadataFilter,
        *,
        limit: int,
        cursor: str | None,
        window: TimeWindow | None = None,
    ) -> MemoryPage:
        before = decode_cursor(cursor) if cursor else None
        if not scopes:
            return MemoryPage(items=[], next_cursor=None, total_count=0)
        pairs = " OR ".join(["(layer = %s AND scope_key = %s)"] * len(scopes))
        where = f"tenant_id = %s AND ({pairs})"
        params: list[Any] = [tenant_id]
        for scope in scopes:
            params += [scope.layer.value, scope.key]
        if not flt.empty:
            condition, values = self._filter(flt)
            where += f" AND {condition}"
            params += values
        timing, values = self._window(window)
        where += f" AND {timing}"
        params += values
        seq = self._d.seq

        def page() -> Program[MemoryPage]:
            total = yield row(f"SELECT count(*) FROM memories WHERE {where}", *params)  # noqa: S608
            page_where = where + ("" if before is None else f" AND {seq} < %s")
            page_params = params + ([] if before is None else [before])
            found = yield rows(
                f"SELECT {self._columns} FROM memories WHERE {page_where} "  # noqa: S608
                f"ORDER BY {seq} DESC LIMIT %s",
                *page_params,
                limit + 1,
            )
            more = len(found) > limit
            found = found[:limit]
            return MemoryPage(
                items=[self._entry(r) for r in found],
                next_cursor=encode_cursor(found[-1][0]) if more else None,
                total_count=total[0],
            )

        return await self._exec.read(tenant_id, "list", page(), snapshot=True)

    # -- hierarchy --------------------------------------------------------------------------

    async def set_parent(self, tenant_id: str, level: str, child_id: str, parent_id: str) -> None:
        def write() -> Program[None]:
            yield count(
                "INSERT INTO hierarchy VALUES (%s, %s, %s, %s, %s) ON CONFLICT "
                "(tenant_id, level, child_id) DO UPDATE SET parent_id = excluded.parent_id, "
                "updated_at = excluded.updated_at",
                tenant_id,
                level,
                child_id,
                parent_id,
                self._d.time(datetime.now(UTC)),
            )

        await self._exec.write(tenant_id, "set_parent", write())

    async def get_parent(self, tenant_id: str, level: str, child_id: str) -> str | None:
        read = first(
            lambda found: str(found[0]),
            "SELECT parent_id FROM hierarchy WHERE tenant_id = %s AND level = %s "
            "AND child_id IN (%s, '*') ORDER BY child_id = '*' LIMIT 1",
            tenant_id,
            level,
            child_id,
        )
        return await self._exec.read(tenant_id, "get_parent", read)
