"""The public shapes of memories, search hits, pages and history events."""

from __future__ import annotations

import math
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from lamina.memory.layers import MemoryLayer
from lamina.shapes import Frozen


class SearchMode(StrEnum):
    """What a memory search weighs: meaning (semantic), words (keyword) or both (hybrid, the
    default). Scores lie in [0, 1] in every mode (docs/search.md)."""

    SEMANTIC = "semantic"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


class MemoryEntry(Frozen):
    """One stored memory, as returned by every call."""

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
    #: When the event it records happened: its ``timestamp`` (a message's time), else when
    #: it was created (docs/memory.md, "Time").
    event_at: datetime | None = None
    #: The interval the fact holds (None: unbounded); invalidating a fact sets valid_until.
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    #: When its time to live ends (None: never): expired memories are never returned.
    expires_at: datetime | None = None
    #: Policy violations that did not block this write (warn, info); set by add and update.
    violations: list[dict[str, Any]] = Field(default_factory=list)
    #: Set by add and bulk_add: this memory was already stored (an exact duplicate of the
    #: content given, in the same scope) and no new one was written.
    deduplicated: bool = False
    #: Set by ``add(..., infer=True)``: what consolidation did with each fact extracted.
    facts: list[FactOutcome] | None = None

    @property
    def tags(self) -> list[str]:
        tags = self.metadata.get("tags", [])
        return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


#: score = 1 - exp(-SCORE_RATE * raw) (lamina.memory.scoring).
SCORE_RATE = 2.5


def raw_score(
    w: float,
    semantic: float | None,
    keyword: float | None,
    speaker: float,
    conversation: float,
    phrase: float,
    date: float,
    stale: float = 0.0,
    question: float = 0.0,
) -> float:
    """The raw score of its parts (``ScoreParts.raw``; ranking computes it without models)."""
    return (
        w * (semantic or 0.0)
        + (1.0 - w) * (keyword or 0.0)
        + speaker
        + conversation
        + phrase
        + date
        + stale
        + question
    )


def score_of(raw: float) -> float:
    """The [0, 1] score of a raw score."""
    return 1.0 - math.exp(-SCORE_RATE * max(raw, 0.0))


class ScoreParts(Frozen):
    """What a search score is made of (lamina.memory.scoring, docs/search.md)::

        raw   = semantic_weight * semantic + (1 - semantic_weight) * keyword
                + speaker + conversation + phrase + date + stale + question
        score = 1 - exp(-2.5 * raw)

    ``semantic`` and ``keyword`` are 0 for no evidence and 1 for strong evidence (a good
    paraphrase; every query term present), a little more for identical text (None: the mode
    does not use that part); the boosts are 0 when they do not apply, and scaled down with
    the evidence (none without any); ``stale`` is 0 or negative: a superseded message's
    loss in a search about the present; ``question`` is 0 or negative: what a memory that
    asks (its sentences are questions) loses."""

    semantic: float | None = None
    keyword: float | None = None
    semantic_weight: float = 0.5
    speaker: float = 0.0
    conversation: float = 0.0
    phrase: float = 0.0
    date: float = 0.0
    stale: float = 0.0
    question: float = 0.0

    @property
    def raw(self) -> float:
        return raw_score(
            self.semantic_weight,
            self.semantic,
            self.keyword,
            self.speaker,
            self.conversation,
            self.phrase,
            self.date,
            self.stale,
            self.question,
        )

    @property
    def score(self) -> float:
        return score_of(self.raw)


class SearchHit(Frozen):
    """A memory found by search: ``score`` in [0, 1], rebuilt from ``parts`` as
    ``parts.score``; ``semantic_score`` and ``keyword_score`` repeat ``parts.semantic`` and
    ``parts.keyword``."""

    memory: MemoryEntry
    score: float
    semantic_score: float | None = None
    keyword_score: float | None = None
    parts: ScoreParts = Field(default_factory=ScoreParts)


class SearchResults(list[SearchHit]):
    """The hits of a search (a list), and ``below_threshold``: how many candidates the
    threshold removed (say so when the list is empty)."""

    below_threshold: int = 0

    def __init__(self, hits: list[SearchHit] | None = None, *, below_threshold: int = 0) -> None:
        super().__init__(hits or [])
        self.below_threshold = below_threshold


class FactEvent(StrEnum):
    """What consolidation did with a fact (docs/memory.md, "Consolidation")."""

    #: A new memory holds the fact.
    ADD = "add"
    #: A stored memory was rewritten to hold it (its old text stays in its history).
    UPDATE = "update"
    #: It contradicts stored memories: they were invalidated (valid_until set, kept for
    #: ``include_invalid``) and a new memory holds the fact.
    DELETE = "delete"
    #: The scope already holds it: nothing was written.
    NOOP = "noop"


class FactOutcome(Frozen):
    """One fact the chat model extracted, and what consolidation did with it."""

    fact: str
    event: FactEvent
    #: The memory that holds the fact now (ADD, UPDATE, DELETE; NOOP: the stored one that
    #: already said it, when the model named it).
    memory: MemoryEntry | None = None
    #: UPDATE: the memory's content before.
    previous_content: str | None = None
    #: DELETE: the memories the fact contradicts, now invalid.
    invalidated: list[MemoryEntry] = Field(default_factory=list)
    #: The ids of the message memories the fact was extracted from.
    sources: list[str] = Field(default_factory=list)


MemoryEntry.model_rebuild()


class AddedMessages(Frozen):
    """What ``add_messages`` stored: one memory per message, in conversation order. Each
    memory's ``metadata["conversation"]`` holds ``id``, ``position``, ``speaker``, ``role``
    and ``timestamp``. With ``infer=True``, ``facts`` says what consolidation did with each
    fact extracted (None: not inferred)."""

    conversation_id: str
    layer: MemoryLayer
    memories: list[MemoryEntry]
    facts: list[FactOutcome] | None = None


class MemoryPage(BaseModel):
    """One page of ``list``: pass ``next_cursor`` back to get the next one. ``total_count``
    memories match in all; with ``list(count_limit=n)`` counting stops at n, and
    ``total_exact`` is false when there are more."""

    items: list[MemoryEntry]
    next_cursor: str | None
    total_count: int
    total_exact: bool = True


class Owner(BaseModel):
    """Who holds memories in a layer: the identifiers of one scope (a user's ``user_id``, an
    agent's ``agent_id`` and ``user_id`` …) and how many memories it holds (every stored one,
    valid or not, as ``count_all`` counts)."""

    layer: MemoryLayer
    identifiers: dict[str, str]
    count: int


class OwnerPage(BaseModel):
    """One page of ``owners``, in identifier order: pass ``next_cursor`` back for the next."""

    items: list[Owner]
    next_cursor: str | None


class HistoryOperation(StrEnum):
    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"
    #: The fact stopped holding (valid_until set); the memory is kept.
    INVALIDATE = "invalidate"


class HistoryEvent(Frozen):
    """One recorded change of a memory."""

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


class ImportReport(BaseModel):
    """What ``import_`` did: ``records`` read, ``imported`` stored, ``skipped`` because the
    tenant already had their ids (a re-import), ``embedded`` of those stored whose record
    carried no vector of the configured model (so their content was embedded)."""

    records: int
    imported: int
    skipped: int
    embedded: int


class ForgetResult(BaseModel):
    """What ``forget`` deleted: ``memories`` (as ``delete_all`` counts them), the keys of the
    ``sessions`` whose observational memory went with them, and the rows of those sessions
    per kind: ``session_messages``, ``observations``, ``reflections`` and
    ``graph_relations`` (graph entities no relation uses any more go too)."""

    memories: int
    sessions: list[str]
    session_messages: int
    observations: int
    reflections: int
    graph_relations: int


class HierarchyLink(BaseModel):
    """A registered parent: a project's team, a team's org or an org's company."""

    level: str
    child_id: str
    parent_id: str
