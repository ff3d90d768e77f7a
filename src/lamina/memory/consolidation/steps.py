"""The records consolidation carries from the model's answers to the write: each fact
extracted (``Extracted``) and what its decision writes (``Step``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from lamina.embeddings.base import Vector
from lamina.memory.consolidation.answers import Decision
from lamina.memory.models import MemoryEntry
from lamina.memory.ports import ScoredMemory


@dataclass
class Extracted:
    """A fact of one conversation (plan), its source messages, event time and vector."""

    plan: int
    text: str
    sources: list[str]
    event_at: datetime
    vector: Vector | None = None
    candidates: list[ScoredMemory] = field(default_factory=list)


@dataclass
class Step:
    """What one fact's decision writes, and where its results land."""

    fact: Extracted
    decision: Decision
    added: int | None = None
    revised: int | None = None
    invalidated: list[int] = field(default_factory=list)
    previous: str | None = None
    noop: MemoryEntry | None = None
