"""The ChatModel protocol: one call, messages in, text out. One file per provider."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True)
class ChatRequest:
    """``system`` is the system instruction (the context-aware model augments it)."""

    messages: tuple[ChatMessage, ...]
    system: str = ""
    max_tokens: int | None = None
    temperature: float | None = None
    #: Ask for a JSON object back (providers that support it enforce it).
    json_output: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    def latest_user_message(self) -> str:
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        return ""


@dataclass(frozen=True)
class ChatResponse:
    content: str
    model: str
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


@runtime_checkable
class ChatModel(Protocol):
    model_id: str

    async def generate(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...


def request(
    *messages: tuple[Role, str] | ChatMessage, system: str = "", **options: Any
) -> ChatRequest:
    """A ChatRequest from (role, content) pairs: ``request(("user", "hi"), system="...")``."""
    parsed = tuple(m if isinstance(m, ChatMessage) else ChatMessage(m[0], m[1]) for m in messages)
    return ChatRequest(parsed, system, **options)
