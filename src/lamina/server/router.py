"""The LLM router: free text → one tool call, when a chat model is configured. Its context is
only the tools' names, descriptions and input schemas (and the request)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lamina.errors import ErrorCode, LaminaError
from lamina.llm.answers import parse_json_object
from lamina.llm.base import ChatModel, request
from lamina.server.tools import ServerTool

_INSTRUCTION = (
    "You route a request to one tool. Answer with one JSON object and nothing else: "
    '{"tool": "<name>", "arguments": {...}} to call a tool, or '
    '{"tool": null, "reply": "<short answer>"} when no tool fits. '
    "Use only the tools below and only arguments their schema allows.\n\nTools:\n"
)


@dataclass(frozen=True)
class Route:
    tool: str | None
    arguments: dict[str, Any]
    reply: str = ""


def _catalogue(tools: Sequence[ServerTool]) -> str:
    lines = []
    for tool in tools:
        schema = json.dumps(tool.input_schema, separators=(",", ":"), sort_keys=True)
        lines.append(f"- {tool.name}: {tool.description}\n  schema: {schema}")
    return "\n".join(lines)


class LLMRouter:
    def __init__(self, model: ChatModel, tools: Callable[[], Sequence[ServerTool]]) -> None:
        self.model = model
        self._tools = tools

    async def route(self, text: str) -> Route:
        tools = list(self._tools())
        answer = await self.model.generate(
            request(
                ("user", text),
                system=_INSTRUCTION + _catalogue(tools),
                max_tokens=512,
                temperature=0.0,
                json_output=True,
            )
        )
        decided = parse_json_object(answer.content)
        if decided is None:
            raise LaminaError(
                ErrorCode.PROVIDER_ERROR,
                "the router model did not answer with a JSON object",
                retryable=False,
            )
        tool = decided.get("tool")
        if tool is None:
            return Route(None, {}, str(decided.get("reply") or ""))
        names = {t.name for t in tools}
        if not isinstance(tool, str) or tool not in names:
            raise LaminaError(
                ErrorCode.PROVIDER_ERROR,
                f"the router model chose an unknown tool {tool!r}",
                retryable=False,
            )
        arguments = decided.get("arguments") or {}
        if not isinstance(arguments, dict):
            arguments = {}
        return Route(tool, arguments)

    async def aclose(self) -> None:
        await self.model.aclose()
