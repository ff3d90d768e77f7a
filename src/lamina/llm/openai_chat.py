"""ChatModel over any OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp server,
LM Studio via ``base_url``), through the official ``openai`` SDK."""

from __future__ import annotations

from types import ModuleType
from typing import Any, ClassVar

import openai

from lamina.llm.base import ChatRequest, ChatResponse
from lamina.llm.sdk import SDKChatModel, malformed


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
        messages.extend({"role": m.role, "content": m.content} for m in request.messages)
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
        return options

    async def _create(self, options: dict[str, Any]) -> Any:
        return await self._client.chat.completions.create(**options)

    def _read(self, reply: Any) -> ChatResponse:
        choices = getattr(reply, "choices", None)
        if not choices:
            raise malformed("openai", "no choices")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        if not isinstance(content, str):
            raise malformed("openai", "the first choice has no text content")
        finish_reason = getattr(choices[0], "finish_reason", None)
        return self._response(reply, content, finish_reason, ("prompt_tokens", "completion_tokens"))
