"""The tools the servers expose (A2A, MCP), declared once: one module per skill, each a
module-level handler per tool and that skill's part of the table; ``TOOLS`` is the whole
table, in the order the agent card and MCP's tools/list give them. A server binds them to
its runtime (``all_tools``) and runs each the one way ``ServerTool.run`` does (base.py).
Nothing here knows about A2A or MCP."""

from __future__ import annotations

from typing import Any

from lamina.runtime import AsyncLamina
from lamina.server.tools.base import MissingArguments, ServerTool, Tool, json_kind
from lamina.server.tools.context import CONTEXT_TOOLS
from lamina.server.tools.governance import GOVERNANCE_TOOLS
from lamina.server.tools.hierarchy import HIERARCHY_TOOLS
from lamina.server.tools.knowledge import KNOWLEDGE_TOOLS
from lamina.server.tools.memory import MEMORY_TOOLS

__all__ = [
    "TOOLS",
    "MissingArguments",
    "ServerTool",
    "Tool",
    "all_tools",
    "build_tools",
    "json_kind",
]

#: Every tool: the memory skill (memories, then the hierarchy), knowledge, governance,
#: context.
TOOLS: tuple[Tool[Any], ...] = (
    *MEMORY_TOOLS,
    *HIERARCHY_TOOLS,
    *KNOWLEDGE_TOOLS,
    *GOVERNANCE_TOOLS,
    *CONTEXT_TOOLS,
)


def all_tools(ms: AsyncLamina) -> list[ServerTool]:
    """Every tool of the table, bound to ``ms``: what the servers offer."""
    return [tool.bind(ms) for tool in TOOLS]


def build_tools(ms: AsyncLamina) -> list[ServerTool]:
    """The tools of the memory, knowledge and governance skills (all but context), bound
    to ``ms``."""
    return [tool.bind(ms) for tool in TOOLS if tool.skill != "context"]
