"""The arguments of the memory skill's tools (memory.py); strict, as every tool's (args.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from lamina.config import IdentifierFields
from lamina.server.tools.args import Args, IdArgs

_TTL = "Seconds the memory lives (session layer default: memory.session_ttl)."
_INFER = (
    "Also let the chat model extract facts and add, update or invalidate memories of the "
    "scope (the text is stored verbatim either way; the result says what it did per fact)."
)


class MemoryAdd(IdArgs):
    content: str = Field(description="What to remember.")
    layer: str = Field(description="agent, user, session, project, team, org or company.")
    metadata: dict[str, Any] | None = None
    timestamp: str | None = Field(
        default=None, description="When the event happened (ISO-8601); default: now."
    )
    valid_from: str | None = Field(default=None, description="The fact holds from (ISO-8601).")
    valid_until: str | None = Field(default=None, description="The fact holds until (ISO-8601).")
    ttl: float | None = Field(default=None, gt=0, description=_TTL)
    dedup: bool | None = Field(
        default=None,
        description="Return an exact duplicate already stored instead of a new memory "
        "(default: the memory.dedup setting, on).",
    )
    infer: bool = Field(default=False, description=_INFER)


class ChatMessage(Args):
    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(description="Stored verbatim.")
    name: str | None = Field(default=None, description="The speaker (default: the role).")
    timestamp: str | None = Field(
        default=None, description="ISO-8601; without a zone it is UTC; default: now."
    )
    metadata: dict[str, Any] | None = None


class MemoryAddMessages(IdArgs):
    messages: list[ChatMessage] = Field(
        description="The conversation's messages in order: each becomes one memory."
    )
    layer: str | None = Field(
        default=None, description="Default: the most specific layer the identifiers reach."
    )
    conversation_id: str | None = Field(
        default=None, description="Continue this conversation; default: a new one (returned)."
    )
    metadata: dict[str, Any] | None = None
    ttl: float | None = Field(default=None, gt=0, description=_TTL)
    infer: bool = Field(default=False, description=_INFER)


class _Window(Args):
    include_invalid: bool = Field(
        default=False, description="Also facts no longer valid (invalidated)."
    )
    since: str | None = Field(default=None, description="Only events at or after (ISO-8601).")
    until: str | None = Field(default=None, description="Only events before (ISO-8601).")

    def window(self) -> dict[str, Any]:
        return self.pick(*_Window.model_fields)


class MemorySearch(IdArgs, _Window):
    query: str
    layers: list[str] | None = None
    mode: Literal["semantic", "keyword", "hybrid"] = "hybrid"
    limit: int | None = Field(default=None, ge=1)
    threshold: float | None = Field(
        default=None, description="Minimum score in [0, 1]; default 0.7 (docs/search.md)."
    )
    tags: list[str] | None = None
    filters: dict[str, Any] | None = None


class MemoryId(Args):
    memory_id: str


class MemoryInvalidate(Args):
    memory_ids: list[str] = Field(min_length=1, description="The facts that stopped holding.")
    at: str | None = Field(default=None, description="Since when (ISO-8601); default: now.")


class MemoryUpdate(Args):
    memory_id: str
    content: str | None = None
    metadata: dict[str, Any] | None = None


class MemoryList(IdArgs, _Window):
    layers: list[str] | None = None
    tags: list[str] | None = None
    filters: dict[str, Any] | None = None
    limit: int | None = Field(default=None, ge=1)
    cursor: str | None = None


class MemoryDeleteAll(Args, IdentifierFields):
    layers: list[str] | None = Field(
        default=None, description="Only these layers; default: every layer."
    )
    include_sessions: bool = Field(
        default=False,
        description="Also delete the observational memory (messages, observations, "
        "reflections, graph relations) of session_id and of the sessions the deleted "
        "memories name; the result counts each kind.",
    )
