"""The public shapes of session messages, observations and reflections."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lamina.store.session_base import StoredMessage, StoredNote


class SessionMessage(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_key: str
    index: int
    role: str
    content: str
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    token_count: int
    created_at: datetime

    @classmethod
    def of(cls, m: StoredMessage) -> SessionMessage:
        return cls(
            session_key=m.session_key,
            index=m.index,
            role=m.role,
            content=m.content,
            tool_calls=m.tool_calls,
            token_count=m.token_count,
            created_at=m.created_at,
        )


class Note(BaseModel):
    """An observation (generation 0) or a reflection (generation 1, 2, ...)."""

    model_config = ConfigDict(frozen=True)

    id: str
    session_key: str
    content: str
    token_count: int
    generation: int
    source_start: int
    source_end: int
    created_at: datetime

    @classmethod
    def of(cls, n: StoredNote) -> Note:
        return cls(
            id=n.id,
            session_key=n.session_key,
            content=n.content,
            token_count=n.token_count,
            generation=n.generation,
            source_start=n.source_start,
            source_end=n.source_end,
            created_at=n.created_at,
        )


class SessionView(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_key: str
    messages: list[SessionMessage]
    observations: list[Note]
    reflections: list[Note]
    observed_through: int
    unobserved_tokens: int
