"""The memory ports: what memories and searchable items need stored, and their records.

Stores speak in tenants, layers and scope keys; the memory service above them resolves
identifiers, validates input, retries and merges. ``tests/conformance`` runs one suite
against every implementation (lamina.store.sqlite, lamina.store.postgres).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, NotRequired, Protocol, TypedDict, Unpack

from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import MetadataFilter
from lamina.memory.layers import MemoryLayer
from lamina.memory.models import (
    ForgetResult,
    HistoryEvent,
    MemoryEntry,
    MemoryPage,
    ScoreParts,
    SearchMode,
)
from lamina.memory.scoring import QuerySignals
from lamina.memory.timing import Lifetime, TimeWindow


@dataclass(frozen=True)
class Scope:
    """One layer's slice of a tenant: ``key`` is ``scope_key(layer, identifiers)``."""

    layer: MemoryLayer
    identifiers: dict[str, str]
    key: str


@dataclass(frozen=True)
class NewMemory:
    id: str
    tenant_id: str
    scope: Scope
    content: str
    metadata: dict[str, Any]
    #: None: embedded later in the background (EmbeddingBuffer); until then keyword search
    #: finds the memory and semantic search does not.
    embedding: Vector | None
    #: None: now (an import keeps the times it was given).
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: Its event time, validity and expiry (docs/memory.md, "Time").
    lifetime: Lifetime = field(default_factory=Lifetime)
    #: Return an exact duplicate (same normalised content, same scope, valid and not
    #: expired) instead of storing a new row (lamina.memory.timing.content_key).
    dedup: bool = False
    #: Addressed by its caller's own key (an adapter's item, as the LangGraph store's):
    #: never an exact duplicate of a later write either (stored without a content key,
    #: kept without one when its content changes).
    keyed: bool = False


@dataclass(frozen=True)
class Selection:
    """Memories of a tenant chosen by layer and identifiers (``delete_all``, ``export``): a
    memory is selected when its layer is one of ``layers`` (empty: any) and its identifiers
    hold every one of ``identifiers`` with the same value (empty: any)."""

    layers: tuple[MemoryLayer, ...] = ()
    identifiers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredMemory:
    """A memory as export reads it and import writes it: its entry, its vector (when asked
    for; import: None embeds the content) and its history (when asked for; import: None
    records one ``add`` event)."""

    entry: MemoryEntry
    vector: Vector | None = None
    history: list[HistoryEvent] | None = None


#: Stores a batch of an atomic import: ``import_memories`` (the memories, the actor) on the
#: import's own transaction; the ids stored. It may be called for the next batch before a
#: call returns: the batches are stored one at a time, in the order of the calls (the
#: writer may make a batch's rows meanwhile), and none after one that failed.
ImportWriter = Callable[[Sequence[StoredMemory], str | None], Awaitable[list[str]]]


@dataclass(frozen=True)
class LayerSearch:
    """A search within one scope, scored by lamina.memory.scoring; ``threshold`` applies to
    the final score.

    ``text`` is the query as given; ``terms`` its keyword terms (lamina.text.analyze:
    Snowball stems without stop words); ``vector`` its embedding (None in keyword mode, or
    while ``vector_soon`` computes it); ``signals`` what else it names (speakers, quoted
    phrases, dates).
    """

    tenant_id: str
    scope: Scope
    mode: SearchMode
    text: str
    vector: Vector | None
    terms: tuple[str, ...]
    threshold: float | None
    limit: int
    filter: MetadataFilter
    semantic_weight: float = 0.5
    signals: QuerySignals = field(default_factory=lambda: QuerySignals.of(""))
    #: Expired memories are never candidates; invalid ones only with include_invalid.
    window: TimeWindow = field(default_factory=TimeWindow)
    #: Whether conversation messages (add_messages) and keyed items (bulk_add(keyed=True))
    #: are candidates (consolidation compares facts with facts only).
    messages: bool = True
    #: The embedding being computed while the search starts: a store may do its keyword work
    #: first and take the vector from ``resolved()`` when it needs it.
    vector_soon: asyncio.Future[Vector] | None = None

    async def resolved(self) -> LayerSearch:
        """This search with its vector (waiting for ``vector_soon`` when it is still due)."""
        if self.vector is not None or self.vector_soon is None:
            return self
        # Shielded: the layers of one search share the embedding; one layer's search
        # cancelled does not cancel it for the others.
        return replace(self, vector=await asyncio.shield(self.vector_soon), vector_soon=None)


@dataclass(frozen=True)
class ScoredMemory:
    entry: MemoryEntry
    parts: ScoreParts
    vector: Vector | None

    @property
    def score(self) -> float:
        return self.parts.score

    @property
    def semantic_score(self) -> float | None:
        return self.parts.semantic

    @property
    def keyword_score(self) -> float | None:
        return self.parts.keyword


@dataclass(frozen=True)
class LayerHits:
    """A scope's best memories for a search, and how many candidates fell below the
    threshold."""

    hits: list[ScoredMemory]
    below_threshold: int = 0


def updated_entry(
    old: MemoryEntry,
    *,
    content: str | None,
    metadata_patch: dict[str, Any] | None,
    embedding_model: str | None,
) -> MemoryEntry:
    """What ``update`` makes of ``old``: every store applies the same rules.

    Metadata merges key by key (a None value removes the key); ``updated_at`` moves forward
    even within one clock tick; ``embedding_model`` is given when the content was re-embedded.
    """
    metadata = dict(old.metadata)
    for key, value in (metadata_patch or {}).items():
        if value is None:
            metadata.pop(key, None)
        else:
            metadata[key] = value
    return old.model_copy(
        update={
            "content": old.content if content is None else content,
            "metadata": metadata,
            "updated_at": max(datetime.now(UTC), old.updated_at + timedelta(microseconds=1)),
            "embedding_model": embedding_model or old.embedding_model,
            "embedding_generated": old.embedding_generated or embedding_model is not None,
        }
    )


@dataclass(frozen=True)
class EmbeddingStatus:
    """The model a store's vectors come from, and the model this process embeds with.

    When they differ (or a re-embedding is under way) the store needs ``reembed``: until it
    is done, writes keep their vectors pending, semantic search is refused and hybrid
    search runs on keywords only (docs/operations.md, "Changing the embedding model")."""

    store_model: str
    store_dimensions: int
    model: str
    dimensions: int
    #: A re-embedding to ``model`` was started and has not finished.
    in_progress: bool = False

    @property
    def reembed_needed(self) -> bool:
        return self.in_progress or (self.store_model, self.store_dimensions) != (
            self.model,
            self.dimensions,
        )

    def usable_mode(self, mode: SearchMode) -> SearchMode:
        """The search mode that can run now: while the vectors are of another model
        (``reembed_needed``), hybrid search runs on keywords only and semantic search is
        refused (CONFIGURATION_ERROR), never comparing a query with vectors of another
        model. The one statement of that rule, for the service and both stores."""
        if not self.reembed_needed or mode is SearchMode.KEYWORD:
            return mode
        if mode is SearchMode.SEMANTIC:
            raise self.refusal("semantic search")
        return SearchMode.KEYWORD

    def refusal(self, what: str) -> LaminaError:
        """The error of a search that needs vectors of the configured model."""
        return LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"{what} needs vectors of {self.model} ({self.dimensions}-d) but the store's are "
            f"of {self.store_model} ({self.store_dimensions}-d): run `lamina memory reembed` "
            "(ms.memory.reembed()); keyword search works meanwhile and hybrid search uses "
            "keywords only",
            details=self.to_dict(),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "store_model": self.store_model,
            "store_dimensions": self.store_dimensions,
            "embedder_model": self.model,
            "embedder_dimensions": self.dimensions,
            "reembed_needed": self.reembed_needed,
            "reembed_in_progress": self.in_progress,
        }


@dataclass(frozen=True)
class Revision:
    """New content for a stored memory (consolidation's UPDATE). ``seen``: its updated_at
    when it was read; a memory changed since makes the whole write a CONFLICT. ``event_at``:
    the time of the evidence it now comes from (None: kept)."""

    memory_id: str
    seen: datetime
    content: str
    embedding: Vector | None
    metadata_patch: dict[str, Any] | None = None
    event_at: datetime | None = None


@dataclass(frozen=True)
class Invalidation:
    """A fact that stopped holding at ``at`` (valid_until); ``seen`` as for Revision (None:
    no check)."""

    memory_id: str
    at: datetime
    seen: datetime | None = None


@dataclass(frozen=True)
class Consolidation:
    """What one consolidation writes, in one transaction: the messages verbatim (as
    ``add_messages``), the facts added (deduplicated), revised and invalidated."""

    tenant_id: str
    messages: Sequence[NewMemory] = ()
    added: Sequence[NewMemory] = ()
    revised: Sequence[Revision] = ()
    invalidated: Sequence[Invalidation] = ()


@dataclass(frozen=True)
class Consolidated:
    """The entries a Consolidation wrote, in the order given."""

    messages: list[MemoryEntry]
    added: list[MemoryEntry]
    revised: list[MemoryEntry]
    invalidated: list[MemoryEntry]


#: What re-embedding reports as it goes: (rows done, rows in all).
ReembedProgress = Callable[[int, int | None], None]
#: The text a context item's vector stands for (knowledge documents: not their content).
ItemText = Callable[["ContextRecord"], str]


class MemoryChange(TypedDict, total=False):
    """What ``update`` changes (absent or None: unchanged), and who changes it."""

    content: str | None
    embedding: Vector | None
    metadata_patch: dict[str, Any] | None
    actor: str | None


class Forgetting(TypedDict, total=False):
    """More sessions ``forget_where`` forgets (the memories' own always go), and who."""

    session_keys: Sequence[str]
    actor: str | None


class ExportPage(TypedDict):
    """The page ``export_page`` reads, and what each memory carries along."""

    cursor: str | None
    limit: int
    vectors: bool
    history: bool


class MemoryListing(TypedDict):
    """What ``list`` reads: the memories of ``scopes`` (or, given ``selection``, those it
    selects, as ``count_where`` does: ``scopes`` is then ignored) that ``flt`` selects, valid
    in ``window`` (absent or None: now, valid only); one page of them."""

    scopes: Sequence[Scope]
    selection: NotRequired[Selection | None]
    flt: MetadataFilter
    limit: int
    cursor: str | None
    window: NotRequired[TimeWindow | None]
    #: Count the matches only up to this many (absent or None: exactly).
    count_limit: NotRequired[int | None]


class MemoryStore(Protocol):
    """Persistence and search of memories, their history, embeddings and hierarchy."""

    def embedding_status(self) -> EmbeddingStatus:
        """The store's embedding model against the configured one (known once opened)."""
        ...

    async def reembed(
        self, item_text: ItemText, *, batch_size: int, on_progress: ReembedProgress | None
    ) -> dict[str, Any]:
        """Re-compute every vector of every tenant (memories, context items, the knowledge
        index) with the configured embedder, resumably, then record it as the store's model
        and drop the embedding cache of other models. A no-op when nothing is stale."""
        ...

    async def generate_embedding(
        self, tenant_id: str, texts: Sequence[str], *, cache: bool = True
    ) -> Vector:
        """Vectors for ``texts``, cached by content hash: the embedder sees each text once.

        ``cache=False`` (search queries) neither reads nor writes the persistent cache.
        """
        ...

    async def add(self, memory: NewMemory, *, actor: str | None = None) -> MemoryEntry: ...

    async def bulk_add(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]: ...

    async def get(self, tenant_id: str, memory_id: str) -> MemoryEntry | None: ...

    async def add_messages(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        """``bulk_add`` for conversation messages (``lamina.memory.messages``): each memory's
        metadata ``conversation`` names its conversation (``id``); its ``position`` is set
        here, in the insert's transaction, continuing that conversation of that tenant in
        the order given. Positions never repeat: concurrent calls get distinct ranges, and
        deleting memories frees none. Returns the entries with their positions."""
        ...

    async def unembedded(self, tenant_id: str, limit: int) -> list[tuple[str, str]]:
        """(id, content) of memories still waiting for their embedding, oldest first."""
        ...

    async def set_embeddings(self, tenant_id: str, items: Sequence[tuple[str, str, Vector]]) -> int:
        """Store (id, content, vector) embeddings of memories that still have none and whose
        content is still ``content`` (no history event: content does not change)."""
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

    async def search(self, request: LayerSearch) -> LayerHits: ...

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

    async def expired_tenants(self, at: datetime, limit: int) -> list[str]:
        """Tenants holding memories whose time to live ended by ``at`` (any tenant)."""
        ...

    async def purge_expired(
        self, tenant_id: str, at: datetime, limit: int, *, actor: str | None = None
    ) -> int:
        """Delete up to ``limit`` memories of the tenant expired by ``at``; how many."""
        ...

    async def history(self, tenant_id: str, memory_id: str) -> list[HistoryEvent]:
        """Oldest first. Once a memory is deleted its events keep what happened, when and by
        whom, never its content or metadata (they read None)."""
        ...

    async def set_parent(self, tenant_id: str, level: str, child_id: str, parent_id: str) -> None:
        """Register a hierarchy link; ``child_id`` ``*`` sets the tenant-wide default."""
        ...

    async def get_parent(self, tenant_id: str, level: str, child_id: str) -> str | None:
        """The registered parent, else the tenant default, else None."""
        ...

    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]: ...

    async def count_scopes(
        self,
        tenant_id: str,
        layer: MemoryLayer,
        selection: Selection,
        *,
        after: str | None,
        limit: int,
    ) -> list[tuple[str, int]]:
        """The scope keys of ``layer`` holding memories whose identifiers hold those of
        ``selection`` (its layers are not used), each with how many (every stored memory, as
        ``count_where`` counts): in key order, after ``after``, at most ``limit``."""
        ...

    async def list(self, tenant_id: str, **listing: Unpack[MemoryListing]) -> MemoryPage:
        """Newest first; ``window`` (None: now, valid only) as in LayerSearch; the total
        counted up to ``count_limit`` (None: exactly)."""
        ...


# -- searchable items ---------------------------------------------------------------------
#
# User knowledge, agent learnings, skill patterns and external references (context/) and the
# knowledge repository's search index (knowledge/index.py) live in one table: one row per
# version of an item, identified within its tenant and kind by a key (the knowledge key, the
# skill or reference name, the learning's trigger). Only the latest version of a key is
# listed and searched; older versions stay readable. Both domains share this port, so it
# sits here, below them.


class ItemKind(StrEnum):
    KNOWLEDGE = "knowledge"
    LEARNING = "learning"
    SKILL = "skill"
    REFERENCE = "reference"
    #: The knowledge repository's search index: one row per item, and its state row.
    DOCUMENT = "document"
    DOCUMENT_INDEX = "document_index"


@dataclass(frozen=True)
class ContextRecord:
    id: str
    tenant_id: str
    kind: ItemKind
    key: str
    version: int
    is_latest: bool
    category: str | None
    content: str
    data: dict[str, Any]
    tags: list[str]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class NewContextRecord:
    tenant_id: str
    kind: ItemKind
    key: str
    category: str | None
    content: str
    data: dict[str, Any]
    tags: list[str]
    embedding: Vector | None


@dataclass(frozen=True)
class ItemQuery:
    """A search of one kind of item. ``terms`` are analysed stems for the embedded store's
    BM25 index; ``text`` is the raw query for stores that analyse it themselves."""

    tenant_id: str
    kind: ItemKind
    text: str
    terms: tuple[str, ...]
    vector: Vector | None
    mode: SearchMode
    limit: int
    category: str | None = None
    tags: tuple[str, ...] = field(default=())
    semantic_weight: float = 0.7


# A change to one item's data (given its key and data), applied atomically to its latest
# version (counters, scores).
DataChange = Callable[[str, dict[str, Any]], dict[str, Any]]


class ItemListing(TypedDict):
    """The page ``list_items`` reads: filters (None, []: any) and cursor."""

    category: str | None
    tags: Sequence[str]
    limit: int
    cursor: str | None


class ContextItemStore(Protocol):
    async def put_item(self, item: NewContextRecord, *, versioned: bool) -> ContextRecord:
        """Save ``item`` under its key. ``versioned``: a new version becomes the latest and the
        older ones are kept; otherwise the latest version is replaced in place (its version
        number goes up by one). A new key starts at version 1."""
        ...

    async def get_item(
        self, tenant_id: str, kind: ItemKind, key: str, *, all_versions: bool = False
    ) -> list[ContextRecord]:
        """The latest version of ``key`` (or every version, newest first); [] if unknown.
        ``key`` may also be an item id."""
        ...

    async def list_items(
        self, tenant_id: str, kind: ItemKind, **listing: Unpack[ItemListing]
    ) -> tuple[list[ContextRecord], str | None, int]:
        """Latest versions, oldest first: (page, next cursor, total matching)."""
        ...

    async def delete_item(self, tenant_id: str, kind: ItemKind, key: str) -> int:
        """Delete every version of ``key`` (or of the item with that id); rows deleted."""
        ...

    async def modify_items(
        self, tenant_id: str, kind: ItemKind, keys: Sequence[str], change: DataChange
    ) -> list[ContextRecord]:
        """Apply ``change`` to the data of the latest version of each key, in one
        transaction; returns the records changed (unknown keys are skipped)."""
        ...

    async def search_items(self, query: ItemQuery) -> list[tuple[ContextRecord, float]]:
        """Best latest versions first, with scores in [0, 1] (hybrid: as memory search)."""
        ...
