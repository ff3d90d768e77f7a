"""ChatModel over any OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp server,
LM Studio via ``base_url``), through the official ``openai`` SDK."""

from __future__ import annotations

from typing import Any

import openai

from lamina.llm.base import ChatRequest, ChatResponse
from lamina.llm.errors import malformed, map_sdk_error


class OpenAIChatModel:
    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        max_tokens: int = 1024,
        temperature: float | None = None,
    ) -> None:
        self.model_id = model
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._client = openai.AsyncOpenAI(
            # Local servers take any key; the SDK insists on one.
            api_key=api_key or "not-needed",
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
        )

    async def generate(self, request: ChatRequest) -> ChatResponse:
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
        try:
            completion = await self._client.chat.completions.create(**options)
        except (openai.APIError, ValueError) as exc:
            raise map_sdk_error(exc, "openai", openai) from exc
        choices = getattr(completion, "choices", None)
        if not choices:
            raise malformed("openai", "no choices")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        if not isinstance(content, str):
            raise malformed("openai", "the first choice has no text content")
        usage = getattr(completion, "usage", None)
        return ChatResponse(
            content=content,
            model=str(getattr(completion, "model", self.model_id) or self.model_id),
            finish_reason=getattr(choices[0], "finish_reason", None),
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
        )

    async def aclose(self) -> None:
        await self._client.close()
