"""The tools one server offers: the bound table (``all_tools``) plus the tools registered at
run time, found by name; and each tool as JSON for the agent card. The A2A dispatcher, the MCP
adapter and the gate's rate limit (``skill_of``) read the same registry."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lamina.errors import ErrorCode, LaminaError
from lamina.server.tools.base import ServerTool

__all__ = ["ToolRegistry", "describe"]


class ToolRegistry:
    """The tools the server offers; registering one changes the card (``version`` moves)."""

    def __init__(self, tools: Iterable[ServerTool] = ()) -> None:
        self._tools: dict[str, ServerTool] = {}
        self.version = 0
        for tool in tools:
            self.register(tool)

    def register(self, tool: ServerTool) -> None:
        self._tools[tool.name] = tool
        self.version += 1

    def unregister(self, name: str) -> None:
        if self._tools.pop(name, None) is not None:
            self.version += 1

    def get(self, name: str) -> ServerTool:
        tool = self._tools.get(name)
        if tool is None:
            raise LaminaError(
                ErrorCode.UNKNOWN_TOOL,
                f"unknown tool {name!r}",
                details={"tool": name, "tools": sorted(self._tools)},
            )
        return tool

    def all(self) -> list[ServerTool]:
        return list(self._tools.values())

    def skills(self) -> dict[str, list[ServerTool]]:
        out: dict[str, list[ServerTool]] = {}
        for tool in self._tools.values():
            out.setdefault(tool.skill, []).append(tool)
        return out

    def skill_of(self, name: str) -> str:
        tool = self._tools.get(name)
        return tool.skill if tool is not None else "unknown"


def describe(tools: Iterable[ServerTool]) -> list[dict[str, Any]]:
    """Each tool as JSON: name, skill, description, input schema, read-only flag."""
    return [
        {
            "name": t.name,
            "skill": t.skill,
            "description": t.description,
            "input_schema": t.input_schema,
            "read_only": t.read_only,
        }
        for t in tools
    ]
