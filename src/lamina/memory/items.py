"""Searchable items: the records both the context layers and the knowledge index store, and
the port of a few methods they share.

User knowledge, agent learnings, skill patterns and external references (context/) and the
knowledge repository's search index (knowledge/index.py) live in one table: one row per
version of an item, identified within its tenant and kind by a key (the knowledge key, the
skill or reference name, the learning's trigger). Only the latest version of a key is
listed and searched; older versions stay readable. Both domains share these records and
``ItemStore`` and ``ItemAccess`` (the store with what a search of it needs), so they sit
here, below them; what only the context layers need (changing an item's data in place) is
``lamina.context.ports.ContextItemStore``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, Protocol, TypedDict, TypeVar, Unpack

from lamina.embeddings.base import Vector
from lamina.embeddings.query_cache import QueryVectors
from lamina.memory.models import SearchMode
from lamina.retry import RetryPolicy
from lamina.text import analyze


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


class ItemListing(TypedDict):
    """The page ``list_items`` reads: filters (None, []: any) and cursor."""

    category: str | None
    tags: Sequence[str]
    limit: int
    cursor: str | None


class ItemStore(Protocol):
    """Save, read, list, delete and search one tenant's items of a kind: the port the
    knowledge index needs (lamina.knowledge.index), and the base of the context layers'
    (lamina.context.ports.ContextItemStore)."""

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

    async def search_items(self, query: ItemQuery) -> list[tuple[ContextRecord, float]]:
        """Best latest versions first, with scores in [0, 1] (hybrid: as memory search)."""
        ...


S = TypeVar("S", bound=ItemStore, covariant=True)


@dataclass(frozen=True)
class ItemAccess(Generic[S]):
    """A store of items and what reaching it takes, shared by the context layers and the
    knowledge index: ``embed`` embeds item text (through the persistent cache), ``queries``
    embeds search queries, ``retry`` retries the store's and the embedder's transient
    failures, ``semantic_weight`` weighs the semantic part of hybrid scores."""

    store: S
    embed: Callable[[str, Sequence[str]], Awaitable[Vector]]
    queries: QueryVectors
    retry: RetryPolicy
    semantic_weight: float

    async def search(
        self,
        operation: str,
        tenant: str,
        kind: ItemKind,
        text: str,
        *,
        mode: SearchMode,
        limit: int,
        category: str | None = None,
        tags: tuple[str, ...] = (),
        vector: Vector | None = None,
    ) -> list[tuple[ContextRecord, float]]:
        """The latest items of ``kind`` best matching ``text`` (retried as ``operation``): a
        keyword search of a text without terms finds nothing; the query's vector is embedded
        unless given or the search is by keyword."""
        terms = tuple(analyze(text))
        if mode is SearchMode.KEYWORD and not terms:
            return []
        if vector is None and mode is not SearchMode.KEYWORD:
            vector = await self.queries.get(tenant, text)
        query = ItemQuery(
            tenant, kind, text, terms, vector, mode, limit, category, tags, self.semantic_weight
        )
        return await self.retry.run(operation, lambda: self.store.search_items(query))
