"""ChatModel over Anthropic's Messages API, through the official ``anthropic`` SDK."""

from __future__ import annotations

from typing import Any

import anthropic

from lamina.errors import ErrorCode, LaminaError
from lamina.llm.base import ChatRequest, ChatResponse
from lamina.llm.errors import malformed, map_sdk_error


class AnthropicChatModel:
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
        if not api_key:
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                "the anthropic chat model needs an API key (llm.api_key_env names the "
                "environment variable; default ANTHROPIC_API_KEY)",
            )
        self.model_id = model
        self._max_tokens = max_tokens
        del temperature  # accepted for a uniform signature; see generate()
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    async def generate(self, request: ChatRequest) -> ChatResponse:
        system = request.system
        if request.json_output:
            system = (system + "\n\n" if system else "") + "Reply with one JSON object only."
        options: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": request.max_tokens or self._max_tokens,
            "messages": [
                {"role": m.role, "content": m.content}
                for m in request.messages
                if m.role != "system"
            ],
        }
        # Anthropic takes system text apart from the messages.
        extra_system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        if extra_system:
            system = f"{system}\n\n{extra_system}" if system else extra_system
        if system:
            options["system"] = system
        # The Messages API of anthropic SDK 2.x takes no sampling parameters: temperature is
        # not sent (see docs/context.md).
        try:
            message = await self._client.messages.create(**options)
        except (anthropic.APIError, ValueError) as exc:
            raise map_sdk_error(exc, "anthropic", anthropic) from exc
        blocks = getattr(message, "content", None)
        if not isinstance(blocks, list):
            raise malformed("anthropic", "no content blocks")
        texts = [b.text for b in blocks if getattr(b, "type", None) == "text"]
        if not texts:
            raise malformed("anthropic", "no text block in the reply")
        usage = getattr(message, "usage", None)
        return ChatResponse(
            content="".join(texts),
            model=str(getattr(message, "model", self.model_id) or self.model_id),
            finish_reason=getattr(message, "stop_reason", None),
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
        )

    async def aclose(self) -> None:
        await self._client.close()
