"""The public shapes of memories, search hits, pages and history events."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lamina.memory.layers import MemoryLayer


class SearchMode(StrEnum):
    """semantic: cosine similarity in [-1, 1]; keyword: BM25 (≥ 0, unbounded);
    hybrid: a fused score in [0, 1] (see docs/search.md)."""

    SEMANTIC = "semantic"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


class MemoryEntry(BaseModel):
    """One stored memory, as returned by every call."""

    model_config = ConfigDict(frozen=True)

    id: str
    tenant_id: str
    layer: MemoryLayer
    identifiers: dict[str, str]
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    embedding_generated: bool
    embedding_model: str | None = None
    #: Policy violations that did not block this write (warn, info); set by add and update.
    violations: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def tags(self) -> list[str]:
        tags = self.metadata.get("tags", [])
        return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


class SearchHit(BaseModel):
    """A memory found by search. ``score`` is on the scale of the search mode."""

    model_config = ConfigDict(frozen=True)

    memory: MemoryEntry
    score: float
    semantic_score: float | None = None
    keyword_score: float | None = None


class AddedMessages(BaseModel):
    """What ``add_messages`` stored: one memory per message, in conversation order. Each
    memory's ``metadata["conversation"]`` holds ``id``, ``position``, ``speaker``, ``role``
    and ``timestamp``."""

    model_config = ConfigDict(frozen=True)

    conversation_id: str
    layer: MemoryLayer
    memories: list[MemoryEntry]


class MemoryPage(BaseModel):
    """One page of ``list``: pass ``next_cursor`` back to get the next one."""

    items: list[MemoryEntry]
    next_cursor: str | None
    total_count: int


class HistoryOperation(StrEnum):
    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"


class HistoryEvent(BaseModel):
    """One recorded change of a memory."""

    model_config = ConfigDict(frozen=True)

    memory_id: str
    operation: HistoryOperation
    at: datetime
    layer: MemoryLayer
    old_content: str | None
    new_content: str | None
    old_metadata: dict[str, Any] | None
    new_metadata: dict[str, Any] | None
    actor: str | None


class DeleteResult(BaseModel):
    """``success`` is true whether or not the memory existed (delete is idempotent)."""

    success: bool
    id: str
    existed: bool


class HierarchyLink(BaseModel):
    """A registered parent: a project's team, a team's org or an org's company."""

    level: str
    child_id: str
    parent_id: str
