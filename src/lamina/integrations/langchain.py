"""LangChain over lamina (``pip install 'lamina[langchain]'``): a chat-message history kept
in a lamina session (observational memory observes it) and a retriever over lamina memory.

Messages map to session messages by role (human → user, ai → assistant, system, tool); an
AI message's tool calls and a tool message's call id are kept, so an agent's tool loop
comes back as it was. The rest of a message (name, id, additional_kwargs,
response_metadata, content parts, its class) is kept beside it: messages come back equal to
those added, as from LangChain's InMemoryChatMessageHistory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lamina.extras import require

require("langchain")

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
)
from langchain_core.messages import ChatMessage as LCChatMessage  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, PrivateAttr  # noqa: E402

from lamina.checks import invalid  # noqa: E402
from lamina.context.turns import SessionRecord  # noqa: E402
from lamina.facade import Lamina  # noqa: E402
from lamina.integrations.bridge import (  # noqa: E402
    Bridge,
    check_identifier_names,
    check_kept,
)
from lamina.llm.base import ChatMessage, ToolCall  # noqa: E402
from lamina.observational.base import check_session_key  # noqa: E402
from lamina.runtime import AsyncLamina  # noqa: E402

__all__ = ["LaminaChatMessageHistory", "LaminaRetriever"]


#: The tool-call name of a message's fields the session message alone would not give back.
KEPT = "langchain.message"
_ROLES = {"ai": "assistant", "tool": "tool", "system": "system"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in parts)


def to_chat(message: BaseMessage) -> ChatMessage:
    """A LangChain message as a chat message (lamina's)."""
    text = _text(message.content)
    if isinstance(message, AIMessage):
        calls = tuple(
            ToolCall(str(c.get("id") or ""), c["name"], json.dumps(c.get("args", {})))
            for c in message.tool_calls
        )
        return ChatMessage("assistant", text, calls)
    if isinstance(message, ToolMessage):
        return ChatMessage("tool", text, tool_call_id=message.tool_call_id)
    if isinstance(message, SystemMessage):
        return ChatMessage("system", text)
    return ChatMessage("user", text)


def _args(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments)
    except (TypeError, json.JSONDecodeError):
        return {"input": arguments}
    return value if isinstance(value, dict) else {"input": value}


def _plain(role: str, content: str, calls: Sequence[Mapping[str, Any]]) -> BaseMessage:
    """The LangChain message a session message is, before its kept fields. Calls without an
    id (appended through another door, with input and output) are written into the text."""
    live = [c for c in calls if c.get("id") and not c.get("kept")]
    content += "".join(
        f"\n[tool:{c.get('name', '?')}] {c.get('input')} -> {c.get('output')}"
        for c in calls
        if not c.get("id") and not c.get("kept")
    )
    if role == "assistant":
        tool_calls = [
            {"name": str(c["name"]), "args": _args(c.get("input")), "id": c["id"]} for c in live
        ]
        return AIMessage(content=content, tool_calls=tool_calls)
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=str(live[0]["id"]) if live else "")
    if role == "system":
        return SystemMessage(content=content)
    return HumanMessage(content=content)


def _json(data: dict[str, Any]) -> dict[str, Any]:
    try:
        value: dict[str, Any] = json.loads(json.dumps(data))
    except (TypeError, ValueError) as exc:
        raise invalid(f"a message's fields must be JSON values: {exc}", "messages") from None
    return value


def to_record(message: BaseMessage, names: Mapping[str, str]) -> dict[str, Any]:
    """One LangChain message as one session message: its role, its text (what observational
    memory reads), its tool calls, and the fields the rest would not give back (name, id,
    additional_kwargs, response_metadata, content parts, ...) in a ``kept`` call. ``names``:
    the tool names of the calls a tool message may answer."""
    if not isinstance(message, BaseMessage):
        raise invalid(
            f"a message must be a LangChain BaseMessage, got {type(message).__name__}",
            "messages",
        )
    role = _ROLES.get(message.type.removesuffix("MessageChunk").lower(), "user")
    if isinstance(message, LCChatMessage) and message.role in ("assistant", "system"):
        role = message.role
    text = _text(message.content)
    calls: list[dict[str, Any]] = []
    if isinstance(message, AIMessage):
        calls = [
            {
                "name": c["name"],
                "input": c.get("args", {}),
                **({"id": c["id"]} if c.get("id") else {}),
            }
            for c in message.tool_calls
        ]
    elif isinstance(message, ToolMessage) and message.tool_call_id:
        calls = [{"id": message.tool_call_id, "name": names.get(message.tool_call_id, "tool")}]
    data = _json(message.model_dump())
    plain = _json(_fields(_plain(role, text, calls), data["type"]))
    kept = {k: v for k, v in data.items() if k not in plain or plain[k] != v}
    if not kept and not text.strip() and not calls:
        kept = {"type": data["type"]}  # nothing said, but the message is the caller's
    if kept:
        calls.append({"name": KEPT, "input": kept, "kept": True})
    return {"role": role, "content": text, "tool_calls": calls}


def from_record(message: SessionRecord) -> BaseMessage:
    """One session message as the LangChain message it was added as."""
    plain = _plain(message.role, message.content, message.tool_calls)
    kept = next((c["input"] for c in message.tool_calls if c.get("name") == KEPT), None)
    if not isinstance(kept, dict):
        return plain
    data = {**_fields(plain, str(kept.get("type", plain.type))), **kept}
    return messages_from_dict([{"type": data["type"], "data": data}])[0]


def _fields(plain: BaseMessage, kind: str) -> dict[str, Any]:
    """The fields of ``plain`` a message of type ``kind`` takes from it: all of them when it
    is of that type, else those every message has (content, name, id, ...)."""
    data = plain.model_dump()
    if kind == plain.type:
        return data
    return {k: v for k, v in data.items() if k in BaseMessage.model_fields}


class LaminaChatMessageHistory(BaseChatMessageHistory):
    """``RunnableWithMessageHistory(chain, lambda sid: LaminaChatMessageHistory(sid, ms))``.
    System messages are kept too (LangChain's history holds whatever it is given)."""

    def __init__(
        self,
        session_id: str,
        lamina: Lamina | AsyncLamina,
        *,
        tenant_id: str | None = None,
        recent_only: bool = False,
    ) -> None:
        """``recent_only``: only the un-observed messages within max_message_token_budget
        (the rest lives on as observations and reflections)."""
        self.session_id = check_session_key(session_id)
        self._bridge = Bridge(lamina, tenant_id=tenant_id)
        self._recent = recent_only

    async def _read(self) -> list[BaseMessage]:
        sessions, tenant = self._bridge.ms.sessions, self._bridge.tenant_id
        if self._recent:
            found = await sessions.recent_messages(self.session_id, tenant_id=tenant)
            return _well_formed([from_record(m) for m in found])
        found = await sessions.messages(self.session_id, tenant_id=tenant)
        return [from_record(m) for m in found]

    async def _add(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in one transaction: all of them or, on an error, none."""
        if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
            raise invalid("messages must be a list of LangChain messages", "messages")
        names: dict[str, str] = {}
        records = []
        for m in messages:
            if isinstance(m, AIMessage):
                names.update((str(c["id"]), c["name"]) for c in m.tool_calls if c.get("id"))
            records.append(to_record(m, names))
        check_kept(records, self._bridge.ms.settings.memory.max_content_length)
        if records:
            await self._bridge.ms.sessions.append_many(
                self.session_id, records, tenant_id=self._bridge.tenant_id
            )

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return self._bridge.run(self._read())

    async def aget_messages(self) -> list[BaseMessage]:
        return await self._bridge.call(self._read())

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self._bridge.run(self._add(messages))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await self._bridge.call(self._add(messages))

    async def _clear(self) -> None:
        await self._bridge.ms.sessions.delete_messages(
            self.session_id, tenant_id=self._bridge.tenant_id
        )

    def clear(self) -> None:
        """Delete the conversation, its observations and its reflections."""
        self._bridge.run(self._clear())

    async def aclear(self) -> None:
        await self._bridge.call(self._clear())


def _well_formed(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Leave out tool messages whose call is not in the list (cut off by the budget): chat
    APIs refuse a result without its call."""
    seen: set[str] = set()
    out = []
    for m in messages:
        if isinstance(m, ToolMessage) and m.tool_call_id not in seen:
            continue
        if isinstance(m, AIMessage):
            seen.update(str(c["id"]) for c in m.tool_calls if c.get("id"))
        out.append(m)
    return out


class LaminaRetriever(BaseRetriever):
    """Documents from a lamina memory search across the layers the identifiers reach:
    ``LaminaRetriever(lamina=ms, identifiers={"user_id": "alice"})``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    lamina: Any
    identifiers: dict[str, str]
    k: int = 5
    threshold: float | None = None
    filters: dict[str, Any] | None = None
    tenant_id: str | None = None
    _bridge: Bridge = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        check_identifier_names(self.identifiers)
        self._bridge = Bridge(self.lamina, tenant_id=self.tenant_id)

    async def _search(self, query: str) -> list[Document]:
        ids: Mapping[str, Any] = self.identifiers
        hits = await self._bridge.ms.memory.search(
            query,
            limit=self.k,
            threshold=self.threshold,
            filters=self.filters,
            tenant_id=self.tenant_id,
            **ids,
        )
        return [
            Document(
                page_content=h.memory.content,
                id=h.memory.id,
                metadata={
                    **h.memory.metadata,
                    "id": h.memory.id,
                    "layer": h.memory.layer.value,
                    "score": h.score,
                    "created_at": h.memory.created_at.isoformat(),
                },
            )
            for h in hits
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._bridge.run(self._search(query))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return await self._bridge.call(self._search(query))
