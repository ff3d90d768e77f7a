"""The store contract for the searchable context layers, shared by every store.

User knowledge, agent learnings, skill patterns and external references live in one table:
one row per version of an item, identified within its tenant and kind by a key (the knowledge
key, the skill or reference name, the learning's trigger). Only the latest version of a key
is listed and searched; older versions stay readable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from lamina.memory.models import SearchMode
from lamina.store.base import Vector


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
        self,
        tenant_id: str,
        kind: ItemKind,
        *,
        category: str | None,
        tags: Sequence[str],
        limit: int,
        cursor: str | None,
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
