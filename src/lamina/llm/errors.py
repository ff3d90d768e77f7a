"""Provider SDK failures as LaminaErrors (both SDKs share the same exception shapes)."""

from __future__ import annotations

from typing import Any

from lamina.errors import ErrorCode, LaminaError


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    raw = headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def map_sdk_error(exc: Exception, provider: str, sdk: Any) -> LaminaError:
    """``sdk`` is the openai or anthropic module: their exception classes have one shape."""
    where = f"{provider} chat model"
    if isinstance(exc, sdk.APITimeoutError):
        return LaminaError(ErrorCode.PROVIDER_ERROR, f"{where}: the request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        return LaminaError(ErrorCode.PROVIDER_ERROR, f"{where}: cannot connect ({exc})")
    if isinstance(exc, sdk.RateLimitError):
        return LaminaError(
            ErrorCode.RATE_LIMITED, f"{where}: rate limited", retry_after=_retry_after(exc)
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
