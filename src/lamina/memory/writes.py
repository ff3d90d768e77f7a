"""The write path: add, bulk_add, update, delete and bulk_delete. Content is checked,
scoped through the hierarchy, governed (the write guard), embedded, then stored.
``add(..., infer=True)`` is a conversation of one message (``lamina.memory.messages``)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, Unpack

from pydantic import ValidationError

from lamina.checks import (
    check_actor,
    check_content,
    check_flag,
    check_id,
    check_metadata,
    first_error,
    invalid,
)
from lamina.config import IdentifierFields, MemorySettings, Section
from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.backfill import Backfill
from lamina.memory.base import MemoryPart, MemoryShared, observed
from lamina.memory.hierarchy import Hierarchy
from lamina.memory.layers import (
    IDENTIFIER_NAMES,
    IdentifierArgs,
    Identifiers,
    MemoryLayer,
    identifier_args,
    parse_layer,
    scope_for,
    scope_key,
)
from lamina.memory.models import DeleteResult, MemoryEntry
from lamina.memory.ports import MemoryPorts, NewMemory, Scope
from lamina.memory.timing import Lifetime

#: The reserved metadata key of conversation messages (``lamina.memory.messages`` writes it;
#: ``update`` may not change it).
CONVERSATION_KEY = "conversation"


def check_unreserved(
    metadata: Mapping[str, Any], field: str, why: str = "add_messages sets it"
) -> None:
    """Refuses caller metadata (argument ``field``) that holds the reserved conversation
    key, saying ``why``."""
    if CONVERSATION_KEY in metadata:
        raise invalid(
            f"{field}.{CONVERSATION_KEY}: the key is reserved ({why})",
            f"{field}.{CONVERSATION_KEY}",
        )


class _Content(Section):
    content: str
    layer: str


class MemoryInput(IdentifierFields, _Content):
    """One memory for ``bulk_add``: content, layer, the identifiers, metadata, and the time
    fields ``add`` takes (in that order; unknown keys refused)."""

    metadata: dict[str, Any] | None = None
    timestamp: Any = None
    valid_from: Any = None
    valid_until: Any = None
    ttl: Any = None

    def timing(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in TIME_FIELDS}


#: The time arguments of a write (lamina.memory.timing.Lifetime.of).
TIME_FIELDS = ("timestamp", "valid_from", "valid_until", "ttl")
#: One memory to prepare: content, layer, identifiers, metadata, time arguments.
Item = tuple[object, "str | MemoryLayer", dict[str, "str | None"], object, dict[str, Any]]


class InferredAdd(Protocol):
    """``add(..., infer=True)``: ``content`` stored as a one-message conversation (the
    ``add_messages`` arguments in ``conversation``) and consolidated; the memory with the
    facts' outcomes (``lamina.memory.messages.MessageWrites.add_inferred``)."""

    async def __call__(
        self,
        content: object,
        conversation: dict[str, Any],
        actor: str | None,
        tenant_id: str | None,
    ) -> MemoryEntry: ...


def write_lifetime(
    settings: MemorySettings, layer: MemoryLayer, timing: Mapping[str, Any]
) -> Lifetime:
    """The checked time fields of a write; a session memory without a ttl gets the
    ``memory.session_ttl`` setting's."""
    default = settings.session_ttl if layer is MemoryLayer.SESSION else None
    return Lifetime.of(**timing, default_ttl=default)


def flagged_entry(entry: MemoryEntry, flagged: Mapping[str, list[dict[str, Any]]]) -> MemoryEntry:
    """``entry`` with the non-blocking policy violations found in its content, if any."""
    found = flagged.get(entry.id)
    return entry.model_copy(update={"violations": found}) if found else entry


class MemoryWrites(MemoryPart):
    """``add``, ``bulk_add``, ``update``, ``delete`` and ``bulk_delete``. Holds the writes
    port, the reads port (``update`` reads the memory it governs) and the embeddings port;
    the hierarchy (scopes), the backfill (``background_embedding``) and the conversations'
    ``add_inferred`` (``infer=True``)."""

    def __init__(
        self,
        shared: MemoryShared,
        ports: MemoryPorts,
        *,
        hierarchy: Hierarchy,
        backfill: Backfill,
        add_inferred: InferredAdd,
    ) -> None:
        super().__init__(shared)
        self._writes = ports.writes
        self._reads = ports.reads
        self._embeddings = ports.embeddings
        self._hierarchy = hierarchy
        self._backfill = backfill
        self._add_inferred = add_inferred

    @observed("add")
    async def add(
        self,
        content: str,
        *,
        layer: str | MemoryLayer,
        metadata: Mapping[str, Any] | None = None,
        actor: str | None = None,
        tenant_id: str | None = None,
        background_embedding: bool = False,
        timestamp: str | datetime | None = None,
        valid_from: str | datetime | None = None,
        valid_until: str | datetime | None = None,
        ttl: float | timedelta | None = None,
        dedup: bool | None = None,
        infer: bool = False,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> MemoryEntry:
        """Store one memory in ``layer``; returns the full entry.

        ``background_embedding``: return without waiting for the embedding; the embedding
        buffer adds it shortly (keyword search finds the memory at once, semantic search
        once it is embedded). ``timestamp``: when the event it records happened (default:
        now); ``valid_from`` / ``valid_until``: when the fact holds; ``ttl``: seconds it
        lives (session layer default: ``memory.session_ttl``). ``dedup`` (default: the
        ``memory.dedup`` setting): an exact duplicate already stored in the scope is returned
        (``deduplicated=True``) instead of a new row. ``infer=True``: the content is stored
        verbatim as a message of the user and the chat model consolidates the facts it
        holds with the scope's memories (the entry's ``facts``; as ``add_messages``). See
        docs/memory.md."""
        ids = identifier_args(scope_ids)
        timing = {"timestamp": timestamp, "valid_from": valid_from, "valid_until": valid_until}

        if check_flag("infer", infer):
            given = {"valid_from": valid_from, "valid_until": valid_until}
            for name, value in {**given, "background_embedding": background_embedding}.items():
                if value not in (None, False):
                    raise invalid(f"{name} does not apply with infer=True", name)
            conversation = {
                **ids,
                "layer": layer,
                "metadata": metadata,
                "ttl": ttl,
                "timestamp": timestamp,
            }
            return await self._add_inferred(content, conversation, actor, tenant_id)
        tenant = self._tenant(tenant_id)
        defer = check_flag("background_embedding", background_embedding)
        prepared, flagged = await self._prepare(
            tenant, [(content, layer, ids, metadata, {**timing, "ttl": ttl})], defer, dedup
        )
        new = prepared[0]
        who = check_actor(actor)
        entry = await self._retry.run("add", lambda: self._writes.add(new, actor=who))
        if defer:
            self._backfill.embedding_buffer.trigger(tenant)
        return flagged_entry(entry, flagged)

    def _dedup(self, dedup: object) -> bool:
        return self._settings.dedup if dedup is None else check_flag("dedup", dedup)

    async def _prepare(
        self,
        tenant: str,
        items: Sequence[Item],
        defer: bool = False,
        dedup: object = None,
        keyed: bool = False,
    ) -> tuple[list[NewMemory], dict[str, list[dict[str, Any]]]]:
        """Checked, scoped and embedded memories, and the non-blocking policy violations
        found in them (by memory id)."""
        checked = []
        flagged: dict[str, list[dict[str, Any]]] = {}
        same = self._dedup(dedup) and not keyed
        lives = []
        for content, layer, ids, metadata, timing in items:
            mem_layer = parse_layer(layer)
            text = check_content(content, self._settings.max_content_length)
            meta = check_metadata(metadata)
            check_unreserved(
                meta,
                "metadata",
                "add_messages sets it: store conversation messages with add_messages",
            )
            lives.append(write_lifetime(self._settings, mem_layer, timing))
            resolved = await self._hierarchy.resolve(tenant, Identifiers(**ids))
            scope = scope_for(mem_layer, resolved)
            mid = str(uuid.uuid4())
            if self._write_guard is not None:
                found = await self._write_guard(
                    tenant, mem_layer.value, resolved.given(), text, extra={"metadata": meta}
                )
                if found:
                    flagged[mid] = found
            checked.append((mid, text, Scope(mem_layer, scope, scope_key(mem_layer, scope)), meta))
        texts = [text for _, text, _, _ in checked]
        vectors: list[Vector | None] = [None] * len(texts)
        if not defer:
            vectors = list(
                await self._retry.run(
                    "embed", lambda: self._embeddings.generate_embedding(tenant, texts)
                )
            )
        return [
            NewMemory(
                mid,
                tenant,
                scope,
                text,
                meta,
                vectors[i],
                lifetime=lives[i],
                dedup=same,
                keyed=keyed,
            )
            for i, (mid, text, scope, meta) in enumerate(checked)
        ], flagged

    @observed("bulk_add")
    async def bulk_add(
        self,
        items: Sequence[MemoryInput | Mapping[str, Any]],
        *,
        actor: str | None = None,
        tenant_id: str | None = None,
        background_embedding: bool = False,
        dedup: bool | None = None,
        keyed: bool = False,
    ) -> list[MemoryEntry]:
        """Store many memories in one transaction: all are stored or none
        (``background_embedding`` and ``dedup`` as for ``add``; each item may carry the time
        fields ``add`` takes). One entry per item, in order (an exact duplicate's is the
        stored memory's). ``keyed``: the items are addressed by the caller's own keys (an
        adapter's store): each is stored as a new memory, and no later write is ever
        answered with one of them as its duplicate (docs/memory.md, "Duplicates")."""
        tenant = self._tenant(tenant_id)
        parsed: list[MemoryInput] = []
        for i, item in enumerate(items):
            try:
                parsed.append(
                    item if isinstance(item, MemoryInput) else MemoryInput.model_validate(item)
                )
            except ValidationError as exc:
                where, message = first_error(exc)
                raise invalid(f"item {i}: {message} at {where}", index=i) from None
        defer = check_flag("background_embedding", background_embedding)
        prepared, flagged = await self._prepare(
            tenant,
            [
                (
                    p.content,
                    p.layer,
                    {n: getattr(p, n) for n in IDENTIFIER_NAMES},
                    p.metadata,
                    p.timing(),
                )
                for p in parsed
            ],
            defer,
            dedup,
            check_flag("keyed", keyed),
        )
        who = check_actor(actor)
        if not prepared:
            return []
        entries = await self._retry.run(
            "bulk_add", lambda: self._writes.bulk_add(prepared, actor=who)
        )
        if defer:
            self._backfill.embedding_buffer.trigger(tenant)
        return [flagged_entry(e, flagged) for e in entries]

    @observed("update")
    async def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        actor: str | None = None,
        tenant_id: str | None = None,
    ) -> MemoryEntry:
        """New content is re-embedded; metadata merges (a None value removes the key)."""
        tenant = self._tenant(tenant_id)
        mid = check_id(memory_id)
        if content is None and metadata is None:
            raise invalid("update needs content, metadata or both")
        text = (
            None if content is None else check_content(content, self._settings.max_content_length)
        )
        patch = None if metadata is None else check_metadata(metadata, partial=True)
        if patch is not None:
            check_unreserved(
                patch,
                "metadata",
                "add_messages sets it; a message's place in its conversation cannot be changed",
            )
        who = check_actor(actor)
        vector = None
        flagged: list[dict[str, Any]] = []
        if text is not None or (patch and self._write_guard is not None):
            current = await self._reads.get(tenant, mid)
            if current is None:
                raise LaminaError(
                    ErrorCode.MEMORY_NOT_FOUND, f"memory {mid!r} not found", details={"id": mid}
                )
            if self._write_guard is not None:
                ids = await self._hierarchy.resolve(tenant, Identifiers(**current.identifiers))
                flagged = await self._write_guard(
                    tenant,
                    current.layer.value,
                    ids.given(),
                    text,
                    extra={"metadata": patch} if patch else None,
                )
        if text is not None:
            vector = (
                await self._retry.run(
                    "embed", lambda: self._embeddings.generate_embedding(tenant, [text])
                )
            )[0]
        entry = await self._retry.run(
            "update",
            lambda: self._writes.update(
                tenant, mid, content=text, embedding=vector, metadata_patch=patch, actor=who
            ),
        )
        return flagged_entry(entry, {entry.id: flagged})

    @observed("delete")
    async def delete(
        self, memory_id: str, *, actor: str | None = None, tenant_id: str | None = None
    ) -> DeleteResult:
        """Remove a memory; deleting an absent id succeeds too. History is kept."""
        tenant = self._tenant(tenant_id)
        mid = check_id(memory_id)
        who = check_actor(actor)
        existed = await self._retry.run(
            "delete", lambda: self._writes.delete(tenant, mid, actor=who)
        )
        return DeleteResult(success=True, id=mid, existed=existed)

    @observed("bulk_delete")
    async def bulk_delete(
        self, memory_ids: Sequence[str], *, actor: str | None = None, tenant_id: str | None = None
    ) -> int:
        """Remove many memories in one transaction; returns how many existed."""
        tenant = self._tenant(tenant_id)
        ids = [check_id(m) for m in memory_ids]
        who = check_actor(actor)
        return await self._retry.run(
            "bulk_delete", lambda: self._writes.bulk_delete(tenant, ids, actor=who)
        )
