"""The memory ports: a few small Protocols by concern (reads, writes, forgetting, transfer,
embeddings, owners and counts), and ``MemoryPorts``, the repositories a store hands out,
one per port.

Stores speak in tenants, layers and scope keys; the memory service above them resolves
identifiers, validates input, retries and merges. ``tests/conformance`` runs one suite
against every implementation (lamina.store.sqlite, lamina.store.postgres).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, Unpack

from lamina.embeddings.base import Vector
from lamina.memory.models import ForgetResult, HistoryEvent, MemoryEntry, MemoryPage
from lamina.memory.ports.shapes import (
    Consolidated,
    Consolidation,
    EmbeddingStatus,
    ExportPage,
    Forgetting,
    ImportWriter,
    Invalidation,
    ItemText,
    LayerHits,
    LayerSearch,
    MemoryChange,
    MemoryListing,
    NewMemory,
    ReembedProgress,
    ScopeCount,
    Selection,
    StoredMemory,
)

__all__ = [
    "MemoryEmbeddingStore",
    "MemoryForgettingStore",
    "MemoryOwnerStore",
    "MemoryPorts",
    "MemoryReadStore",
    "MemoryTransferStore",
    "MemoryWriteStore",
]


class MemoryReadStore(Protocol):
    """Reading memories: one by id, a page of a scope, a search, a memory's history."""

    async def get(self, tenant_id: str, memory_id: str) -> MemoryEntry | None: ...

    async def search(self, request: LayerSearch) -> LayerHits: ...

    async def history(self, tenant_id: str, memory_id: str) -> list[HistoryEvent]:
        """Oldest first. Once a memory is deleted its events keep what happened, when and by
        whom, never its content or metadata (they read None)."""
        ...

    async def list(self, tenant_id: str, **listing: Unpack[MemoryListing]) -> MemoryPage:
        """Newest first; ``window`` (None: now, valid only) as in LayerSearch; the total
        counted up to ``count_limit`` (None: exactly)."""
        ...


class MemoryWriteStore(Protocol):
    """Writing memories: adding (facts and conversation messages), changing, deleting by id,
    invalidating, and a consolidation's writes in one transaction."""

    async def add(self, memory: NewMemory, *, actor: str | None = None) -> MemoryEntry: ...

    async def bulk_add(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]: ...

    async def add_messages(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        """``bulk_add`` for conversation messages (``lamina.memory.messages``): each memory's
        metadata ``conversation`` names its conversation (``id``); its ``position`` is set
        here, in the insert's transaction, continuing that conversation of that tenant in
        the order given. Positions never repeat: concurrent calls get distinct ranges, and
        deleting memories frees none. Returns the entries with their positions."""
        ...

    async def update(
        self, tenant_id: str, memory_id: str, **change: Unpack[MemoryChange]
    ) -> MemoryEntry:
        """MEMORY_NOT_FOUND when absent. A patch value of None removes that key."""
        ...

    async def delete(self, tenant_id: str, memory_id: str, *, actor: str | None = None) -> bool:
        """True when a memory was removed; absent ids are not an error."""
        ...

    async def bulk_delete(
        self, tenant_id: str, memory_ids: Sequence[str], *, actor: str | None = None
    ) -> int: ...

    async def invalidate(
        self, tenant_id: str, invalidations: Sequence[Invalidation], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        """Set valid_until of each memory (an ``invalidate`` history event each); unknown ids
        are MEMORY_NOT_FOUND and nothing changes."""
        ...

    async def consolidate(self, change: Consolidation, *, actor: str | None = None) -> Consolidated:
        """Write a consolidation's messages, facts, revisions and invalidations in one
        transaction: all or nothing (CONFLICT when a memory changed since it was read)."""
        ...


class MemoryForgettingStore(Protocol):
    """Forgetting by selection and by time to live: what ``lamina.memory.lifecycle`` needs."""

    async def count_where(self, tenant_id: str, selection: Selection) -> int:
        """How many memories ``delete_where`` would delete now."""
        ...

    async def delete_where(
        self, tenant_id: str, selection: Selection, *, actor: str | None = None
    ) -> int:
        """Delete every selected memory in one transaction, as ``delete`` does; the count."""
        ...

    async def forget_where(
        self, tenant_id: str, selection: Selection, **forgetting: Unpack[Forgetting]
    ) -> ForgetResult:
        """``delete_where``, and in the same transaction the observational memory (session
        messages, observations, reflections, graph relations, leases) of the sessions
        ``session_keys`` and of the sessions the deleted memories name (their session_id)."""
        ...

    async def expired_tenants(self, at: datetime, limit: int) -> list[str]:
        """Tenants holding memories whose time to live ended by ``at`` (any tenant)."""
        ...

    async def purge_expired(
        self, tenant_id: str, at: datetime, limit: int, *, actor: str | None = None
    ) -> int:
        """Delete up to ``limit`` memories of the tenant expired by ``at``; how many."""
        ...


class MemoryTransferStore(Protocol):
    """Export and import of memories (``lamina.memory.transfer``)."""

    async def export_page(
        self, tenant_id: str, selection: Selection, **page: Unpack[ExportPage]
    ) -> tuple[list[StoredMemory], str | None]:
        """Up to ``limit`` selected memories, oldest first, after ``cursor``; and the cursor
        of the next page (None: no more). Each page is one consistent read."""
        ...

    async def import_memories(
        self, tenant_id: str, memories: Sequence[StoredMemory], *, actor: str | None = None
    ) -> list[str]:
        """Store ``memories`` with their ids, times and history in one transaction, skipping
        ids the tenant already has; returns the ids stored. Vectors must be of the store's
        model (the service embeds the rest first)."""
        ...

    def bulk_loading(self) -> AbstractAsyncContextManager[bool]:
        """Around loading many memories (an import): a store may put off index upkeep to
        the end (PostgreSQL builds its vector index once, after loading into an empty
        database, when it may). Yields whether it did."""
        ...

    def atomic_import(self, tenant_id: str) -> AbstractAsyncContextManager[ImportWriter | None]:
        """Around an import into an empty store, when the store can: ONE transaction holds
        every batch (``import_memories`` on it: the writer yielded), committed when the
        block ends without an error and rolled back otherwise, so the records can be
        checked while they are stored. The store may keep its indexes in one pass at the end
        of it (PostgreSQL: the keyword postings and the vector index, in the same
        transaction). Yields None when it cannot (the caller imports batch by batch)."""
        ...


class MemoryEmbeddingStore(Protocol):
    """Embeddings: the store's model against the configured one, the persistent cache, the
    memories still waiting for a vector, and re-embedding."""

    def embedding_status(self) -> EmbeddingStatus:
        """The store's embedding model against the configured one (known once opened)."""
        ...

    async def generate_embedding(
        self, tenant_id: str, texts: Sequence[str], *, cache: bool = True
    ) -> Vector:
        """Vectors for ``texts``, cached by content hash: the embedder sees each text once.

        ``cache=False`` (search queries) neither reads nor writes the persistent cache.
        """
        ...

    async def unembedded(self, tenant_id: str, limit: int) -> list[tuple[str, str]]:
        """(id, content) of memories still waiting for their embedding, oldest first."""
        ...

    async def set_embeddings(self, tenant_id: str, items: Sequence[tuple[str, str, Vector]]) -> int:
        """Store (id, content, vector) embeddings of memories that still have none and whose
        content is still ``content`` (no history event: content does not change)."""
        ...

    async def reembed(
        self, item_text: ItemText, *, batch_size: int, on_progress: ReembedProgress | None
    ) -> dict[str, Any]:
        """Re-compute every vector of every tenant (memories, context items, the knowledge
        index) with the configured embedder, resumably, then record it as the store's model
        and drop the embedding cache of other models. A no-op when nothing is stale."""
        ...


class MemoryOwnerStore(Protocol):
    """The hierarchy of identifiers (parents) and the counts of memories by layer and scope."""

    async def set_parent(self, tenant_id: str, level: str, child_id: str, parent_id: str) -> None:
        """Register a hierarchy link; ``child_id`` ``*`` sets the tenant-wide default."""
        ...

    async def get_parent(self, tenant_id: str, level: str, child_id: str) -> str | None:
        """The registered parent, else the tenant default, else None."""
        ...

    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]: ...

    async def count_scopes(self, query: ScopeCount) -> list[tuple[str, int]]:
        """Each scope key ``query`` selects, with how many memories it holds (every stored
        memory, as ``count_where`` counts)."""
        ...


@dataclass(frozen=True)
class MemoryPorts:
    """The memory repositories a store hands out (``Backend.memories``), one per concern:
    each service part takes the one it needs."""

    reads: MemoryReadStore
    writes: MemoryWriteStore
    forgetting: MemoryForgettingStore
    transfer: MemoryTransferStore
    embeddings: MemoryEmbeddingStore
    owners: MemoryOwnerStore
