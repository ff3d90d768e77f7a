"""The memory tools every framework adapter offers an agent, written once: ``remember``
stores a memory in one scope, ``recall`` searches the layers the identifiers reach. Each
adapter wraps them in its framework's tool type. A LaminaError becomes the tool's answer
(``{"error": {"code", "message"}}``): the model sees what was wrong, the run goes on."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lamina.context.tools import object_schema
from lamina.errors import ErrorCode, LaminaError
from lamina.integrations.bridge import Bridge, check_identifier_names
from lamina.memory.layers import parse_layer


@dataclass(frozen=True)
class MemoryTool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]

    async def run_json(self, arguments: str) -> str:
        """The tool on JSON arguments, its answer as JSON (errors included)."""
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return _error(LaminaError(ErrorCode.INVALID_ARGUMENT, f"arguments: {exc}"))
        if not isinstance(parsed, dict):
            return _error(LaminaError(ErrorCode.INVALID_ARGUMENT, "arguments must be an object"))
        return json.dumps(await self.run(parsed), ensure_ascii=False, default=str)


def _error(exc: LaminaError) -> str:
    return json.dumps({"error": {"code": exc.code.value, "message": exc.message}})


Run = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]


def _answering(run: Run) -> Run:
    """``run``, with a LaminaError as its answer instead of an exception."""

    async def guarded(arguments: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return await run(arguments)
        except LaminaError as exc:
            return {"error": {"code": exc.code.value, "message": exc.message}}

    return guarded


def memory_tools(
    bridge: Bridge, *, layer: str = "user", **identifiers: str | None
) -> list[MemoryTool]:
    """``remember`` (into ``layer`` for ``identifiers``) and ``recall`` (across the layers
    they reach). Unknown identifiers or layer: INVALID_ARGUMENT / INVALID_LAYER now."""
    scope = parse_layer(layer).value
    check_identifier_names(identifiers)
    ids: dict[str, Any] = {k: v for k, v in identifiers.items() if v is not None}

    def text(arguments: Mapping[str, Any], name: str) -> str:
        value = arguments.get(name)
        if not isinstance(value, str):
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, f"{name} must be a string")
        return value

    async def remember(arguments: Mapping[str, Any]) -> dict[str, Any]:
        entry = await bridge.call(
            bridge.ms.memory.add(
                text(arguments, "content"), layer=scope, tenant_id=bridge.tenant_id, **ids
            )
        )
        return {"id": entry.id, "layer": entry.layer.value, "content": entry.content}

    async def recall(arguments: Mapping[str, Any]) -> dict[str, Any]:
        limit = arguments.get("limit", 5)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, "limit must be an integer")
        hits = await bridge.call(
            bridge.ms.memory.search(
                text(arguments, "query"), limit=limit, tenant_id=bridge.tenant_id, **ids
            )
        )
        return {
            "memories": [
                {"content": h.memory.content, "layer": h.memory.layer.value, "score": h.score}
                for h in hits
            ]
        }

    return [
        MemoryTool(
            "remember",
            f"Store a fact worth remembering later (in the {scope} memory).",
            object_schema(
                ["content"],
                content={"type": "string", "description": "The fact, one sentence."},
            ),
            _answering(remember),
        ),
        MemoryTool(
            "recall",
            "Search long-term memory for facts relevant to a question.",
            object_schema(
                ["query", "limit"],
                query={"type": "string", "description": "What to look for."},
                limit={"type": "integer", "description": "At most this many (5)."},
            ),
            _answering(recall),
        ),
    ]
