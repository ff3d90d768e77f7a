"""How every call of the thread service runs, threads and tasks alike: it waits for the
start-up (the store opened and migrated), retries a transient failure when the operation
may be repeated, and is counted (operations, latency, errors by code), as the memory
service's calls are. The tenant is checked by each call before it runs."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from lamina.errors import ErrorCode, LaminaError
from lamina.metrics import ThreadMetrics
from lamina.retry import RetryPolicy

T = TypeVar("T")


async def _started() -> None:
    """The start-up hook of a service built without one: nothing to wait for."""


class Calls:
    """The start-up, retries and metrics of one thread service."""

    def __init__(
        self,
        *,
        retry: RetryPolicy | None = None,
        ready: Callable[[], Awaitable[None]] | None = None,
        metrics: ThreadMetrics | None = None,
    ) -> None:
        """``retry``: default, no retry; ``ready``: default, nothing to wait for;
        ``metrics``: default, nothing counted."""
        self.retry = retry or RetryPolicy(max_retries=0)
        self._ready = ready or _started
        self._metrics = metrics

    async def run(
        self, operation: str, call: Callable[[], Awaitable[T]], *, retried: bool = True
    ) -> T:
        """``call`` once the start-up is done, retried (unless ``retried`` is False: a write
        that must not land twice) and counted under ``operation``."""
        started = time.perf_counter()
        if self._metrics is not None:
            self._metrics.operations.labels(operation).inc()
        try:
            await self._ready()
            return await (self.retry.run(operation, call) if retried else call())
        except LaminaError as exc:
            self._count_error(operation, exc.code)
            raise
        except Exception:
            self._count_error(operation, ErrorCode.INTERNAL_ERROR)
            raise
        finally:
            if self._metrics is not None:
                self._metrics.latency.labels(operation).observe(time.perf_counter() - started)

    def _count_error(self, operation: str, code: ErrorCode) -> None:
        if self._metrics is not None:
            self._metrics.errors.labels(operation, code.value).inc()
