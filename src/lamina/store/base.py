"""The store protocol: the one interface every memory store implements.

Stores speak in tenants, layers and scope keys; the memory service above them resolves
identifiers, validates input, retries and merges. ``tests/conformance`` runs one suite
against every implementation.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from lamina.store.context_base import ContextItemStore
    from lamina.store.session_base import SessionStore
    from lamina.store.thread_base import ThreadStore

import numpy as np
import numpy.typing as npt

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import MetadataFilter
from lamina.memory.layers import MemoryLayer
from lamina.memory.models import HistoryEvent, MemoryEntry, MemoryPage, SearchMode

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class StoreCapabilities:
    vector_search: bool
    keyword_search: bool
    embedding_dimensions: int
    distance_metrics: tuple[str, ...]
    bulk_operations: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "vector_search": self.vector_search,
            "keyword_search": self.keyword_search,
            "embedding_dimensions": self.embedding_dimensions,
            "distance_metrics": list(self.distance_metrics),
            "bulk_operations": self.bulk_operations,
        }


@dataclass(frozen=True)
class HealthStatus:
    healthy: bool
    details: dict[str, Any] = field(default_factory=dict)


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


@dataclass(frozen=True)
class LayerSearch:
    """A search within one scope. ``threshold`` applies to the mode's own score.

    ``text`` is the query as given; ``terms`` its keyword terms (lamina.text.analyze:
    Snowball stems without stop words); ``vector`` its embedding (None in keyword mode).
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


@dataclass(frozen=True)
class ScoredMemory:
    entry: MemoryEntry
    score: float
    semantic_score: float | None
    keyword_score: float | None
    vector: Vector | None


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


def encode_cursor(pk: int) -> str:
    """An opaque list cursor: the position (row sequence) after which the next page starts."""
    raw = json.dumps({"v": 1, "pk": pk}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        pk = data["pk"]
        if data.get("v") != 1 or not isinstance(pk, int) or pk < 0:
            raise ValueError
        return pk
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT, "invalid cursor: pass back a next_cursor from list"
        ) from None


class MemoryStore(Protocol):
    """Persistence and search of memories, their history, embeddings and hierarchy."""

    @property
    def context_items(self) -> ContextItemStore:
        """The searchable context layers' items, in the same database (context_base.py)."""
        ...

    @property
    def sessions(self) -> SessionStore:
        """Session messages and observational memory (session_base.py)."""
        ...

    @property
    def threads(self) -> ThreadStore:
        """A2A threads and tasks (thread_base.py)."""
        ...

    async def initialize(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def health_check(self) -> HealthStatus: ...

    def capabilities(self) -> StoreCapabilities: ...

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

    async def unembedded(self, tenant_id: str, limit: int) -> list[tuple[str, str]]:
        """(id, content) of memories still waiting for their embedding, oldest first."""
        ...

    async def set_embeddings(self, tenant_id: str, items: Sequence[tuple[str, str, Vector]]) -> int:
        """Store (id, content, vector) embeddings of memories that still have none and whose
        content is still ``content`` (no history event: content does not change)."""
        ...

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
        """MEMORY_NOT_FOUND when absent. A patch value of None removes that key."""
        ...

    async def delete(self, tenant_id: str, memory_id: str, *, actor: str | None = None) -> bool:
        """True when a memory was removed; absent ids are not an error."""
        ...

    async def bulk_delete(
        self, tenant_id: str, memory_ids: Sequence[str], *, actor: str | None = None
    ) -> int: ...

    async def search(self, request: LayerSearch) -> list[ScoredMemory]: ...

    async def history(self, tenant_id: str, memory_id: str) -> list[HistoryEvent]: ...

    async def set_parent(self, tenant_id: str, level: str, child_id: str, parent_id: str) -> None:
        """Register a hierarchy link; ``child_id`` ``*`` sets the tenant-wide default."""
        ...

    async def get_parent(self, tenant_id: str, level: str, child_id: str) -> str | None:
        """The registered parent, else the tenant default, else None."""
        ...

    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]: ...

    async def list(
        self,
        tenant_id: str,
        scopes: Sequence[Scope],
        flt: MetadataFilter,
        *,
        limit: int,
        cursor: str | None,
    ) -> MemoryPage: ...
