"""The ecosystem adapter interface: what every protocol adapter (A2A, MCP) offers, on top of
the same tools and the same session context."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Protocol

from lamina.runtime import AsyncLamina
from lamina.server.session import session_context
from lamina.server.tools import ServerTool
from lamina.server.tools.registry import ToolRegistry


class EcosystemAdapter(Protocol):
    def get_memory_tools(self) -> list[Any]:
        """The memory tools in the ecosystem's own form."""
        ...

    def get_knowledge_tools(self) -> list[Any]:
        """Every tool but the memory ones (knowledge, governance, context), in the
        ecosystem's own form."""
        ...

    async def get_session_context(
        self, tenant: str, identifiers: Mapping[str, str], query: str = ""
    ) -> dict[str, Any]:
        """Relevant memories and active governance constraints for a new session."""
        ...


class ToolSurface(ABC):
    """The shared half of every adapter; subclasses say how one tool looks natively."""

    def __init__(self, ms: AsyncLamina, registry: ToolRegistry) -> None:
        self.ms = ms
        self.registry = registry

    @abstractmethod
    def native(self, tool: ServerTool) -> Any:
        """One tool in the ecosystem's own form."""

    def get_memory_tools(self) -> list[Any]:
        return [self.native(t) for t in self.registry.all() if t.skill == "memory"]

    def get_knowledge_tools(self) -> list[Any]:
        return [self.native(t) for t in self.registry.all() if t.skill != "memory"]

    async def get_session_context(
        self, tenant: str, identifiers: Mapping[str, str], query: str = ""
    ) -> dict[str, Any]:
        return await session_context(
            self.ms,
            tenant,
            identifiers,
            query,
            limit=self.ms.settings.server.session_memories,
        )
