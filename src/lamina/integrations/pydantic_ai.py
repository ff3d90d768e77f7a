"""A pydantic-ai toolset over lamina memory (``pip install 'lamina[pydantic-ai]'``):
``Agent(model, toolsets=[memory_toolset(ms, user_id="alice")])`` gives the agent
``remember`` and ``recall``."""

from __future__ import annotations

from typing import Any

from lamina.extras import require

require("pydantic-ai")

from pydantic_ai import FunctionToolset  # noqa: E402

from lamina.facade import Lamina  # noqa: E402
from lamina.integrations.bridge import Bridge  # noqa: E402
from lamina.integrations.tools import memory_tools  # noqa: E402
from lamina.runtime import AsyncLamina  # noqa: E402

__all__ = ["memory_toolset"]


def memory_toolset(
    lamina: Lamina | AsyncLamina,
    *,
    layer: str = "user",
    tenant_id: str | None = None,
    **identifiers: str | None,
) -> FunctionToolset[Any]:
    """``remember`` (into ``layer`` for ``identifiers``) and ``recall`` (across the layers
    they reach). A LaminaError is the tool's answer, ``{"error": {code, message}}``."""
    tools = {
        t.name: t
        for t in memory_tools(Bridge(lamina, tenant_id=tenant_id), layer=layer, **identifiers)
    }

    async def remember(content: str) -> dict[str, Any]:
        """Store a fact worth remembering later.

        Args:
            content: The fact, one sentence.
        """
        return await tools["remember"].run({"content": content})

    async def recall(query: str, limit: int = 5) -> dict[str, Any]:
        """Search long-term memory for facts relevant to a question.

        Args:
            query: What to look for.
            limit: At most this many.
        """
        return await tools["recall"].run({"query": query, "limit": limit})

    return FunctionToolset([remember, recall])
