"""What every part of ``ms.sessions`` shares: the session store, settings, token counter,
retries, the session keys and message checks, and the un-observed token counts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from lamina.checks import check_key, invalid
from lamina.config import ObservationalMemorySettings
from lamina.memory.core import ServiceCore
from lamina.observational.ports import SessionStore
from lamina.retry import RetryPolicy
from lamina.tokens import TokenCounter

ROLES = frozenset({"system", "user", "assistant", "tool"})
MAX_SESSION_KEY = 256
Key = tuple[str, str]  # (tenant, session key)


def check_session_key(value: object) -> str:
    return check_key("session_key", value, strip=False, max_length=MAX_SESSION_KEY)


def check_tool_calls(calls: object) -> list[dict[str, Any]]:
    if calls is None:
        return []
    if not isinstance(calls, list | tuple):
        raise invalid(
            "tool_calls must be a list of {name, input, output, id?, kept?}", "tool_calls"
        )
    out = []
    for call in calls:
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise invalid("each tool call needs a string name", "tool_calls")
        unknown = set(call) - {"id", "name", "input", "output", "kept"}
        if unknown:
            raise invalid(f"unknown tool call field(s): {sorted(unknown)}", "tool_calls")
        item = {"name": call["name"], "input": call.get("input"), "output": call.get("output")}
        if call.get("id") is not None:
            if not isinstance(call["id"], str) or not call["id"] or len(call["id"]) > 256:
                raise invalid(
                    "a tool call id must be a non-empty string of at most 256 characters",
                    "tool_calls",
                )
            item = {"id": call["id"], **item}
        if call.get("kept") is not None:
            if not isinstance(call["kept"], bool):
                raise invalid("a tool call's kept must be true or false", "tool_calls")
            if call["kept"]:
                item["kept"] = True
        out.append(item)
    return out


def said(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls that are part of the conversation: not those ``kept`` (a framework
    adapter's copy of the message as its framework gave it, stored to give it back, which
    no model reads and no token budget counts)."""
    return [c for c in calls if not c.get("kept")]


class SessionCore(ServiceCore):
    """What every part of ``ms.sessions`` shares: the session store, the settings, the token
    counter, the retries and limits, and the un-observed token counts of this process."""

    def __init__(
        self,
        sessions: SessionStore,
        settings: ObservationalMemorySettings,
        *,
        default_tenant: str,
        counter: TokenCounter,
        retry: RetryPolicy,
        ready: Callable[[], Awaitable[None]],
        max_content_length: int,
    ) -> None:
        super().__init__(default_tenant=default_tenant, ready=ready)
        self.settings = settings
        self.sessions = sessions
        self.counter = counter
        self.retry = retry
        self.max_content = max_content_length
        #: Un-observed message tokens per session, as this process last counted them.
        self.unobserved: dict[Key, int] = {}

    def tenant(self, tenant_id: str | None) -> str:
        """The tenant a call acts for (the one given, else the default; checked)."""
        return self._tenant(tenant_id)

    async def ready(self) -> None:
        """Wait for the start-up (the store opened and migrated)."""
        await self._ready()

    async def call(self, operation: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """``fn`` once the store is ready, retried as ``operation``."""
        await self._ready()
        return await self.retry.run(operation, fn)

    async def count_unobserved(self, key: Key) -> int:
        """The tokens of the session's messages the observer has not seen, as stored."""
        through = await self.sessions.observed_through(*key)
        rest = await self.sessions.list_messages(*key, start=through + 1)
        return sum(m.token_count for m in rest)
