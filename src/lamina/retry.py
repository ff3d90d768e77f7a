"""Retrying transient failures: exponential backoff, and the delay a provider asks for."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from lamina.errors import ErrorCode, LaminaError

T = TypeVar("T")
log = logging.getLogger(__name__)


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """The seconds a provider's ``Retry-After`` header asks to wait (None: not said)."""
    raw = headers.get("retry-after") if headers is not None else None
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class RetryPolicy:
    """Up to ``max_retries`` retries after the first attempt.

    The waits are initial_delay, then times multiplier each time, capped at max_delay.
    ``jitter`` (0 to 1) shortens each wait by a random part of up to that fraction, so that
    clients failing together do not retry together; a provider's Retry-After is kept as is.
    """

    max_retries: int = 3
    initial_delay: float = 1.0
    multiplier: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.0

    def delay(self, retry_number: int, error: LaminaError) -> float:
        """Seconds to wait before retry ``retry_number`` (1-based)."""
        if error.code is ErrorCode.RATE_LIMITED and error.retry_after is not None:
            return min(max(error.retry_after, 0.0), self.max_delay)
        wait = min(self.initial_delay * self.multiplier ** (retry_number - 1), self.max_delay)
        if self.jitter:
            wait *= 1.0 - self.jitter * random.random()
        return float(wait)

    async def run(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call``; retry it while it raises a retryable LaminaError."""
        retry = 0
        while True:
            try:
                return await call()
            except LaminaError as exc:
                if not exc.retryable or retry >= self.max_retries:
                    raise
                retry += 1
                wait = self.delay(retry, exc)
                log.warning(
                    "%s failed with %s (%s); retry %d/%d in %.2fs",
                    operation,
                    exc.code.value,
                    exc.message,
                    retry,
                    self.max_retries,
                    wait,
                )
                await asyncio.sleep(wait)
