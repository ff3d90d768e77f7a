"""What the agent runtime tells the retriever: its tools and its session state.

``ToolRegistryProvider`` and ``RuntimeContextProvider`` are the protocols; the adapters are
ready-made implementations over a list of tool descriptors and over mutable session state.
The session key of the current call travels in a context variable (``session_scope``), set
by the caller or the server for each call, never fixed when an object is built.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

_SESSION: ContextVar[str | None] = ContextVar("lamina_session_key", default=None)
_IDENTIFIERS: ContextVar[Mapping[str, str] | None] = ContextVar("lamina_identifiers", default=None)

#: Channels recognised in a session key "channel:id:subid"; anything else is "direct".
CHANNELS = frozenset({"telegram", "discord", "slack"})


def current_session() -> str | None:
    """The session key of the call in progress, or None."""
    return _SESSION.get()


def current_identifiers() -> Mapping[str, str]:
    """The memory identifiers (user_id, project_id, ...) of the call in progress."""
    return _IDENTIFIERS.get() or {}


@contextmanager
def session_scope(session_key: str | None, **identifiers: str) -> Iterator[None]:
    """Run a block (and the tasks it starts) with ``session_key`` as the current session and
    ``identifiers`` (user_id=..., project_id=...) as whose memories it may read."""
    token = _SESSION.set(session_key)
    ids_token = _IDENTIFIERS.set(dict(identifiers) or None)
    try:
        yield
    finally:
        _IDENTIFIERS.reset(ids_token)
        _SESSION.reset(token)


def channel_of(session_key: str | None) -> str:
    if not session_key or ":" not in session_key:
        return "direct"
    prefix = session_key.split(":", 1)[0].strip().lower()
    return prefix if prefix in CHANNELS else "direct"


@dataclass(frozen=True)
class ToolDescriptor:
    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class ToolRegistryProvider(Protocol):
    def list_tools(self) -> list[ToolDescriptor]: ...

    def search_tools(self, query: str, limit: int) -> list[ToolDescriptor]: ...


class ToolRegistryAdapter:
    """A ToolRegistryProvider over a list of tools. The list is copied: changing the
    caller's list afterwards changes nothing here."""

    def __init__(self, tools: Iterable[ToolDescriptor | Mapping[str, Any] | Any]) -> None:
        self._tools = tuple(_descriptor(t) for t in tools)

    def list_tools(self) -> list[ToolDescriptor]:
        return list(self._tools)

    def search_tools(self, query: str, limit: int) -> list[ToolDescriptor]:
        """Tools whose name or description contains ``query``, ignoring case."""
        if limit <= 0:
            return []
        needle = query.casefold()
        found = [
            t
            for t in self._tools
            if needle in t.name.casefold() or needle in t.description.casefold()
        ]
        return found[:limit]


def _descriptor(tool: ToolDescriptor | Mapping[str, Any] | Any) -> ToolDescriptor:
    """Accept descriptors, mappings with name/description, or objects with those attributes
    (agent framework tools)."""
    if isinstance(tool, ToolDescriptor):
        return tool
    if isinstance(tool, Mapping):
        name, description = tool.get("name"), tool.get("description", "")
        parameters = tool.get("parameters") or tool.get("input_schema") or {}
    else:
        name = getattr(tool, "name", None)
        description = getattr(tool, "description", "") or ""
        parameters = getattr(tool, "parameters", None) or {}
    if not isinstance(name, str) or not name:
        raise TypeError(f"a tool needs a non-empty name: {tool!r}")
    return ToolDescriptor(name, str(description or ""), dict(parameters))


@dataclass(frozen=True)
class RuntimeContext:
    session_key: str
    channel_type: str
    active_tool_count: int
    encryption_enabled: bool
    knowledge_enabled: bool
    memory_enabled: bool

    def describe(self) -> str:
        def yes(flag: bool) -> str:
            return "true" if flag else "false"

        return (
            f"Session: {self.session_key or 'none'} | Channel: {self.channel_type} | "
            f"Tools: {self.active_tool_count} | Encryption: {yes(self.encryption_enabled)} | "
            f"Knowledge: {yes(self.knowledge_enabled)} | Memory: {yes(self.memory_enabled)}"
        )


@runtime_checkable
class RuntimeContextProvider(Protocol):
    def get_runtime_context(self) -> RuntimeContext: ...


class RuntimeContextAdapter:
    """Session state the runtime updates (``set_session``) and the retriever reads; safe to
    use from many threads at once.

    One adapter serves concurrent calls of different sessions: while a call runs inside
    ``session_scope`` its own session key wins over the last one set, so a call never reports
    another call's session."""

    def __init__(
        self,
        *,
        active_tool_count: int = 0,
        encryption_enabled: bool = False,
        knowledge_enabled: bool = True,
        memory_enabled: bool = True,
    ) -> None:
        self._lock = threading.Lock()
        self._session_key = ""
        self._channel = "direct"
        self._tools = active_tool_count
        self._encryption = encryption_enabled
        self._knowledge = knowledge_enabled
        self._memory = memory_enabled

    def set_session(self, session_key: str | None) -> None:
        with self._lock:
            self._session_key = session_key or ""
            self._channel = channel_of(session_key)

    def set_active_tool_count(self, count: int) -> None:
        with self._lock:
            self._tools = max(0, int(count))

    def get_runtime_context(self) -> RuntimeContext:
        scoped = current_session()
        with self._lock:
            key = self._session_key if scoped is None else scoped
            return RuntimeContext(
                key,
                self._channel if scoped is None else channel_of(scoped),
                self._tools,
                self._encryption,
                self._knowledge,
                self._memory,
            )
