"""What the SDK-backed chat models share: the client (key, base_url, timeout), the call and
its retries (lamina's policy, the one layer: the SDK's own are off), provider failures as
LaminaErrors, and the reply as a ChatResponse.

The openai and anthropic SDKs are built alike (one async client class taking the same
options, one exception hierarchy of the same shape), so each provider module says only how a
ChatRequest becomes the provider's request and how its reply is read.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import ModuleType
from typing import Any, ClassVar

from lamina.errors import ErrorCode, LaminaError
from lamina.llm.base import ChatRequest, ChatResponse
from lamina.retry import RetryPolicy, retry_after


class SDKChatModel(ABC):
    """A ChatModel over an official provider SDK (``sdk`` is the openai or anthropic module)."""

    provider: ClassVar[str]
    sdk: ClassVar[ModuleType]
    #: The SDK's async client class (``openai.AsyncOpenAI``, ``anthropic.AsyncAnthropic``).
    client_class: ClassVar[type[Any]]

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 1.0,
        retry: RetryPolicy | None = None,
        max_tokens: int = 1024,
        temperature: float | None = None,
    ) -> None:
        key = self._api_key(api_key)
        self.model_id = model
        self._max_tokens = max_tokens
        self._temperature = temperature
        #: The one retry layer of the model's calls (None: no retries): the SDK's own
        #: retries are off, or both would retry and multiply each other's attempts.
        self._retry = retry or RetryPolicy(max_retries=0)
        #: ``timeout`` bounds each attempt; connecting has its own, shorter bound, so that a
        #: host that never completes the connection fails as fast as one that refuses it.
        limits = self.sdk.Timeout(timeout, connect=min(connect_timeout, timeout))
        self._client: Any = self.client_class(
            api_key=key, base_url=base_url, timeout=limits, max_retries=0
        )

    @abstractmethod
    def _api_key(self, api_key: str | None) -> str:
        """The key the client is built with; CONFIGURATION_ERROR when there must be one."""

    @abstractmethod
    def _options(self, request: ChatRequest) -> dict[str, Any]:
        """The provider's request for ``request``."""

    @abstractmethod
    async def _create(self, options: dict[str, Any]) -> Any:
        """One call of the provider's API."""

    @abstractmethod
    def _read(self, reply: Any) -> ChatResponse:
        """The provider's reply as a ChatResponse; ``malformed()`` when it is not one."""

    async def generate(self, request: ChatRequest) -> ChatResponse:
        return self._read(await self._call(self._options(request)))

    async def _call(self, options: dict[str, Any]) -> Any:
        """One call of the provider's API, its transient failures retried by the policy."""

        async def attempt() -> Any:
            try:
                return await self._create(options)
            except (self.sdk.APIError, ValueError) as exc:
                raise map_sdk_error(exc, self.provider, self.sdk) from exc

        return await self._retry.run(f"{self.provider} chat model", attempt)

    def _response(
        self, reply: Any, content: str, finish_reason: str | None, usage: tuple[str, str]
    ) -> ChatResponse:
        """``usage`` names the reply's input and output token fields."""
        counts = getattr(reply, "usage", None)
        return ChatResponse(
            content=content,
            model=str(getattr(reply, "model", self.model_id) or self.model_id),
            finish_reason=finish_reason,
            input_tokens=getattr(counts, usage[0], None),
            output_tokens=getattr(counts, usage[1], None),
        )

    async def aclose(self) -> None:
        await self._client.close()


def map_sdk_error(exc: Exception, provider: str, sdk: Any) -> LaminaError:
    """``sdk`` is the openai or anthropic module: their exception classes have one shape."""
    where = f"{provider} chat model"
    if isinstance(exc, sdk.APITimeoutError):
        return LaminaError(ErrorCode.PROVIDER_ERROR, f"{where}: the request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        return LaminaError(ErrorCode.PROVIDER_ERROR, f"{where}: cannot connect ({exc})")
    if isinstance(exc, sdk.RateLimitError):
        return LaminaError(
            ErrorCode.RATE_LIMITED,
            f"{where}: rate limited",
            retry_after=retry_after(getattr(getattr(exc, "response", None), "headers", None)),
        )
    if isinstance(exc, sdk.AuthenticationError | sdk.PermissionDeniedError):
        return LaminaError(ErrorCode.UNAUTHORIZED, f"{where}: the API key was refused")
    if isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        if status >= 500 or status in (408, 409):
            return LaminaError(
                ErrorCode.PROVIDER_ERROR, f"{where}: server error {status}", retryable=True
            )
        return LaminaError(
            ErrorCode.PROVIDER_ERROR,
            f"{where}: request refused with status {status}: {exc.message}",
            retryable=False,
            details={"status": status},
        )
    if isinstance(exc, sdk.APIResponseValidationError | ValueError):
        return malformed(provider, str(exc))
    return LaminaError(ErrorCode.PROVIDER_ERROR, f"{where}: {type(exc).__name__}: {exc}")


def malformed(provider: str, what: str) -> LaminaError:
    return LaminaError(
        ErrorCode.PROVIDER_ERROR,
        f"{provider} chat model returned a malformed response: {what}",
        retryable=False,
    )
