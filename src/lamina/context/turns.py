"""A turn of a conversation between the chat API and a session's record.

The context-aware model keeps a session's history for its caller: the new messages of a
turn go into the session as records (``to_records``), the session's recent, not yet
observed messages come back as chat messages (``from_records``), and the whole is cut to a
token budget, newest kept (``within_budget``). Tool calls keep their ids both ways, so a
real agent loop (call → tool result → call) can run over the session.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from lamina.context.keywords import extract_keywords
from lamina.llm.base import ChatMessage, ChatResponse, ToolCall
from lamina.tokens import TokenCounter


class SessionRecord(Protocol):
    """A stored session message, as the session log returns it."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def tool_calls(self) -> list[dict[str, Any]]: ...


class SessionLog(Protocol):
    """Where a session's messages and its base system prompt are kept (observational memory
    provides it)."""

    async def append_many(
        self, session_key: str, messages: Sequence[Mapping[str, Any]], *, tenant_id: str | None
    ) -> Sequence[Any]: ...

    async def recent_messages(
        self, session_key: str, *, tenant_id: str | None
    ) -> Sequence[SessionRecord]: ...

    async def system_prompt(self, session_key: str, *, tenant_id: str | None) -> str | None: ...

    async def set_system_prompt(
        self, session_key: str, prompt: str | None, *, tenant_id: str | None
    ) -> None: ...


def _input(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def to_records(
    messages: Sequence[ChatMessage], earlier: Sequence[ChatMessage] = ()
) -> list[dict[str, Any]]:
    """Chat messages as session records (system messages are the caller's instruction, not
    part of the conversation). A tool message records the call it answers, named from the
    assistant message (in ``earlier`` or ``messages``) that made it."""
    names = {c.id: c.name for m in [*earlier, *messages] for c in m.tool_calls}
    records: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        calls: list[dict[str, Any]] = [
            {"id": c.id, "name": c.name, "input": _input(c.arguments)} for c in m.tool_calls
        ]
        if m.role == "tool":
            call_id = m.tool_call_id or ""
            calls = [{"id": call_id, "name": names.get(call_id, "tool")}]
        if not m.content.strip() and not calls:
            continue
        records.append({"role": m.role, "content": m.content, "tool_calls": calls})
    return records


def reply_record(reply: ChatResponse) -> dict[str, Any] | None:
    """The model's reply as a session record; None when it said nothing."""
    if not reply.content.strip() and not reply.tool_calls:
        return None
    return to_records([ChatMessage("assistant", reply.content, reply.tool_calls)])[0]


def from_records(records: Sequence[SessionRecord]) -> list[ChatMessage]:
    """Session records as chat messages. Tool calls stored with an id come back as calls
    (and their results as tool messages); calls recorded without one (appended by hand,
    with input and output) are written into the message text instead. Kept calls (a
    framework adapter's copy of a message) are left out, and a message with nothing else."""
    out: list[ChatMessage] = []
    for r in records:
        # A kept call is a framework adapter's copy of the message, not part of what was said.
        calls = [c for c in r.tool_calls or [] if not c.get("kept")]
        if not r.content.strip() and not calls:
            continue
        if r.role == "tool":
            call_id = next((str(c["id"]) for c in calls if c.get("id")), None)
            if call_id is not None:
                out.append(ChatMessage("tool", r.content, tool_call_id=call_id))
            else:
                out.append(ChatMessage("user", f"[tool result] {r.content}"))
            continue
        live = tuple(
            ToolCall(str(c["id"]), str(c.get("name", "")), _arguments(c.get("input") or {}))
            for c in calls
            if c.get("id")
        )
        text = r.content + "".join(
            f"\n[tool:{c.get('name', '?')}] {c.get('input')} -> {c.get('output')}"
            for c in calls
            if not c.get("id")
        )
        role = r.role if r.role in ("system", "user", "assistant") else "user"
        out.append(ChatMessage(role, text, live))  # type: ignore[arg-type]
    return well_formed(out)


def well_formed(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Leave out tool results whose call is not in the list (cut off by a budget): chat
    APIs refuse a result without its call."""
    seen: set[str] = set()
    out = []
    for m in messages:
        if m.role == "tool" and m.tool_call_id not in seen:
            continue
        seen.update(c.id for c in m.tool_calls)
        out.append(m)
    return out


def _text_of(message: ChatMessage) -> str:
    return message.content + "".join(f"\n{c.name} {c.arguments}" for c in message.tool_calls)


def message_tokens(messages: Sequence[ChatMessage], counter: TokenCounter) -> list[int]:
    """Each message's tokens with the per-message overhead, counted in one batch when the
    counter can (the exact counter counts many texts at once, in parallel)."""
    texts = [_text_of(m) for m in messages]
    many = getattr(counter, "count_many", None)
    counts: list[int] = many(texts) if many is not None else [counter.count(t) for t in texts]
    return [n + counter.per_message for n in counts]


def within_budget(
    messages: Sequence[ChatMessage], budget: int, counter: TokenCounter
) -> list[ChatMessage]:
    """The newest messages whose tokens fit ``budget``; the last message always stays."""
    costs = message_tokens(messages, counter)
    kept: list[ChatMessage] = []
    left = budget
    for n, (m, cost) in enumerate(zip(reversed(messages), reversed(costs), strict=True)):
        if n > 0 and cost > left:
            break
        kept.append(m)
        left -= cost
    return well_formed(list(reversed(kept)))


def topic_query(messages: Sequence[ChatMessage]) -> str:
    """The latest user message; when it has no keywords ("why?", "and then?"), the latest
    earlier user message that has (the topic the follow-up is about)."""
    users = [m.content for m in messages if m.role == "user" and m.content.strip()]
    if not users:
        return ""
    for text in reversed(users):
        if extract_keywords(text):
            return text
    return users[-1]
