"""The ChatModel protocol: one call, messages in, a reply out (text and tool calls), or the
reply as a stream of chunks. One file per provider.

Enough of a chat API to wrap a real agent loop: the request carries the tools the model may
call (``tools``), assistant messages carry the calls they made (``tool_calls``) and ``tool``
messages the result of one call (``tool_call_id``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: its name, what it does, its JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for; ``arguments`` is the JSON text of its arguments."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str
    #: On an assistant message: the tool calls it made.
    tool_calls: tuple[ToolCall, ...] = ()
    #: On a tool message: the call it answers.
    tool_call_id: str | None = None


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
    #: Tools the model may call, and whether it must ("auto", "required", "none" or a name).
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str | None = None

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
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ChatChunk:
    """A piece of a streamed reply: text as it comes, then one last chunk with
    ``done=True`` carrying the whole reply (text and tool calls)."""

    delta: str = ""
    done: bool = False
    response: ChatResponse | None = None


@runtime_checkable
class ChatModel(Protocol):
    """A chat model. ``generate`` retries its own transient failures as the model sees fit
    (the ones lamina builds: ``llm.max_retries``); its callers do not retry them again."""

    model_id: str

    async def generate(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A chat model that can stream its reply."""

    def stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]: ...


async def stream_of(model: ChatModel, request: ChatRequest) -> AsyncIterator[ChatChunk]:
    """``model``'s stream when it has one; else its whole reply as one chunk."""
    if isinstance(model, StreamingChatModel):
        async for chunk in model.stream(request):
            yield chunk
        return
    reply = await model.generate(request)
    if reply.content:
        yield ChatChunk(delta=reply.content)
    yield ChatChunk(done=True, response=reply)


def request(
    *messages: tuple[Role, str] | ChatMessage, system: str = "", **options: Any
) -> ChatRequest:
    """A ChatRequest from (role, content) pairs: ``request(("user", "hi"), system="...")``."""
    parsed = tuple(m if isinstance(m, ChatMessage) else ChatMessage(m[0], m[1]) for m in messages)
    return ChatRequest(parsed, system, **options)
