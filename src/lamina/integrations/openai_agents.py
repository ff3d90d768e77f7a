"""The OpenAI Agents SDK over lamina (``pip install 'lamina[openai-agents]'``): a ``Session``
that keeps the run's items in a lamina session (so observational memory observes them),
instructions that bring the session's memory and context into every turn, and the memory
tools ``remember`` and ``recall``.

Items and session messages: a message item is a message of its role (its text joined); a
``function_call`` an assistant message carrying the call (id, name, arguments); a
``function_call_output`` a ``tool`` message answering that call; any other item (reasoning,
hosted tool calls) an assistant message. An item the message alone would not give back as it
was (ids, statuses, content parts, reasoning) is kept whole beside it, so items come back
equal to those added, as the SDK's own SQLiteSession gives them (JSON).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from lamina.extras import require

require("openai-agents")

from agents import FunctionTool  # noqa: E402
from agents.memory import SessionSettings  # noqa: E402

from lamina.checks import invalid  # noqa: E402
from lamina.context.providers import session_scope  # noqa: E402
from lamina.context.turns import from_records, topic_query  # noqa: E402
from lamina.facade import Lamina  # noqa: E402
from lamina.integrations.bridge import Bridge, check_kept  # noqa: E402
from lamina.integrations.tools import memory_tools as _memory_tools  # noqa: E402
from lamina.observational.base import check_session_key  # noqa: E402
from lamina.observational.models import SessionMessage  # noqa: E402
from lamina.runtime import AsyncLamina  # noqa: E402

__all__ = ["LaminaSession", "memory_instructions", "memory_tools"]

#: The tool-call name that keeps an item the session has no message shape for.
RAW = "openai_agents.item"
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _text(content: Any) -> str:
    """A message's text: the string, or the text of its parts joined (pictures and files
    have none; a refusal's is what it says)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [p for p in content if isinstance(p, Mapping)]
    return "".join(str(p.get("text", p.get("refusal", ""))) for p in parts)


def _json(item: Mapping[str, Any]) -> dict[str, Any]:
    """``item`` as the JSON object it is stored as (the SDK's own sessions store JSON too)."""
    try:
        value = json.loads(json.dumps(item))
    except (TypeError, ValueError) as exc:
        raise invalid(f"a session item must be a JSON object: {exc}", "items") from None
    if not isinstance(value, dict):
        raise invalid("a session item must be a JSON object", "items")
    return value


def _plain(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """The session message ``item`` reads as; None when it has no message shape."""
    kind = item.get("type")
    if kind == "function_call" and isinstance(item.get("call_id"), str) and item["call_id"]:
        call = {
            "id": item["call_id"],
            "name": str(item.get("name", "")),
            "input": item.get("arguments", ""),
        }
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if kind == "function_call_output" and isinstance(item.get("call_id"), str) and item["call_id"]:
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output)
        call = {"id": item["call_id"], "name": "function_call_output"}
        return {"role": "tool", "content": text, "tool_calls": [call]}
    role = _ROLES.get(str(item.get("role")))
    if kind in (None, "message") and role is not None:
        return {"role": role, "content": _text(item.get("content")), "tool_calls": []}
    return None


def to_record(item: Mapping[str, Any]) -> dict[str, Any]:
    """One SDK item as one session message: its text (what observational memory reads) and,
    unless the message alone gives the item back as it was, the item whole (a tool call named
    ``RAW``, ``kept``: no model reads it, no token budget counts it)."""
    whole = _json(item)
    plain = _plain(whole)
    if plain is None:
        plain = {"role": "assistant", "content": _text(whole.get("content")), "tool_calls": []}
    elif (plain["content"].strip() or plain["tool_calls"]) and _item(
        plain["role"], plain["content"], plain["tool_calls"]
    ) == whole:
        return plain  # something said, and it gives the item back: stored alone
    kept = {"name": RAW, "input": whole, "kept": True}
    return {**plain, "tool_calls": [*plain["tool_calls"], kept]}


def _item(role: str, content: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    raw = next((c["input"] for c in calls if c.get("name") == RAW), None)
    if isinstance(raw, dict):
        return raw
    if role == "tool" and calls and calls[0].get("id"):
        return {"type": "function_call_output", "call_id": calls[0]["id"], "output": content}
    live = [c for c in calls if c.get("id")]
    if role == "assistant" and live and not content:
        arguments = live[0].get("input")
        return {
            "type": "function_call",
            "call_id": live[0]["id"],
            "name": live[0]["name"],
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        }
    return {"role": role if role != "tool" else "user", "content": content}


def to_item(message: SessionMessage) -> dict[str, Any]:
    """One session message as an SDK input item."""
    return _item(message.role, message.content, message.tool_calls)


class LaminaSession:
    """An Agents SDK session kept in lamina: ``Runner.run(agent, text, session=...)``."""

    def __init__(
        self,
        session_id: str,
        lamina: Lamina | AsyncLamina,
        *,
        tenant_id: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = check_session_key(session_id)
        self.session_settings = session_settings
        self._bridge = Bridge(lamina, tenant_id=tenant_id)

    @property
    def _sessions(self) -> Any:
        return self._bridge.ms.sessions

    async def _messages(self) -> list[SessionMessage]:
        found: list[SessionMessage] = await self._bridge.call(
            self._sessions.messages(self.session_id, tenant_id=self._bridge.tenant_id)
        )
        return found

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The conversation, oldest first: the latest ``limit`` items (none for 0, all for a
        negative limit, as the SDK's SQLiteSession)."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        messages = await self._messages()
        if limit is not None and limit >= 0:
            messages = messages[-limit:] if limit > 0 else []
        return [to_item(m) for m in messages]

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` in one transaction: all of them or, on an error, none."""
        records = [to_record(item) for item in items]
        check_kept(records, self._bridge.ms.settings.memory.max_content_length)
        if records:
            await self._bridge.call(
                self._sessions.append_many(
                    self.session_id, records, tenant_id=self._bridge.tenant_id
                )
            )

    async def pop_item(self) -> Any | None:
        messages = await self._messages()
        if not messages:
            return None
        last = messages[-1]
        await self._bridge.call(
            self._sessions.delete_messages(
                self.session_id, start=last.index, tenant_id=self._bridge.tenant_id
            )
        )
        return to_item(last)

    async def clear_session(self) -> None:
        """Delete the conversation, its observations and its reflections."""
        await self._bridge.call(
            self._sessions.delete_messages(self.session_id, tenant_id=self._bridge.tenant_id)
        )


def memory_instructions(
    lamina: Lamina | AsyncLamina,
    base: str,
    *,
    session_id: str,
    tenant_id: str | None = None,
    **identifiers: str,
) -> Callable[[Any, Any], Awaitable[str]]:
    """Dynamic instructions for an ``Agent``: ``base`` plus, every turn, the context for the
    conversation's topic and the session's reflections and observations (the same prompt
    the ContextAwareModel builds)."""
    bridge = Bridge(lamina, tenant_id=tenant_id)
    key = check_session_key(session_id)

    async def build() -> str:
        ms = bridge.ms
        recent = await ms.sessions.recent_messages(key, tenant_id=tenant_id)
        query = topic_query(from_records(recent))
        with session_scope(key, **identifiers):
            return await ms.context.build_prompt(
                base,
                query[: ms.context.settings.max_query_length],
                session_key=key,
                identifiers=identifiers,
                tenant_id=tenant_id,
            )

    async def instructions(context: Any, agent: Any) -> str:
        return await bridge.call(build())

    return instructions


def memory_tools(
    lamina: Lamina | AsyncLamina,
    *,
    layer: str = "user",
    tenant_id: str | None = None,
    **identifiers: str | None,
) -> list[FunctionTool]:
    """``remember`` and ``recall`` as Agents SDK function tools, for these identifiers."""
    bridge = Bridge(lamina, tenant_id=tenant_id)

    def wrap(tool: Any) -> FunctionTool:
        async def invoke(context: Any, arguments: str) -> str:
            result: str = await tool.run_json(arguments)
            return result

        return FunctionTool(
            name=tool.name,
            description=tool.description,
            params_json_schema=tool.parameters,
            on_invoke_tool=invoke,
        )

    return [wrap(t) for t in _memory_tools(bridge, layer=layer, **identifiers)]
