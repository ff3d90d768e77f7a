"""Chat models: the ChatModel protocol, OpenAI-compatible and Anthropic providers."""

from __future__ import annotations

import os

from lamina.config import LLMSettings
from lamina.errors import ErrorCode, LaminaError
from lamina.extras import require
from lamina.llm.base import (
    ChatMessage,
    ChatModel,
    ChatRequest,
    ChatResponse,
    ToolCall,
    ToolSpec,
    request,
)

__all__ = [
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "ToolCall",
    "ToolSpec",
    "build_chat_model",
    "request",
]


def build_chat_model(settings: LLMSettings) -> ChatModel:
    """The chat model the settings name; CONFIGURATION_ERROR when they cannot work."""
    if not settings.model:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            "no chat model configured: set llm.model (LAMINA_LLM__MODEL)",
        )
    options = {
        "base_url": settings.base_url,
        "timeout": settings.timeout_seconds,
        "connect_timeout": settings.connect_timeout_seconds,
        "retry": settings.retry_policy(),
        "max_tokens": settings.max_tokens,
        "temperature": settings.temperature,
    }
    if settings.provider == "anthropic":
        require("anthropic")
        from lamina.llm.anthropic_chat import AnthropicChatModel

        key = os.environ.get(settings.api_key_env or "ANTHROPIC_API_KEY")
        return AnthropicChatModel(settings.model, api_key=key, **options)  # type: ignore[arg-type]
    require("openai")
    from lamina.llm.openai_chat import OpenAIChatModel

    key = os.environ.get(settings.api_key_env or "OPENAI_API_KEY")
    if not key and not settings.base_url:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            "the OpenAI chat model needs an API key (llm.api_key_env, default OPENAI_API_KEY) "
            "or a base_url of a local server",
        )
    return OpenAIChatModel(settings.model, api_key=key, **options)  # type: ignore[arg-type]
