"""ChatModel over any OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp server,
LM Studio via ``base_url``), through the official ``openai`` SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from types import ModuleType
from typing import Any, ClassVar

import openai

from lamina.llm.base import ChatChunk, ChatMessage, ChatRequest, ChatResponse, ToolCall
from lamina.llm.sdk import SDKChatModel, malformed, map_sdk_error


def _message(m: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
        out["content"] = m.content or None
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id or ""
    return out


def _tool_choice(choice: str) -> Any:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


class OpenAIChatModel(SDKChatModel):
    provider = "openai"
    sdk: ClassVar[ModuleType] = openai
    client_class = openai.AsyncOpenAI

    def _api_key(self, api_key: str | None) -> str:
        # Local servers take any key; the SDK insists on one.
        return api_key or "not-needed"

    def _options(self, request: ChatRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(_message(m) for m in request.messages)
        options: dict[str, Any] = {
            "model": self.model_id,
            "messages": messages,
            "max_tokens": request.max_tokens or self._max_tokens,
        }
        temperature = request.temperature if request.temperature is not None else self._temperature
        if temperature is not None:
            options["temperature"] = temperature
        if request.json_output:
            options["response_format"] = {"type": "json_object"}
        if request.tools:
            options["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
        if request.tool_choice:
            options["tool_choice"] = _tool_choice(request.tool_choice)
        return options

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The reply as it is generated (the SDK's streaming call); the last chunk carries
        the whole reply, tool calls put together from their pieces."""
        options = {**self._options(request), "stream": True}
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        model = self.model_id
        try:
            events = await self._call(options)  # opening the stream is retried
            async for event in events:
                model = str(getattr(event, "model", None) or model)
                for choice in getattr(event, "choices", None) or []:
                    finish = getattr(choice, "finish_reason", None) or finish
                    delta = getattr(choice, "delta", None)
                    piece = getattr(delta, "content", None)
                    if isinstance(piece, str) and piece:
                        text.append(piece)
                        yield ChatChunk(delta=piece)
                    for call in getattr(delta, "tool_calls", None) or []:
                        slot = calls.setdefault(int(call.index), {"id": "", "name": "", "args": ""})
                        function = getattr(call, "function", None)
                        slot["id"] = getattr(call, "id", None) or slot["id"]
                        slot["name"] = getattr(function, "name", None) or slot["name"]
                        slot["args"] += getattr(function, "arguments", None) or ""
        except (self.sdk.APIError, ValueError) as exc:
            raise map_sdk_error(exc, self.provider, self.sdk) from exc
        tool_calls = tuple(
            ToolCall(c["id"], c["name"], c["args"] or "{}") for _, c in sorted(calls.items())
        )
        reply = ChatResponse("".join(text), model, finish, tool_calls=tool_calls)
        yield ChatChunk(done=True, response=reply)

    async def _create(self, options: dict[str, Any]) -> Any:
        return await self._client.chat.completions.create(**options)

    def _read(self, reply: Any) -> ChatResponse:
        choices = getattr(reply, "choices", None)
        if not choices:
            raise malformed("openai", "no choices")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        calls = tuple(
            ToolCall(str(c.id), str(c.function.name), str(c.function.arguments or "{}"))
            for c in getattr(message, "tool_calls", None) or []
            if getattr(c, "function", None) is not None
        )
        if content is None and calls:
            content = ""
        if not isinstance(content, str):
            raise malformed("openai", "the first choice has no text content")
        finish_reason = getattr(choices[0], "finish_reason", None)
        response = self._response(
            reply, content, finish_reason, ("prompt_tokens", "completion_tokens")
        )
        return replace(response, tool_calls=calls) if calls else response
