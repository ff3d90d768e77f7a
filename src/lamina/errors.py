"""Every failure a caller can cause: one ErrorCode enum and one exception type."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """Stable error codes. The value is what the CLI and the network print."""

    MISSING_IDENTIFIER = "MISSING_IDENTIFIER"
    INVALID_LAYER = "INVALID_LAYER"
    INVALID_FILTER = "INVALID_FILTER"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    CONTENT_TOO_LONG = "CONTENT_TOO_LONG"
    QUERY_TOO_LONG = "QUERY_TOO_LONG"
    MEMORY_NOT_FOUND = "MEMORY_NOT_FOUND"
    ITEM_NOT_FOUND = "ITEM_NOT_FOUND"
    ITEM_EXISTS = "ITEM_EXISTS"
    INVALID_TRANSITION = "INVALID_TRANSITION"
    INVALID_FRONT_MATTER = "INVALID_FRONT_MATTER"
    POLICY_VIOLATION = "POLICY_VIOLATION"
    REPOSITORY_ERROR = "REPOSITORY_ERROR"
    CONFLICT = "CONFLICT"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    THREAD_EXPIRED = "THREAD_EXPIRED"
    THREAD_STATE_TOO_LARGE = "THREAD_STATE_TOO_LARGE"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    EMBEDDING_FAILED = "EMBEDDING_FAILED"
    PROVIDER_ERROR = "PROVIDER_ERROR"
    RATE_LIMITED = "RATE_LIMITED"
    UNAUTHORIZED = "UNAUTHORIZED"
    CONFIGURATION_ERROR = "CONFIGURATION_ERROR"
    INTERNAL_ERROR = "INTERNAL_ERROR"


#: Codes whose failures may succeed when the same call is made again later.
RETRYABLE_CODES = frozenset({ErrorCode.PROVIDER_ERROR, ErrorCode.RATE_LIMITED})


class LaminaError(Exception):
    """The one exception type lamina raises on purpose.

    ``code`` says what went wrong, ``retryable`` whether trying again may help,
    ``details`` carries structured facts (the missing identifier, the max length, ...).
    ``retry_after`` is the delay in seconds a provider asked for (RATE_LIMITED).
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.retryable = code in RETRYABLE_CODES if retryable is None else retryable
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view, safe to show to the caller."""
        out: dict[str, Any] = {
            "code": self.code.value,
            "message": self.message,
            "retryable": self.retryable,
            "details": self.details,
        }
        if self.retry_after is not None:
            out["retry_after"] = self.retry_after
        return out

    def __repr__(self) -> str:
        return f"LaminaError({self.code.value}, {self.message!r})"
