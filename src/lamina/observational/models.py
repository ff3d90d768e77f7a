"""The public shapes of session messages, observations and reflections: the session store
returns them as they are (lamina.observational.ports)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from lamina.shapes import Frozen


class SessionMessage(Frozen):
    session_key: str
    index: int
    role: str
    content: str
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    token_count: int
    created_at: datetime


class Note(Frozen):
    """An observation (generation 0) or a reflection (generation 1, 2, ...)."""

    id: str
    session_key: str
    content: str
    token_count: int
    generation: int
    source_start: int
    source_end: int
    created_at: datetime


class SessionView(Frozen):
    session_key: str
    messages: list[SessionMessage]
    observations: list[Note]
    reflections: list[Note]
    observed_through: int
    unobserved_tokens: int
    #: The whole session's message count and tokens, and how many messages wait for the
    #: observer (``messages`` may be one page of them: ``show(start=, limit=)``).
    message_count: int = 0
    message_tokens: int = 0
    unobserved_count: int = 0
    #: The base system prompt the context-aware model keeps for the session (None: none).
    system_prompt: str | None = None
