"""ChatModel over Anthropic's Messages API, through the official ``anthropic`` SDK."""

from __future__ import annotations

import json
from dataclasses import replace
from types import ModuleType
from typing import Any, ClassVar

import anthropic

from lamina.errors import ErrorCode, LaminaError
from lamina.llm.base import ChatMessage, ChatRequest, ChatResponse, ToolCall
from lamina.llm.sdk import SDKChatModel, malformed


def _arguments(text: str) -> Any:
    try:
        return json.loads(text or "{}")
    except json.JSONDecodeError:
        return {"input": text}


def _message(m: ChatMessage) -> dict[str, Any]:
    """Tool calls become tool_use blocks; a tool message a user turn with a tool_result."""
    if m.role == "tool":
        block = {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content}
        return {"role": "user", "content": [block]}
    if m.tool_calls:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
        blocks.extend(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _arguments(c.arguments)}
            for c in m.tool_calls
        )
        return {"role": m.role, "content": blocks}
    return {"role": m.role, "content": m.content}


class AnthropicChatModel(SDKChatModel):
    """``temperature`` is accepted for a uniform signature and not sent: the Messages API of
    anthropic SDK 2.x takes no sampling parameters (see docs/context.md)."""

    provider = "anthropic"
    sdk: ClassVar[ModuleType] = anthropic
    client_class = anthropic.AsyncAnthropic

    def _api_key(self, api_key: str | None) -> str:
        if not api_key:
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                "the anthropic chat model needs an API key (llm.api_key_env names the "
                "environment variable; default ANTHROPIC_API_KEY)",
            )
        return api_key

    def _options(self, request: ChatRequest) -> dict[str, Any]:
        system = request.system
        if request.json_output:
            system = (system + "\n\n" if system else "") + "Reply with one JSON object only."
        options: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": request.max_tokens or self._max_tokens,
            "messages": [_message(m) for m in request.messages if m.role != "system"],
        }
        if request.tools:
            options["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
        if request.tool_choice:
            choice = request.tool_choice
            options["tool_choice"] = (
                {"type": {"required": "any"}.get(choice, choice)}
                if choice in ("auto", "required", "none")
                else {"type": "tool", "name": choice}
            )
        # Anthropic takes system text apart from the messages.
        extra_system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        if extra_system:
            system = f"{system}\n\n{extra_system}" if system else extra_system
        if system:
            options["system"] = system
        return options

    async def _create(self, options: dict[str, Any]) -> Any:
        return await self._client.messages.create(**options)

    def _read(self, reply: Any) -> ChatResponse:
        blocks = getattr(reply, "content", None)
        if not isinstance(blocks, list):
            raise malformed("anthropic", "no content blocks")
        texts = [b.text for b in blocks if getattr(b, "type", None) == "text"]
        calls = tuple(
            ToolCall(str(b.id), str(b.name), json.dumps(getattr(b, "input", {}) or {}))
            for b in blocks
            if getattr(b, "type", None) == "tool_use"
        )
        if not texts and not calls:
            raise malformed("anthropic", "no text block in the reply")
        finish_reason = getattr(reply, "stop_reason", None)
        response = self._response(
            reply, "".join(texts), finish_reason, ("input_tokens", "output_tokens")
        )
        return replace(response, tool_calls=calls) if calls else response
