"""The records the memory ports speak in: scopes, new and stored memories, selections,
searches and their hits, a consolidation's changes, the embedding status, and the arguments
of the longer calls."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, NotRequired, TypedDict

from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import MetadataFilter
from lamina.memory.items import ContextRecord
from lamina.memory.layers import MemoryLayer
from lamina.memory.models import (
    HistoryEvent,
    MemoryEntry,
    ScoreParts,
    SearchMode,
)
from lamina.memory.scoring import QuerySignals
from lamina.memory.timing import Lifetime, TimeWindow

__all__ = [
    "Consolidated",
    "Consolidation",
    "EmbeddingStatus",
    "ExportPage",
    "Forgetting",
    "ImportWriter",
    "Invalidation",
    "ItemText",
    "LayerHits",
    "LayerSearch",
    "MemoryChange",
    "MemoryListing",
    "NewMemory",
    "ReembedProgress",
    "Revision",
    "Scope",
    "ScopeCount",
    "ScoredMemory",
    "Selection",
    "StoredMemory",
    "updated_entry",
]


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
class ScopeCount:
    """What ``count_scopes`` counts: the scope keys of ``layer`` holding memories whose
    identifiers hold every one of ``identifiers`` with the same value (empty: any), in key
    order, after ``after`` (None: from the first), at most ``limit``."""

    tenant_id: str
    layer: MemoryLayer
    limit: int
    identifiers: dict[str, str] = field(default_factory=dict)
    after: str | None = None


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
    """New content for a stored memory (consolidation's UPDATE; None: kept, as when only
    ``metadata_patch`` marks a superseded message). ``seen``: its updated_at when it was
    read; a memory changed since makes the whole write a CONFLICT. ``event_at``: the time
    of the evidence it now comes from (None: kept)."""

    memory_id: str
    seen: datetime
    content: str | None
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
ItemText = Callable[[ContextRecord], str]


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
