"""LangChain over lamina (``pip install 'lamina[langchain]'``): a chat-message history kept
in a lamina session (observational memory observes it) and a retriever over lamina memory.

Messages map to session messages by role (human → user, ai → assistant, system, tool); an
AI message's tool calls and a tool message's call id are kept, so an agent's tool loop
comes back as it was.
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
)
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, PrivateAttr  # noqa: E402

from lamina.context.turns import from_records, to_records  # noqa: E402
from lamina.facade import Lamina  # noqa: E402
from lamina.integrations.bridge import Bridge, check_identifier_names  # noqa: E402
from lamina.llm.base import ChatMessage, ToolCall  # noqa: E402
from lamina.observational.base import check_session_key  # noqa: E402
from lamina.runtime import AsyncLamina  # noqa: E402

__all__ = ["LaminaChatMessageHistory", "LaminaRetriever"]


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


def _args(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {"input": arguments}
    return value if isinstance(value, dict) else {"input": value}


def to_langchain(message: ChatMessage) -> BaseMessage:
    if message.role == "assistant":
        calls = [
            {"name": c.name, "args": _args(c.arguments), "id": c.id, "type": "tool_call"}
            for c in message.tool_calls
        ]
        return AIMessage(content=message.content, tool_calls=calls)
    if message.role == "tool":
        return ToolMessage(content=message.content, tool_call_id=message.tool_call_id or "")
    if message.role == "system":
        return SystemMessage(content=message.content)
    return HumanMessage(content=message.content)


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
        else:
            found = await sessions.messages(self.session_id, tenant_id=tenant)
        return [to_langchain(m) for m in from_records(found)]

    async def _add(self, messages: Sequence[BaseMessage]) -> None:
        records = _records([to_chat(m) for m in messages])
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


def _records(chat: list[ChatMessage]) -> list[dict[str, Any]]:
    """Session records of ``chat`` in order, system messages included (to_records leaves
    them out: they are a caller's instruction there, part of the history here)."""
    out: list[dict[str, Any]] = []
    for n, m in enumerate(chat):
        if m.role == "system":
            if m.content.strip():
                out.append({"role": "system", "content": m.content, "tool_calls": []})
            continue
        out.extend(to_records([m], chat[:n]))
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
